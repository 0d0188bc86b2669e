"""Initial schema: pool, users, teams, requests, decisions, provisioning steps, audit.

Revision ID: 0001
Revises:
Create Date: 2026-11-29 19:23:02.419901
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None


APPEND_ONLY_SQLITE = (
    "CREATE TRIGGER audit_events_no_update BEFORE UPDATE ON audit_events "
    "BEGIN SELECT RAISE(ABORT, 'audit_events is append-only'); END",
    "CREATE TRIGGER audit_events_no_delete BEFORE DELETE ON audit_events "
    "BEGIN SELECT RAISE(ABORT, 'audit_events is append-only'); END",
)
APPEND_ONLY_POSTGRESQL = (
    "CREATE FUNCTION audit_events_append_only() RETURNS trigger LANGUAGE plpgsql AS "
    "$$ BEGIN RAISE EXCEPTION 'audit_events is append-only'; END $$",
    "CREATE TRIGGER audit_events_append_only BEFORE UPDATE OR DELETE ON audit_events "
    "FOR EACH ROW EXECUTE FUNCTION audit_events_append_only()",
)


def _append_only() -> None:
    """The audit trail refuses UPDATE and DELETE at the database, whoever asks."""
    dialect = op.get_bind().dialect.name
    statements = APPEND_ONLY_POSTGRESQL if dialect == "postgresql" else APPEND_ONLY_SQLITE
    for statement in statements:
        op.execute(statement)


def upgrade() -> None:
    op.create_table(
        "orgs",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("name", sa.String(length=63), nullable=False),
        sa.Column("parent_queue", sa.String(length=63), nullable=False),
        sa.Column("gpus_centi", sa.Integer(), nullable=False),
        sa.Column("cpu_millicores", sa.Integer(), nullable=False),
        sa.Column("memory_mb", sa.Integer(), nullable=False),
        sa.Column("lock_version", sa.Integer(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_orgs")),
        sa.UniqueConstraint("name", name=op.f("uq_orgs_name")),
        sa.UniqueConstraint("parent_queue", name=op.f("uq_orgs_parent_queue")),
    )
    op.create_table(
        "users",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("email", sa.String(length=254), nullable=False),
        sa.Column("display_name", sa.String(length=120), nullable=False),
        sa.Column("is_admin", sa.Boolean(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("last_sign_in_at", sa.DateTime(timezone=True), nullable=True),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_users")),
        sa.UniqueConstraint("email", name=op.f("uq_users_email")),
    )
    op.create_table(
        "teams",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("org_id", sa.Integer(), nullable=False),
        sa.Column("name", sa.String(length=63), nullable=False),
        sa.Column("status", sa.String(length=20), nullable=False),
        sa.Column("purpose", sa.Text(), nullable=False),
        sa.Column("gpu_quota_centi", sa.Integer(), nullable=False),
        sa.Column("gpu_limit_centi", sa.Integer(), nullable=False),
        sa.Column("weight_centi", sa.Integer(), nullable=False),
        sa.Column("priority", sa.Integer(), nullable=False),
        sa.Column("cpu_quota_millicores", sa.Integer(), nullable=True),
        sa.Column("memory_quota_mb", sa.Integer(), nullable=True),
        sa.Column("created_by_id", sa.Integer(), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("ready_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("desired_generation", sa.Integer(), nullable=False),
        sa.Column("observed_generation", sa.Integer(), nullable=False),
        sa.Column("attempts", sa.Integer(), nullable=False),
        sa.Column("last_error", sa.Text(), nullable=True),
        sa.Column("next_attempt_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("last_reconciled_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("lease_owner", sa.String(length=64), nullable=True),
        sa.Column("lease_until", sa.DateTime(timezone=True), nullable=True),
        sa.ForeignKeyConstraint(
            ["created_by_id"], ["users.id"], name=op.f("fk_teams_created_by_id_users")
        ),
        sa.ForeignKeyConstraint(["org_id"], ["orgs.id"], name=op.f("fk_teams_org_id_orgs")),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_teams")),
    )
    with op.batch_alter_table("teams", schema=None) as batch_op:
        batch_op.create_index("ix_teams_work", ["status", "next_attempt_at"], unique=False)
        batch_op.create_index(
            "uq_teams_live_name",
            ["name"],
            unique=True,
            sqlite_where=sa.text("status NOT IN ('rejected', 'decommissioned')"),
            postgresql_where=sa.text("status NOT IN ('rejected', 'decommissioned')"),
        )

    op.create_table(
        "audit_events",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("actor_id", sa.Integer(), nullable=True),
        sa.Column("actor", sa.String(length=254), nullable=False),
        sa.Column("action", sa.String(length=60), nullable=False),
        sa.Column("team_id", sa.Integer(), nullable=True),
        sa.Column("summary", sa.Text(), nullable=False),
        sa.Column("details", sa.JSON(), nullable=False),
        sa.ForeignKeyConstraint(
            ["actor_id"], ["users.id"], name=op.f("fk_audit_events_actor_id_users")
        ),
        sa.ForeignKeyConstraint(
            ["team_id"], ["teams.id"], name=op.f("fk_audit_events_team_id_teams")
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_audit_events")),
    )
    with op.batch_alter_table("audit_events", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_audit_events_action"), ["action"], unique=False)
        batch_op.create_index(batch_op.f("ix_audit_events_at"), ["at"], unique=False)
        batch_op.create_index("ix_audit_events_team_at", ["team_id", "at"], unique=False)

    op.create_table(
        "cluster_requests",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("team_id", sa.Integer(), nullable=False),
        sa.Column("kind", sa.String(length=20), nullable=False),
        sa.Column("status", sa.String(length=20), nullable=False),
        sa.Column("purpose", sa.Text(), nullable=False),
        sa.Column("requested_by_id", sa.Integer(), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("gpu_quota_centi", sa.Integer(), nullable=False),
        sa.Column("gpu_limit_centi", sa.Integer(), nullable=False),
        sa.Column("weight_centi", sa.Integer(), nullable=False),
        sa.Column("priority", sa.Integer(), nullable=False),
        sa.Column("cpu_quota_millicores", sa.Integer(), nullable=True),
        sa.Column("memory_quota_mb", sa.Integer(), nullable=True),
        sa.ForeignKeyConstraint(
            ["requested_by_id"],
            ["users.id"],
            name=op.f("fk_cluster_requests_requested_by_id_users"),
        ),
        sa.ForeignKeyConstraint(
            ["team_id"], ["teams.id"], name=op.f("fk_cluster_requests_team_id_teams")
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_cluster_requests")),
    )
    with op.batch_alter_table("cluster_requests", schema=None) as batch_op:
        batch_op.create_index("ix_cluster_requests_status", ["status", "created_at"], unique=False)
        batch_op.create_index(batch_op.f("ix_cluster_requests_team_id"), ["team_id"], unique=False)

    op.create_table(
        "provisioning_steps",
        sa.Column("team_id", sa.Integer(), nullable=False),
        sa.Column("step", sa.String(length=30), nullable=False),
        sa.Column("position", sa.Integer(), nullable=False),
        sa.Column("status", sa.String(length=20), nullable=False),
        sa.Column("message", sa.Text(), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["team_id"], ["teams.id"], name=op.f("fk_provisioning_steps_team_id_teams")
        ),
        sa.PrimaryKeyConstraint("team_id", "step", name=op.f("pk_provisioning_steps")),
    )
    op.create_table(
        "team_members",
        sa.Column("team_id", sa.Integer(), nullable=False),
        sa.Column("user_id", sa.Integer(), nullable=False),
        sa.Column("role", sa.String(length=10), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["team_id"], ["teams.id"], name=op.f("fk_team_members_team_id_teams")
        ),
        sa.ForeignKeyConstraint(
            ["user_id"], ["users.id"], name=op.f("fk_team_members_user_id_users")
        ),
        sa.PrimaryKeyConstraint("team_id", "user_id", name=op.f("pk_team_members")),
    )
    op.create_table(
        "decisions",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("request_id", sa.Integer(), nullable=False),
        sa.Column("actor_id", sa.Integer(), nullable=True),
        sa.Column("outcome", sa.String(length=20), nullable=False),
        sa.Column("reason", sa.Text(), nullable=False),
        sa.Column("decided_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("gpu_quota_centi", sa.Integer(), nullable=True),
        sa.Column("gpu_limit_centi", sa.Integer(), nullable=True),
        sa.Column("weight_centi", sa.Integer(), nullable=True),
        sa.Column("priority", sa.Integer(), nullable=True),
        sa.Column("cpu_quota_millicores", sa.Integer(), nullable=True),
        sa.Column("memory_quota_mb", sa.Integer(), nullable=True),
        sa.Column("changes", sa.JSON(), nullable=False),
        sa.ForeignKeyConstraint(
            ["actor_id"], ["users.id"], name=op.f("fk_decisions_actor_id_users")
        ),
        sa.ForeignKeyConstraint(
            ["request_id"],
            ["cluster_requests.id"],
            name=op.f("fk_decisions_request_id_cluster_requests"),
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_decisions")),
        sa.UniqueConstraint("request_id", name=op.f("uq_decisions_request_id")),
    )
    _append_only()


def downgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        op.execute("DROP TRIGGER IF EXISTS audit_events_append_only ON audit_events")
        op.execute("DROP FUNCTION IF EXISTS audit_events_append_only()")
    op.drop_table("decisions")
    op.drop_table("team_members")
    op.drop_table("provisioning_steps")
    with op.batch_alter_table("cluster_requests", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_cluster_requests_team_id"))
        batch_op.drop_index("ix_cluster_requests_status")

    op.drop_table("cluster_requests")
    with op.batch_alter_table("audit_events", schema=None) as batch_op:
        batch_op.drop_index("ix_audit_events_team_at")
        batch_op.drop_index(batch_op.f("ix_audit_events_at"))
        batch_op.drop_index(batch_op.f("ix_audit_events_action"))

    op.drop_table("audit_events")
    with op.batch_alter_table("teams", schema=None) as batch_op:
        batch_op.drop_index(
            "uq_teams_live_name",
            sqlite_where=sa.text("status NOT IN ('rejected', 'decommissioned')"),
            postgresql_where=sa.text("status NOT IN ('rejected', 'decommissioned')"),
        )
        batch_op.drop_index("ix_teams_work")

    op.drop_table("teams")
    op.drop_table("users")
    op.drop_table("orgs")
