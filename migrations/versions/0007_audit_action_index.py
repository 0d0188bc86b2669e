"""The newest events of one action through an (action, id) index.

The overview's "repaired in the cluster" list filtered by a LIKE prefix, which no index
served: it scanned the whole audit log. It now asks for the exact action, newest first.

Revision ID: 0007
Revises: 0006
Create Date: 2026-11-30 09:20:00
"""

from __future__ import annotations

from alembic import op

revision = "0007"
down_revision = "0006"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.drop_index("ix_audit_events_action", table_name="audit_events")
    op.create_index("ix_audit_events_action_id", "audit_events", ["action", "id"])


def downgrade() -> None:
    op.drop_index("ix_audit_events_action_id", table_name="audit_events")
    op.create_index("ix_audit_events_action", "audit_events", ["action"])
