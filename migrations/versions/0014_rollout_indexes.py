"""Indexes that find the teams behind a chart rollout without counting every team: the
overview asks on every view whether any team is behind, and counts only when one is.

Revision ID: 0014
Revises: 0013
Create Date: 2026-12-03 18:00:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0014"
down_revision = "0013"
branch_labels = None
depends_on = None

# As app/core/models.py writes them (a migration does not import the models it
# outlives).
HOLDERS = "status IN ('ready', 'failed', 'provisioning') AND vcluster_version IS NOT NULL"
TEMPLATE_BEHIND = (
    "template_version_id IS NOT NULL"
    " AND (template_installed_id IS NULL OR template_installed_id <> template_version_id)"
)


def upgrade() -> None:
    op.create_index(
        "ix_teams_chart_version",
        "teams",
        ["vcluster_version"],
        sqlite_where=sa.text(HOLDERS),
        postgresql_where=sa.text(HOLDERS),
    )
    behind = f"{HOLDERS} AND {TEMPLATE_BEHIND}"
    op.create_index(
        "ix_teams_template_behind",
        "teams",
        ["id"],
        sqlite_where=sa.text(behind),
        postgresql_where=sa.text(behind),
    )


def downgrade() -> None:
    op.drop_index("ix_teams_template_behind", table_name="teams")
    op.drop_index("ix_teams_chart_version", table_name="teams")
