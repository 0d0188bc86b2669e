"""Usage history and right-sizing by node pool: each sample names the pool its GPUs were
used in ("" for the org's default pool, every sample so far), part of the sample's key,
so that a team using two pools keeps a history in each and showback can price each
pool's hours; a right-sizing suggestion names its pool too (the table is made again,
empty: suggestions are recomputed from the history within the hour).

Revision ID: 0020
Revises: 0019
Create Date: 2026-12-07 03:00:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0020"
down_revision = "0019"
branch_labels = None
depends_on = None

KEY_BEFORE = ["team_id", "resolution", "at"]
KEY_AFTER = ["team_id", "pool", "resolution", "at"]
VALUES = [
    "seconds",
    "allocated_gpu",
    "requested_gpu",
    "quota_gpu",
    "guaranteed_gpu_s",
    "borrowed_gpu_s",
]
# Migration 0012's triggers refuse an unknown resolution on SQLite; a copied table needs
# them again.
CHECK = "ck_usage_samples_resolution_values"
RESOLUTIONS = ("raw", "hour", "day")


def _table(name: str, *, with_pool: bool) -> None:
    columns = [sa.Column("team_id", sa.Integer(), nullable=False)]
    if with_pool:
        columns.append(sa.Column("pool", sa.String(length=17), nullable=False, server_default=""))
    columns += [
        sa.Column("resolution", sa.String(length=4), nullable=False),
        sa.Column("at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("seconds", sa.Integer(), nullable=False),
        sa.Column("allocated_gpu", sa.REAL(), nullable=False),
        sa.Column("requested_gpu", sa.REAL(), nullable=False),
        sa.Column("quota_gpu", sa.REAL(), nullable=False),
        sa.Column("guaranteed_gpu_s", sa.Float(), nullable=False),
        sa.Column("borrowed_gpu_s", sa.Float(), nullable=False),
    ]
    op.create_table(
        name,
        *columns,
        sa.ForeignKeyConstraint(
            ["team_id"], ["teams.id"], name=op.f("fk_usage_samples_team_id_teams")
        ),
        sa.PrimaryKeyConstraint(
            *(KEY_AFTER if with_pool else KEY_BEFORE), name=op.f("pk_usage_samples")
        ),
    )


def _triggers(table: str, column: str, name: str, values: tuple[str, ...]) -> None:
    """Migration 0012's refusal of an unknown value on SQLite, for a table made again."""
    allowed = ", ".join(repr(v) for v in values)
    refuse = (
        f"BEGIN SELECT RAISE(ABORT, 'CHECK constraint failed: {name}: {table}.{column} "
        f"must be one of {', '.join(values)}'); END"
    )
    condition = f"WHEN NOT (NEW.{column} IN ({allowed}))"
    op.execute(f"CREATE TRIGGER {name}_insert BEFORE INSERT ON {table} {condition} {refuse}")
    op.execute(
        f"CREATE TRIGGER {name}_update BEFORE UPDATE OF {column} ON {table} {condition} {refuse}"
    )


def _copy(*, with_pool: bool) -> None:
    """SQLite cannot change a primary key in place: a new table, the rows copied (from
    the default pool only, going down), the old one dropped, its triggers made again."""
    _table("usage_samples_copy", with_pool=with_pool)
    kept = ", ".join(KEY_BEFORE + VALUES)
    where = "" if with_pool else " WHERE pool = ''"
    # The column names are this module's constants.
    copy = f"INSERT INTO usage_samples_copy ({kept}) SELECT {kept} FROM usage_samples"  # noqa: S608
    op.execute(copy + where)
    op.drop_table("usage_samples")
    op.rename_table("usage_samples_copy", "usage_samples")
    _triggers("usage_samples", "resolution", CHECK, RESOLUTIONS)


DIRECTIONS = ("lower", "raise")
DIRECTION_CHECK = "ck_rightsizing_suggestions_direction_values"


def _suggestions(*, with_pool: bool) -> None:
    """The suggestions table, made again (empty) with or without the pool in its key."""
    postgresql = op.get_bind().dialect.name == "postgresql"
    op.drop_table("rightsizing_suggestions")
    key = ["team_id", "pool"] if with_pool else ["team_id"]
    pool = [sa.Column("pool", sa.String(length=17), nullable=False, server_default="")]
    allowed = ", ".join(repr(v) for v in DIRECTIONS)
    check = [sa.CheckConstraint(f"direction IN ({allowed})", name=op.f(DIRECTION_CHECK))]
    op.create_table(
        "rightsizing_suggestions",
        sa.Column("team_id", sa.Integer(), nullable=False),
        *(pool if with_pool else []),
        sa.Column("direction", sa.String(8), nullable=False),
        sa.Column("guarantee_centi", sa.Integer(), nullable=False),
        sa.Column("average_centi", sa.Integer(), nullable=False),
        sa.Column("p95_centi", sa.Integer(), nullable=False),
        sa.Column("demand_p95_centi", sa.Integer(), nullable=False),
        sa.Column("waiting_share", sa.Float(), nullable=False),
        sa.Column("suggested_centi", sa.Integer(), nullable=False),
        sa.Column("days", sa.Integer(), nullable=False),
        sa.Column("computed_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["team_id"], ["teams.id"], name=op.f("fk_rightsizing_suggestions_team_id_teams")
        ),
        sa.PrimaryKeyConstraint(*key, name=op.f("pk_rightsizing_suggestions")),
        *(check if postgresql else []),
    )
    if not postgresql:
        _triggers("rightsizing_suggestions", "direction", DIRECTION_CHECK, DIRECTIONS)


def upgrade() -> None:
    _suggestions(with_pool=True)
    if op.get_bind().dialect.name != "postgresql":
        _copy(with_pool=True)
        return
    op.add_column(
        "usage_samples",
        sa.Column("pool", sa.String(length=17), nullable=False, server_default=""),
    )
    op.drop_constraint("pk_usage_samples", "usage_samples", type_="primary")
    op.create_primary_key("pk_usage_samples", "usage_samples", KEY_AFTER)


def downgrade() -> None:
    _suggestions(with_pool=False)
    if op.get_bind().dialect.name != "postgresql":
        _copy(with_pool=False)
        return
    # The other pools' history has no place without the column.
    op.execute("DELETE FROM usage_samples WHERE pool <> ''")
    op.drop_constraint("pk_usage_samples", "usage_samples", type_="primary")
    op.create_primary_key("pk_usage_samples", "usage_samples", KEY_BEFORE)
    op.drop_column("usage_samples", "pool")
