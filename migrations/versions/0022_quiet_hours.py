"""Quiet hours: times of day (``22:00-07:00``, several separated by commas) and,
optionally, the weekends when an idle team cluster sleeps after an hour, in the org's
time zone (a tz database name).

Revision ID: 0022
Revises: 0021
Create Date: 2026-12-07 06:30:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0022"
down_revision = "0021"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column(
        "orgs",
        sa.Column("sleep_quiet_hours", sa.String(length=200), nullable=False, server_default=""),
    )
    op.add_column(
        "orgs",
        sa.Column("sleep_weekends", sa.Boolean(), nullable=False, server_default=sa.false()),
    )
    op.add_column(
        "orgs", sa.Column("time_zone", sa.String(length=64), nullable=False, server_default="UTC")
    )


def downgrade() -> None:
    with op.batch_alter_table("orgs", recreate="never") as batch:
        batch.drop_column("time_zone")
        batch.drop_column("sleep_weekends")
        batch.drop_column("sleep_quiet_hours")
