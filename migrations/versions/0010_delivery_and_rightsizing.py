"""Notification delivery (mutes, webhooks, deliveries, digests) and right-sizing.

Revision ID: 0010
Revises: 0009
Create Date: 2026-11-30 14:00:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0010"
down_revision = "0009"
branch_labels = None
depends_on = None

WHEN = sa.DateTime(timezone=True)


def upgrade() -> None:
    with op.batch_alter_table("kubeconfig_grants") as batch:
        batch.add_column(sa.Column("expiry_told_at", WHEN, nullable=True))
    op.create_table(
        "notification_mutes",
        sa.Column("user_id", sa.Integer(), sa.ForeignKey("users.id"), primary_key=True),
        sa.Column("event", sa.String(40), primary_key=True),
        sa.Column("channel", sa.String(10), primary_key=True),
    )
    op.create_table(
        "webhooks",
        sa.Column("id", sa.Integer(), primary_key=True),
        sa.Column("scope", sa.String(20), nullable=False),
        sa.Column("team_id", sa.Integer(), sa.ForeignKey("teams.id"), nullable=True),
        sa.Column("kind", sa.String(10), nullable=False),
        sa.Column("url_sealed", sa.Text(), nullable=False),
        sa.Column("url_hint", sa.String(300), nullable=False),
        sa.Column("secret_sealed", sa.Text(), nullable=False),
        sa.Column("created_by_id", sa.Integer(), sa.ForeignKey("users.id"), nullable=False),
        sa.Column("created_at", WHEN, nullable=False),
    )
    op.create_index("uq_webhooks_scope_kind", "webhooks", ["scope", "kind"], unique=True)
    op.create_table(
        "deliveries",
        sa.Column("id", sa.Integer(), primary_key=True),
        sa.Column("channel", sa.String(10), nullable=False),
        sa.Column(
            "notification_id", sa.Integer(), sa.ForeignKey("notifications.id"), nullable=True
        ),
        sa.Column(
            "webhook_id",
            sa.Integer(),
            sa.ForeignKey("webhooks.id", ondelete="SET NULL"),
            nullable=True,
        ),
        sa.Column("team_id", sa.Integer(), sa.ForeignKey("teams.id"), nullable=True),
        sa.Column("event", sa.String(40), nullable=False),
        sa.Column("title", sa.String(300), nullable=False),
        sa.Column("link", sa.String(300), nullable=False),
        sa.Column("status", sa.String(10), nullable=False),
        sa.Column("attempts", sa.Integer(), nullable=False),
        sa.Column("next_attempt_at", WHEN, nullable=False),
        sa.Column("lease_owner", sa.String(100), nullable=True),
        sa.Column("lease_until", WHEN, nullable=True),
        sa.Column("last_error", sa.String(500), nullable=False),
        sa.Column("created_at", WHEN, nullable=False),
        sa.Column("sent_at", WHEN, nullable=True),
    )
    op.create_index("ix_deliveries_due", "deliveries", ["status", "next_attempt_at"])
    op.create_index("ix_deliveries_status_id", "deliveries", ["status", "id"])
    op.create_table(
        "digest_runs",
        sa.Column("week", sa.String(10), primary_key=True),
        sa.Column("written_at", WHEN, nullable=False),
    )
    op.create_table(
        "rightsizing_suggestions",
        sa.Column("team_id", sa.Integer(), sa.ForeignKey("teams.id"), primary_key=True),
        sa.Column("direction", sa.String(8), nullable=False),
        sa.Column("guarantee_centi", sa.Integer(), nullable=False),
        sa.Column("average_centi", sa.Integer(), nullable=False),
        sa.Column("p95_centi", sa.Integer(), nullable=False),
        sa.Column("demand_p95_centi", sa.Integer(), nullable=False),
        sa.Column("waiting_share", sa.Float(), nullable=False),
        sa.Column("suggested_centi", sa.Integer(), nullable=False),
        sa.Column("days", sa.Integer(), nullable=False),
        sa.Column("computed_at", WHEN, nullable=False),
    )


def downgrade() -> None:
    op.drop_table("rightsizing_suggestions")
    op.drop_table("digest_runs")
    op.drop_table("deliveries")
    op.drop_table("webhooks")
    op.drop_table("notification_mutes")
    with op.batch_alter_table("kubeconfig_grants") as batch:
        batch.drop_column("expiry_told_at")
