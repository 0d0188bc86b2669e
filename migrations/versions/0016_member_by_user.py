"""A user's memberships by an index on the user: every signed-in request reads them, and
the primary key (team, user) made it a walk of every membership (0.4 ms of PostgreSQL a
request at 10,000 teams, on the cheapest page and the dearest alike).

Revision ID: 0016
Revises: 0015
Create Date: 2026-12-05 05:20:00
"""

from __future__ import annotations

from alembic import op

revision = "0016"
down_revision = "0015"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_index("ix_team_members_user", "team_members", ["user_id", "team_id"])


def downgrade() -> None:
    op.drop_index("ix_team_members_user", table_name="team_members")
