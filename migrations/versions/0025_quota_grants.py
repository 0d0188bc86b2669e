"""Temporary quota grants: a raise of a team's GPU guarantee (and limit) in one pool for
a window, reviewed like a quota change and applied from its start to its end.

Revision ID: 0025
Revises: 0024
Create Date: 2026-12-07 13:20:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0025"
down_revision = "0024"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "quota_grants",
        sa.Column("id", sa.Integer(), primary_key=True),
        sa.Column("team_id", sa.Integer(), sa.ForeignKey("teams.id"), nullable=False),
        sa.Column("pool_id", sa.Integer(), sa.ForeignKey("pools.id"), nullable=False),
        sa.Column("gpu_centi", sa.Integer(), nullable=False),
        sa.Column("limit_centi", sa.Integer(), nullable=False),
        sa.Column("starts_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("ends_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("reason", sa.Text(), nullable=False),
        sa.Column("status", sa.String(20), nullable=False),
        sa.Column("requested_by_id", sa.Integer(), sa.ForeignKey("users.id"), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("decided_by_id", sa.Integer(), sa.ForeignKey("users.id"), nullable=True),
        sa.Column("decided_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("decision_reason", sa.Text(), nullable=False),
        sa.Column("applied_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("released_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("ended_early_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("ended_by_id", sa.Integer(), sa.ForeignKey("users.id"), nullable=True),
        sa.Column("reminded_at", sa.DateTime(timezone=True), nullable=True),
        sa.CheckConstraint("ends_at > starts_at", name="ends_after_start"),
        sa.CheckConstraint("gpu_centi > 0 AND limit_centi >= 0", name="amounts_positive"),
    )
    op.create_index("ix_quota_grants_team", "quota_grants", ["team_id", "starts_at"])
    op.create_index("ix_quota_grants_due", "quota_grants", ["status", "released_at", "starts_at"])


def downgrade() -> None:
    op.drop_index("ix_quota_grants_due", table_name="quota_grants")
    op.drop_index("ix_quota_grants_team", table_name="quota_grants")
    op.drop_table("quota_grants")
