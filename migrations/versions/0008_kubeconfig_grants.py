"""Personal kubeconfigs: one row per credential handed out (never the token itself).

Revision ID: 0008
Revises: 0007
Create Date: 2026-11-30 11:30:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0008"
down_revision = "0007"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "kubeconfig_grants",
        sa.Column("id", sa.Integer(), primary_key=True),
        sa.Column("team_id", sa.Integer(), sa.ForeignKey("teams.id"), nullable=False),
        sa.Column("user_id", sa.Integer(), sa.ForeignKey("users.id"), nullable=False),
        sa.Column("portal_role", sa.String(10), nullable=False),
        sa.Column("cluster_role", sa.String(253), nullable=False),
        sa.Column("account", sa.String(63), nullable=False),
        sa.Column("token_id", sa.String(64), nullable=False),
        sa.Column("simulated", sa.Boolean(), nullable=False),
        sa.Column("issued_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("expires_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("revoked_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("revoked_reason", sa.Text(), nullable=False),
        sa.Column("removed_at", sa.DateTime(timezone=True), nullable=True),
    )
    op.create_index(
        "ix_kubeconfig_grants_team_removed", "kubeconfig_grants", ["team_id", "removed_at"]
    )
    op.create_index("ix_kubeconfig_grants_user_id", "kubeconfig_grants", ["user_id"])


def downgrade() -> None:
    op.drop_table("kubeconfig_grants")
