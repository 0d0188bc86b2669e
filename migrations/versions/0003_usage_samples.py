"""Usage samples: raw for a day, hourly for a week, daily after that.

Revision ID: 0003
Revises: 0002
Create Date: 2026-11-29 19:57:26.860393
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "usage_samples",
        sa.Column("team_id", sa.Integer(), nullable=False),
        sa.Column("resolution", sa.String(length=4), nullable=False),
        sa.Column("at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("seconds", sa.Integer(), nullable=False),
        sa.Column("allocated_gpu", sa.REAL(), nullable=False),
        sa.Column("requested_gpu", sa.REAL(), nullable=False),
        sa.Column("quota_gpu", sa.REAL(), nullable=False),
        sa.Column("guaranteed_gpu_s", sa.Float(), nullable=False),
        sa.Column("borrowed_gpu_s", sa.Float(), nullable=False),
        sa.ForeignKeyConstraint(
            ["team_id"], ["teams.id"], name=op.f("fk_usage_samples_team_id_teams")
        ),
        sa.PrimaryKeyConstraint("team_id", "resolution", "at", name=op.f("pk_usage_samples")),
    )


def downgrade() -> None:
    op.drop_table("usage_samples")
