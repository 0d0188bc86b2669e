"""vCluster chart upgrades: the installed version per team and the rollout's turn.

Revision ID: 0006
Revises: 0005
Create Date: 2026-11-30 08:00:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0006"
down_revision = "0005"
branch_labels = None
depends_on = None


def upgrade() -> None:
    # Plain ALTER TABLE (no batch copy): a copy of teams would drop 0004's triggers.
    op.add_column("teams", sa.Column("vcluster_version", sa.String(64), nullable=True))
    op.create_table(
        "chart_rollouts",
        sa.Column("version", sa.String(64), primary_key=True),
        sa.Column("state", sa.String(16), nullable=False),
        sa.Column(
            "team_id", sa.Integer, sa.ForeignKey("teams.id", ondelete="SET NULL"), nullable=True
        ),
        sa.Column("started_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("error", sa.Text, nullable=True),
        sa.Column("upgraded", sa.Integer, nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
    )


def downgrade() -> None:
    op.drop_table("chart_rollouts")
    op.drop_column("teams", "vcluster_version")
