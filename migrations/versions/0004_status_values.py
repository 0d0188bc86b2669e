"""Statuses, kinds and roles hold only their known values, enforced by the database.

PostgreSQL gets CHECK constraints. SQLite cannot add a constraint to an existing table
without rebuilding it (which its foreign keys refuse while rows point at it), so it gets
BEFORE INSERT / UPDATE triggers that refuse the same values.

Revision ID: 0004
Revises: 0003
Create Date: 2026-11-30 04:00:00
"""

from __future__ import annotations

from alembic import op

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None

# (table, column, constraint name as the models' naming convention makes it, values)
CHOICES = (
    (
        "teams",
        "status",
        "ck_teams_teamstatus_values",
        (
            "submitted",
            "rejected",
            "approved",
            "provisioning",
            "ready",
            "failed",
            "decommissioning",
            "decommissioned",
        ),
    ),
    ("team_members", "role", "ck_team_members_memberrole_values", ("lead", "member")),
    ("team_members", "source", "ck_team_members_membersource_values", ("portal", "groups")),
    (
        "cluster_requests",
        "kind",
        "ck_cluster_requests_requestkind_values",
        ("create", "quota_change"),
    ),
    (
        "cluster_requests",
        "status",
        "ck_cluster_requests_requeststatus_values",
        ("submitted", "approved", "rejected", "applied", "cancelled"),
    ),
    ("decisions", "outcome", "ck_decisions_outcome_values", ("approved", "rejected")),
    (
        "provisioning_steps",
        "step",
        "ck_provisioning_steps_step_values",
        ("queue", "namespace", "vcluster", "admission_policy", "kubeconfig"),
    ),
    (
        "provisioning_steps",
        "status",
        "ck_provisioning_steps_stepstatus_values",
        ("pending", "progressing", "done", "failed", "removed"),
    ),
)


def _in(column: str, values: tuple[str, ...]) -> str:
    return f"{column} IN ({', '.join(repr(v) for v in values)})"


def upgrade() -> None:
    postgresql = op.get_bind().dialect.name == "postgresql"
    for table, column, name, values in CHOICES:
        if postgresql:
            op.execute(f"ALTER TABLE {table} ADD CONSTRAINT {name} CHECK ({_in(column, values)})")
            continue
        refuse = (
            f"BEGIN SELECT RAISE(ABORT, 'CHECK constraint failed: {name}: {table}.{column} "
            f"must be one of {', '.join(values)}'); END"
        )
        condition = f"WHEN NOT ({_in('NEW.' + column, values)})"
        op.execute(f"CREATE TRIGGER {name}_insert BEFORE INSERT ON {table} {condition} {refuse}")
        op.execute(
            f"CREATE TRIGGER {name}_update BEFORE UPDATE OF {column} ON {table} "
            f"{condition} {refuse}"
        )


def downgrade() -> None:
    postgresql = op.get_bind().dialect.name == "postgresql"
    for table, _column, name, _values in reversed(CHOICES):
        if postgresql:
            op.execute(f"ALTER TABLE {table} DROP CONSTRAINT {name}")
        else:
            op.execute(f"DROP TRIGGER {name}_insert")
            op.execute(f"DROP TRIGGER {name}_update")
