"""The enum-like columns added since 0004 hold only their known values too: a rollout's
state, a kubeconfig's portal role, a mute's channel, a webhook's kind, a delivery's
channel and status, a suggestion's direction, a sample's resolution. CHECK constraints
on PostgreSQL, BEFORE INSERT / UPDATE triggers on SQLite (as in 0004).

Revision ID: 0012
Revises: 0011
Create Date: 2026-12-01 12:30:00
"""

from __future__ import annotations

from alembic import op

revision = "0012"
down_revision = "0011"
branch_labels = None
depends_on = None

# (table, column, constraint name as the models' naming convention makes it, values)
CHOICES = (
    ("chart_rollouts", "state", "ck_chart_rollouts_rolloutstate_values", ("running", "stopped")),
    (
        "kubeconfig_grants",
        "portal_role",
        "ck_kubeconfig_grants_portalrole_values",
        ("admin", "lead", "member"),
    ),
    (
        "notification_mutes",
        "channel",
        "ck_notification_mutes_personalchannel_values",
        ("inapp", "email"),
    ),
    ("webhooks", "kind", "ck_webhooks_webhookkind_values", ("slack", "json")),
    (
        "deliveries",
        "channel",
        "ck_deliveries_deliverychannel_values",
        ("email", "slack", "json"),
    ),
    (
        "deliveries",
        "status",
        "ck_deliveries_deliverystatus_values",
        ("pending", "sent", "failed"),
    ),
    (
        "rightsizing_suggestions",
        "direction",
        "ck_rightsizing_suggestions_direction_values",
        ("lower", "raise"),
    ),
    ("usage_samples", "resolution", "ck_usage_samples_resolution_values", ("raw", "hour", "day")),
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
