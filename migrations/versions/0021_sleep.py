"""Sleep and wake: a team's vCluster paused and resumed as `vcluster pause`/`resume` do.

``teams.sleep`` is where the team's vCluster is on its way (awake, falling asleep, asleep,
waking); ``asleep_since`` when it was seen asleep; ``sleep_asked_at`` when the portal last
asked it to sleep or wake (a wake's time counts from there); ``sleep_reason`` why, in
people's words; ``awake_until`` a lead's "keep awake until"; ``active_at`` the last use
the portal saw (the team's pods on the host, a kubeconfig handed out, a wake);
``sleep_after_hours`` the team's own choice within the org's bounds. The org's policy:
``sleep_after_hours`` (none: nothing sleeps by policy) and ``sleep_max_hours``, the most
a team may choose; and the month's cluster-seconds asleep, counted up by the sleep job.

Revision ID: 0021
Revises: 0020
Create Date: 2026-12-07 06:00:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0021"
down_revision = "0020"
branch_labels = None
depends_on = None

SLEEP_CHECK = "ck_teams_sleep_values"
SLEEP_VALUES = "sleep IN ('awake', 'falling_asleep', 'asleep', 'waking')"


def upgrade() -> None:
    op.add_column(
        "teams", sa.Column("sleep", sa.String(length=20), nullable=False, server_default="awake")
    )
    # Only its known values, as every enum-like column (0004, 0012).
    if op.get_bind().dialect.name == "postgresql":
        op.execute(f"ALTER TABLE teams ADD CONSTRAINT {SLEEP_CHECK} CHECK ({SLEEP_VALUES})")
    else:
        refuse = (
            f"BEGIN SELECT RAISE(ABORT, 'CHECK constraint failed: {SLEEP_CHECK}: teams.sleep "
            "must be one of awake, falling_asleep, asleep, waking'); END"
        )
        condition = f"WHEN NOT ({SLEEP_VALUES.replace('sleep', 'NEW.sleep', 1)})"
        op.execute(
            f"CREATE TRIGGER {SLEEP_CHECK}_insert BEFORE INSERT ON teams {condition} {refuse}"
        )
        op.execute(
            f"CREATE TRIGGER {SLEEP_CHECK}_update BEFORE UPDATE OF sleep ON teams "
            f"{condition} {refuse}"
        )
    op.add_column("teams", sa.Column("asleep_since", sa.DateTime(timezone=True), nullable=True))
    op.add_column("teams", sa.Column("sleep_asked_at", sa.DateTime(timezone=True), nullable=True))
    op.add_column("teams", sa.Column("sleep_reason", sa.Text(), nullable=False, server_default=""))
    op.add_column("teams", sa.Column("awake_until", sa.DateTime(timezone=True), nullable=True))
    op.add_column("teams", sa.Column("active_at", sa.DateTime(timezone=True), nullable=True))
    op.add_column(
        "teams",
        sa.Column(
            "sleep_after_hours",
            sa.Integer(),
            sa.CheckConstraint(
                "sleep_after_hours IS NULL OR sleep_after_hours > 0",
                name=op.f("ck_teams_sleep_after_positive"),
            ),
            nullable=True,
        ),
    )
    op.add_column(
        "orgs",
        sa.Column(
            "sleep_after_hours",
            sa.Integer(),
            sa.CheckConstraint(
                "sleep_after_hours IS NULL OR sleep_after_hours > 0",
                name=op.f("ck_orgs_sleep_after_positive"),
            ),
            nullable=True,
        ),
    )
    op.add_column(
        "orgs",
        sa.Column("sleep_max_hours", sa.Integer(), nullable=False, server_default="168"),
    )
    # The month's cluster-seconds asleep, counted up by the sleep job (``slept_counted_at``
    # the last count): the overview reads them with the org, never a history.
    op.add_column(
        "orgs", sa.Column("slept_month", sa.String(length=7), nullable=False, server_default="")
    )
    op.add_column(
        "orgs", sa.Column("slept_seconds", sa.BigInteger(), nullable=False, server_default="0")
    )
    op.add_column("orgs", sa.Column("slept_counted_at", sa.DateTime(timezone=True), nullable=True))
    # The sleeping teams, counted by the overview from an index of them alone.
    op.create_index(
        "ix_teams_sleeping",
        "teams",
        ["sleep"],
        sqlite_where=sa.text("sleep <> 'awake'"),
        postgresql_where=sa.text("sleep <> 'awake'"),
    )


def downgrade() -> None:
    op.drop_index("ix_teams_sleeping", table_name="teams")
    with op.batch_alter_table("orgs", recreate="never") as batch:
        batch.drop_column("slept_counted_at")
        batch.drop_column("slept_seconds")
        batch.drop_column("slept_month")
        batch.drop_column("sleep_max_hours")
        batch.drop_column("sleep_after_hours")
    if op.get_bind().dialect.name == "postgresql":
        op.execute(f"ALTER TABLE teams DROP CONSTRAINT {SLEEP_CHECK}")
    else:
        op.execute(f"DROP TRIGGER {SLEEP_CHECK}_insert")
        op.execute(f"DROP TRIGGER {SLEEP_CHECK}_update")
    with op.batch_alter_table("teams", recreate="never") as batch:
        batch.drop_column("sleep_after_hours")
        batch.drop_column("active_at")
        batch.drop_column("awake_until")
        batch.drop_column("sleep_reason")
        batch.drop_column("sleep_asked_at")
        batch.drop_column("asleep_since")
        batch.drop_column("sleep")
