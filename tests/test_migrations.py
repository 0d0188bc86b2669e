"""Alembic migrations run up and down on both databases and match the models."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from alembic import command
from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from sqlalchemy import Engine, inspect, text
from sqlalchemy.exc import DatabaseError

from app.cli import alembic_config
from app.core.db import Base
from tests.conftest import settings_for


def tables(engine: Engine) -> set[str]:
    return set(inspect(engine).get_table_names()) - {"alembic_version"}


def test_models_match_the_migrations(engine: Engine) -> None:
    with engine.connect() as conn:
        diff = compare_metadata(MigrationContext.configure(conn), Base.metadata)
    assert diff == [], "run `alembic revision --autogenerate` for: " + repr(diff)


def test_down_and_up_again(engine: Engine, db_url: str) -> None:
    config = alembic_config(settings_for(db_url))
    assert tables(engine) == set(Base.metadata.tables)
    command.downgrade(config, "base")
    assert tables(engine) == set()
    command.upgrade(config, "head")
    assert tables(engine) == set(Base.metadata.tables)
    with engine.connect() as conn:
        assert conn.execute(text("SELECT version_num FROM alembic_version")).scalar() == "0017"


def test_offline_sql_for_postgresql(capsys: pytest.CaptureFixture[str]) -> None:
    """A DBA can review the whole migration as SQL before running it."""
    url = "postgresql+psycopg://portal@db.invalid/portal"
    command.upgrade(alembic_config(settings_for(url)), "head", sql=True)
    sql = capsys.readouterr().out
    assert "CREATE TABLE teams" in sql
    assert "CREATE TRIGGER audit_events_append_only" in sql
    assert "CREATE TABLE api_tokens" in sql


def test_the_database_refuses_unknown_statuses(engine: Engine) -> None:
    """A status written past the models (a hand-made UPDATE) is refused by the database."""
    with engine.begin() as conn:
        conn.execute(text("INSERT INTO orgs (name, parent_queue, gpus_centi, cpu_millicores, "
                          "memory_mb, lock_version, created_at) "
                          "VALUES ('o', 'o', 100, 0, 0, 0, CURRENT_TIMESTAMP)"))  # fmt: skip
    insert = (
        "INSERT INTO teams (org_id, name, status, purpose, gpu_quota_centi, gpu_limit_centi, "
        "weight_centi, priority, created_at, updated_at, desired_generation, "
        "observed_generation, attempts) VALUES ((SELECT id FROM orgs), 'nlp', :status, '', "
        "0, 0, 100, 100, CURRENT_TIMESTAMP, CURRENT_TIMESTAMP, 0, 0, 0)"
    )
    with pytest.raises(DatabaseError, match="ck_teams_teamstatus_values"), engine.begin() as conn:
        conn.execute(text(insert), {"status": "provisioned"})
    with engine.begin() as conn:
        conn.execute(text(insert), {"status": "ready"})
    with pytest.raises(DatabaseError, match="ck_teams_teamstatus_values"), engine.begin() as conn:
        conn.execute(text("UPDATE teams SET status = 'READY'"))
    step = (
        "INSERT INTO provisioning_steps (team_id, step, position, status, message, updated_at) "
        "VALUES ((SELECT id FROM teams), 'helm', 0, 'pending', '', CURRENT_TIMESTAMP)"
    )
    with (
        pytest.raises(DatabaseError, match="ck_provisioning_steps_step_values"),
        engine.begin() as conn,
    ):
        conn.execute(text(step))


def test_the_later_choices_are_refused_too(engine: Engine) -> None:
    """The enum-like columns added after 0004 (migration 0012), e.g. a delivery's status
    and channel."""
    delivery = (
        "INSERT INTO deliveries (channel, event, title, body, link, status, attempts, "
        "next_attempt_at, last_error, created_at) VALUES (:channel, 'cluster.ready', 't', '', "
        "'', :status, 0, CURRENT_TIMESTAMP, '', CURRENT_TIMESTAMP)"
    )
    with (
        pytest.raises(DatabaseError, match="ck_deliveries_deliverystatus_values"),
        engine.begin() as conn,
    ):
        conn.execute(text(delivery), {"channel": "email", "status": "done"})
    with (
        pytest.raises(DatabaseError, match="ck_deliveries_deliverychannel_values"),
        engine.begin() as conn,
    ):
        conn.execute(text(delivery), {"channel": "sms", "status": "pending"})
    with engine.begin() as conn:
        conn.execute(text(delivery), {"channel": "slack", "status": "pending"})
    with (
        pytest.raises(DatabaseError, match="ck_deliveries_deliverystatus_values"),
        engine.begin() as conn,
    ):
        conn.execute(text("UPDATE deliveries SET status = 'SENT'"))


def test_no_enum_like_column_is_plain_text() -> None:
    """A column whose comment lists its values ("# a | b | c") is an enumeration with its
    database CHECK (``models.choice``), not a ``Mapped[str]``."""
    source = (Path(__file__).resolve().parents[1] / "app" / "core" / "models.py").read_text()
    listing = re.compile(r"Mapped\[str( \| None)?\].*#\s*[\w-]+(\s*(\||or)\s*[\w-]+)+\s*$")
    assert [line.strip() for line in source.splitlines() if listing.search(line)] == []
