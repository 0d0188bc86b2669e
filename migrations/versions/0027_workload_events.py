"""What KAI did to each team's work, kept for its history: evictions (action, pods, the
team it was for, GPUs, how long the work had run) and long waits.

Revision ID: 0027
Revises: 0026
Create Date: 2026-12-07 17:00:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0027"
down_revision = "0026"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "workload_events",
        sa.Column("id", sa.Integer(), primary_key=True),
        sa.Column("team_id", sa.Integer(), sa.ForeignKey("teams.id"), nullable=False),
        sa.Column("kind", sa.String(16), nullable=False),
        sa.Column("key", sa.String(200), nullable=False),
        sa.Column("pool", sa.String(63), nullable=False),
        sa.Column("workload", sa.String(320), nullable=False),
        sa.Column("at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("action", sa.String(32), nullable=False),
        sa.Column("pods", sa.Integer(), nullable=False),
        sa.Column("gpu_centi", sa.Integer(), nullable=True),
        sa.Column("ran_seconds", sa.Integer(), nullable=True),
        sa.Column("by_team_id", sa.Integer(), sa.ForeignKey("teams.id"), nullable=True),
        sa.Column("details", sa.JSON(), nullable=False),
        sa.Column("notified_at", sa.DateTime(timezone=True), nullable=True),
        sa.UniqueConstraint("team_id", "key", name="uq_workload_events_team_key"),
        sa.CheckConstraint(
            "kind IN ('evicted', 'waited')", name="ck_workload_events_workloadeventkind_values"
        ),
    )
    op.create_index("ix_workload_events_at", "workload_events", ["at"])


def downgrade() -> None:
    op.drop_index("ix_workload_events_at", table_name="workload_events")
    op.drop_table("workload_events")
