"""The worker's bookkeeping of each team (next attempt, lease, last pass) in its own
narrow table, out of the teams row.

The drift re-check writes it for every ready team every resync interval (33 teams a second
at 10,000 teams). In the teams row each re-check was two new versions of a wide row under
six indexes, one of them (status, next attempt) so never a heap-only update: an hour and a
half of it left the table 2.75 times its size, the live-name index with 5.6 entries per
live team, and the overview's count of live teams and its later pages reading the table
instead of the index alone. ``team_schedules`` is read along its due index by the worker;
the teams row changes only when the team does.

Revision ID: 0017
Revises: 0016
Create Date: 2026-12-05 05:40:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0017"
down_revision = "0016"
branch_labels = None
depends_on = None

WHEN = sa.DateTime(timezone=True)
COLUMNS = ("next_attempt_at", "last_reconciled_at", "lease_owner", "lease_until")


def upgrade() -> None:
    op.create_table(
        "team_schedules",
        sa.Column("team_id", sa.Integer(), nullable=False),
        sa.Column("next_attempt_at", WHEN, nullable=True),
        sa.Column("last_reconciled_at", WHEN, nullable=True),
        sa.Column("lease_owner", sa.String(length=64), nullable=True),
        sa.Column("lease_until", WHEN, nullable=True),
        sa.ForeignKeyConstraint(
            ["team_id"], ["teams.id"], name=op.f("fk_team_schedules_team_id_teams")
        ),
        sa.PrimaryKeyConstraint("team_id", name=op.f("pk_team_schedules")),
    )
    op.create_index("ix_team_schedules_due", "team_schedules", ["next_attempt_at"])
    # Every team the worker had anything for (a team without a row has nothing scheduled;
    # one in the worker's hands without a time was due, as before).
    op.execute(
        "INSERT INTO team_schedules (team_id, next_attempt_at, last_reconciled_at, "
        "lease_owner, lease_until) "
        "SELECT id, CASE WHEN next_attempt_at IS NULL AND status IN ('approved', "
        "'provisioning', 'failed', 'ready', 'decommissioning') THEN CURRENT_TIMESTAMP "
        "ELSE next_attempt_at END, last_reconciled_at, lease_owner, lease_until FROM teams "
        "WHERE next_attempt_at IS NOT NULL OR last_reconciled_at IS NOT NULL "
        "OR lease_owner IS NOT NULL OR status IN ('approved', 'provisioning', 'failed', "
        "'ready', 'decommissioning')"
    )
    op.drop_index("ix_teams_work", table_name="teams")
    op.create_index("ix_teams_status", "teams", ["status"])
    for column in COLUMNS:
        op.drop_column("teams", column)  # SQLite drops an unindexed column in place


def downgrade() -> None:
    op.add_column("teams", sa.Column("next_attempt_at", WHEN, nullable=True))
    op.add_column("teams", sa.Column("last_reconciled_at", WHEN, nullable=True))
    op.add_column("teams", sa.Column("lease_owner", sa.String(length=64), nullable=True))
    op.add_column("teams", sa.Column("lease_until", WHEN, nullable=True))
    for column in COLUMNS:  # constants of this file
        op.execute(
            f"UPDATE teams SET {column} = (SELECT s.{column} FROM team_schedules s "  # noqa: S608
            "WHERE s.team_id = teams.id)"
        )
    op.drop_index("ix_teams_status", table_name="teams")
    op.create_index("ix_teams_work", "teams", ["status", "next_attempt_at"])
    op.drop_index("ix_team_schedules_due", table_name="team_schedules")
    op.drop_table("team_schedules")
