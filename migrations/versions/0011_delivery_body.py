"""A delivery's own text for its channel (the e-mail's, the chat line), from its event's
template.

Revision ID: 0011
Revises: 0010
Create Date: 2026-12-01 12:00:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0011"
down_revision = "0010"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("deliveries") as batch:
        batch.add_column(sa.Column("body", sa.Text(), nullable=False, server_default=""))


def downgrade() -> None:
    with op.batch_alter_table("deliveries") as batch:
        batch.drop_column("body")
