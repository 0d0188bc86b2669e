"""GPU-hour budgets: a team's GPU-hours in one pool for a calendar month, with the
thresholds its people were told of and the limit lowered at 100 % where the admin chose.

Revision ID: 0026
Revises: 0025
Create Date: 2026-12-07 13:45:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0026"
down_revision = "0025"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "gpu_budgets",
        sa.Column("id", sa.Integer(), primary_key=True),
        sa.Column("team_id", sa.Integer(), sa.ForeignKey("teams.id"), nullable=False),
        sa.Column("pool_id", sa.Integer(), sa.ForeignKey("pools.id"), nullable=False),
        sa.Column("month", sa.String(7), nullable=False),
        sa.Column("gpu_hours_centi", sa.Integer(), nullable=False),
        sa.Column("stop_borrowing", sa.Boolean(), nullable=False),
        sa.Column("alerted", sa.Integer(), nullable=False),
        sa.Column("limited_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("limit_before", sa.Integer(), nullable=True),
        sa.Column("restored_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("set_by_id", sa.Integer(), sa.ForeignKey("users.id"), nullable=True),
        sa.Column("set_at", sa.DateTime(timezone=True), nullable=False),
        sa.UniqueConstraint("team_id", "pool_id", "month", name="uq_gpu_budgets_team_pool_month"),
        sa.CheckConstraint("gpu_hours_centi > 0", name="budget_positive"),
    )


def downgrade() -> None:
    op.drop_table("gpu_budgets")
