"""Node pools, and every quota as lines keyed by pool and resource.

An org's pool becomes its default pool (the one KAI's default shard serves: nodes
without a node-pool label), its GPUs, CPU and memory that pool's capacity lines. A team's,
a request's and a decision's GPU guarantee, limit and weight become a GPU line in the
default pool, their CPU and memory guarantees a line each where one was asked. The
priority stays on the owner (it is its queue's). Nothing a user sees changes; down
again, the default pool's lines become the columns they came from.

Revision ID: 0018
Revises: 0017
Create Date: 2026-12-06 20:30:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0018"
down_revision = "0017"
branch_labels = None
depends_on = None

WHEN = sa.DateTime(timezone=True)
# owner table -> (its lines' table, the lines' key column)
OWNERS = {
    "teams": ("team_quota_lines", "team_id"),
    "cluster_requests": ("request_quota_lines", "request_id"),
    "decisions": ("decision_quota_lines", "decision_id"),
}
# resource -> the owners' guarantee and limit columns, the org's capacity column
COLUMNS = {
    "gpu": ("gpu_quota_centi", "gpu_limit_centi", "gpus_centi"),
    "cpu": ("cpu_quota_millicores", None, "cpu_millicores"),
    "memory": ("memory_quota_mb", None, "memory_mb"),
}
DEFAULT = "(SELECT p.id FROM pools p WHERE p.org_id = {org} AND p.is_default)"


def _lines_table(name: str, key: str, owner: str) -> None:
    op.create_table(
        name,
        sa.Column(key, sa.Integer(), nullable=False),
        sa.Column("pool_id", sa.Integer(), nullable=False),
        sa.Column("resource", sa.String(length=32), nullable=False),
        sa.Column("guarantee", sa.Integer(), nullable=True),
        sa.Column("quota_limit", sa.Integer(), nullable=True),
        sa.Column("weight", sa.Integer(), nullable=False),
        sa.CheckConstraint("guarantee >= 0", name=op.f(f"ck_{name}_guarantee_not_negative")),
        sa.CheckConstraint("quota_limit >= 0", name=op.f(f"ck_{name}_limit_not_negative")),
        sa.CheckConstraint("weight >= 0", name=op.f(f"ck_{name}_weight_not_negative")),
        sa.ForeignKeyConstraint([key], [f"{owner}.id"], name=op.f(f"fk_{name}_{key}_{owner}")),
        sa.ForeignKeyConstraint(["pool_id"], ["pools.id"], name=op.f(f"fk_{name}_pool_id_pools")),
        sa.PrimaryKeyConstraint(key, "pool_id", "resource", name=op.f(f"pk_{name}")),
    )


def _org_of(owner: str) -> str:
    """The owner's org, as SQL over the owner's row ``o``."""
    if owner == "teams":
        return "o.org_id"
    if owner == "cluster_requests":
        return "(SELECT t.org_id FROM teams t WHERE t.id = o.team_id)"
    return (
        "(SELECT t.org_id FROM teams t JOIN cluster_requests r ON r.team_id = t.id "
        "WHERE r.id = o.request_id)"
    )


def upgrade() -> None:
    op.create_table(
        "pools",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("org_id", sa.Integer(), nullable=False),
        sa.Column("name", sa.String(length=63), nullable=False),
        sa.Column("is_default", sa.Boolean(), nullable=False),
        sa.Column("created_at", WHEN, nullable=False),
        sa.ForeignKeyConstraint(["org_id"], ["orgs.id"], name=op.f("fk_pools_org_id_orgs")),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_pools")),
        sa.UniqueConstraint("org_id", "name", name="uq_pools_org_id_name"),
    )
    op.create_index(
        "uq_pools_default",
        "pools",
        ["org_id"],
        unique=True,
        sqlite_where=sa.text("is_default"),
        postgresql_where=sa.text("is_default"),
    )
    op.create_table(
        "pool_capacities",
        sa.Column("pool_id", sa.Integer(), nullable=False),
        sa.Column("resource", sa.String(length=32), nullable=False),
        sa.Column("amount", sa.Integer(), nullable=False),
        sa.CheckConstraint("amount >= 0", name=op.f("ck_pool_capacities_amount_not_negative")),
        sa.ForeignKeyConstraint(
            ["pool_id"], ["pools.id"], name=op.f("fk_pool_capacities_pool_id_pools")
        ),
        sa.PrimaryKeyConstraint("pool_id", "resource", name=op.f("pk_pool_capacities")),
    )
    for owner, (table, key) in OWNERS.items():
        _lines_table(table, key, owner)

    op.execute(
        "INSERT INTO pools (org_id, name, is_default, created_at) "
        "SELECT id, 'default', TRUE, created_at FROM orgs"
    )
    for resource, (_, _, capacity) in COLUMNS.items():
        op.execute(
            "INSERT INTO pool_capacities (pool_id, resource, amount) "  # noqa: S608
            f"SELECT p.id, '{resource}', COALESCE(o.{capacity}, 0) FROM orgs o "
            "JOIN pools p ON p.org_id = o.id AND p.is_default"
        )
    for owner, (table, key) in OWNERS.items():
        pool = DEFAULT.format(org=_org_of(owner))
        for resource, (guarantee, limit, _) in COLUMNS.items():
            op.execute(
                f"INSERT INTO {table} ({key}, pool_id, resource, guarantee, quota_limit, weight) "  # noqa: S608
                f"SELECT o.id, {pool}, '{resource}', o.{guarantee}, "
                f"{f'o.{limit}' if limit else 'NULL'}, COALESCE(o.weight_centi, 100) "
                f"FROM {owner} o WHERE o.{guarantee} IS NOT NULL"
            )
    for owner in OWNERS:
        for guarantee, limit, _ in COLUMNS.values():
            op.drop_column(owner, guarantee)
            if limit:
                op.drop_column(owner, limit)
        op.drop_column(owner, "weight_centi")
    for _, _, capacity in COLUMNS.values():
        op.drop_column("orgs", capacity)


def _add(table: str, column: str, *, default: str | None) -> None:
    """A column back as it was: nullable, or (``default``) NOT NULL, filled with the
    default first (the default then dropped where the database can)."""
    if default is None:
        op.add_column(table, sa.Column(column, sa.Integer(), nullable=True))
        return
    op.add_column(table, sa.Column(column, sa.Integer(), nullable=False, server_default=default))
    if op.get_context().dialect.name != "sqlite":  # SQLite cannot alter a column
        op.alter_column(table, column, server_default=None)


def downgrade() -> None:
    for owner, (table, key) in OWNERS.items():
        required = owner != "decisions"  # a rejection held no values
        _add(owner, "weight_centi", default="100" if required else None)
        for guarantee, limit, _ in COLUMNS.values():
            _add(owner, guarantee, default="0" if required and limit else None)
            if limit:
                _add(owner, limit, default="0" if required else None)
        for resource, (guarantee, limit, _) in COLUMNS.items():
            sets = {guarantee: ("guarantee", "0"), limit: ("quota_limit", "0")}
            if resource == "gpu":
                sets["weight_centi"] = ("weight", "100")
            for column, (value, default) in sets.items():
                if column is None:
                    continue
                line = (  # the default pool's line of the resource, if any
                    f"(SELECT l.{value} FROM {table} l JOIN pools p ON p.id = l.pool_id "  # noqa: S608
                    f"AND p.is_default WHERE l.{key} = {owner}.id AND l.resource = '{resource}')"
                )
                if required and resource == "gpu":
                    line = f"COALESCE({line}, {default})"
                op.execute(f"UPDATE {owner} SET {column} = {line}")  # noqa: S608
        op.drop_table(table)
    for resource, (_, _, capacity) in COLUMNS.items():
        _add("orgs", capacity, default="0")
        op.execute(
            f"UPDATE orgs SET {capacity} = COALESCE((SELECT c.amount FROM pool_capacities c "  # noqa: S608
            "JOIN pools p ON p.id = c.pool_id AND p.is_default "
            f"WHERE p.org_id = orgs.id AND c.resource = '{resource}'), 0)"
        )
    op.drop_table("pool_capacities")
    op.drop_index("uq_pools_default", table_name="pools")
    op.drop_table("pools")
