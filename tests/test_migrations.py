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
        assert conn.execute(text("SELECT version_num FROM alembic_version")).scalar() == "0027"


def test_quota_values_move_to_lines_by_pool_and_resource_and_back(
    engine: Engine, db_url: str
) -> None:
    """0018 carries every stored quota to lines in the org's default pool, and back."""
    config = alembic_config(settings_for(db_url))
    command.downgrade(config, "0017")
    now = "CURRENT_TIMESTAMP"
    with engine.begin() as conn:
        conn.execute(text("INSERT INTO orgs (name, parent_queue, gpus_centi, cpu_millicores, "
                          f"memory_mb, lock_version, created_at) VALUES ('o', 'o', 300, 40000, "
                          f"160000, 0, {now})"))  # fmt: skip
        team = (
            "INSERT INTO teams (org_id, name, status, purpose, gpu_quota_centi, gpu_limit_centi, "
            "weight_centi, priority, cpu_quota_millicores, memory_quota_mb, created_at, "
            "updated_at, desired_generation, observed_generation, attempts) VALUES ("
            "(SELECT id FROM orgs), :name, 'ready', '', :q, :l, :w, 7, :cpu, :mem, "
            f"{now}, {now}, 0, 0, 0)"
        )
        conn.execute(text(team), {"name": "a", "q": 33, "l": 100, "w": 150, "cpu": 2500,
                                  "mem": None})  # fmt: skip
        conn.execute(text(team), {"name": "b", "q": 0, "l": 0, "w": 100, "cpu": None,
                                  "mem": None})  # fmt: skip
        conn.execute(text(
            "INSERT INTO cluster_requests (team_id, kind, status, purpose, created_at, "
            "gpu_quota_centi, gpu_limit_centi, weight_centi, priority) VALUES ((SELECT id FROM "
            f"teams WHERE name = 'a'), 'create', 'approved', '', {now}, 50, 200, 100, 7)"
        ))  # fmt: skip
        conn.execute(text(
            "INSERT INTO decisions (request_id, outcome, reason, decided_at, changes) "
            f"VALUES ((SELECT id FROM cluster_requests), 'rejected', 'no', {now}, '{{}}')"
        ))  # fmt: skip
    command.upgrade(config, "0018")
    with engine.connect() as conn:
        pools = conn.execute(text("SELECT name, is_default FROM pools")).all()
        capacity: dict[str, int] = dict(
            conn.execute(text("SELECT resource, amount FROM pool_capacities")).tuples().all()
        )
        lines = conn.execute(text(
            "SELECT t.name, l.resource, l.guarantee, l.quota_limit, l.weight FROM "
            "team_quota_lines l JOIN teams t ON t.id = l.team_id ORDER BY t.name, l.resource"
        )).all()  # fmt: skip
        asked = conn.execute(text("SELECT resource, guarantee, quota_limit, weight "
                                  "FROM request_quota_lines")).all()  # fmt: skip
        decided = conn.execute(text("SELECT count(*) FROM decision_quota_lines")).scalar()
    assert [(name, bool(default)) for name, default in pools] == [("default", True)]
    assert capacity == {"gpu": 300, "cpu": 40000, "memory": 160000}
    assert [tuple(row) for row in lines] == [
        ("a", "cpu", 2500, None, 150),
        ("a", "gpu", 33, 100, 150),
        ("b", "gpu", 0, 0, 100),
    ]
    assert [tuple(row) for row in asked] == [("gpu", 50, 200, 100)]
    assert decided == 0, "a rejection holds no values"
    command.downgrade(config, "0017")
    with engine.connect() as conn:
        teams = conn.execute(text(
            "SELECT name, gpu_quota_centi, gpu_limit_centi, weight_centi, cpu_quota_millicores, "
            "memory_quota_mb FROM teams ORDER BY name"
        )).all()  # fmt: skip
        org = conn.execute(text("SELECT gpus_centi, cpu_millicores, memory_mb FROM orgs")).one()
        request = conn.execute(text("SELECT gpu_quota_centi, gpu_limit_centi, weight_centi "
                                    "FROM cluster_requests")).one()  # fmt: skip
        decision = conn.execute(text("SELECT gpu_quota_centi, weight_centi FROM decisions")).one()
    assert [tuple(row) for row in teams] == [
        ("a", 33, 100, 150, 2500, None),
        ("b", 0, 0, 100, None, None),
    ]
    assert tuple(org) == (300, 40000, 160000)
    assert tuple(request) == (50, 200, 100)
    assert tuple(decision) == (None, None)
    command.upgrade(config, "head")


def test_usage_history_gains_the_pool_and_keeps_every_sample(engine: Engine, db_url: str) -> None:
    """0020 keeps every sample (in the default pool) and adds the pool to the key; going
    down keeps the default pool's and drops the other pools' (no place for them)."""
    from sqlalchemy.orm import Session

    from app.teams.seed import seed_example

    with Session(engine) as session, session.begin():
        seed_example(session)
    config = alembic_config(settings_for(db_url))
    command.downgrade(config, "0019")
    insert = (
        "INSERT INTO usage_samples (team_id, resolution, at, seconds, allocated_gpu, "
        "requested_gpu, quota_gpu, guaranteed_gpu_s, borrowed_gpu_s) VALUES (1, :r, :at, 3600, "
        "0.5, 0.5, 0.33, 1188, 612)"
    )
    with engine.begin() as conn:
        conn.execute(text(insert), {"r": "hour", "at": "2026-11-10 10:00:00+00:00"})
        conn.execute(text(insert), {"r": "day", "at": "2026-11-01 00:00:00+00:00"})
    command.upgrade(config, "head")
    with engine.begin() as conn:
        rows = conn.execute(text("SELECT pool, resolution FROM usage_samples ORDER BY 2")).all()
        assert [tuple(r) for r in rows] == [("", "day"), ("", "hour")]
        # The same team, hour and resolution in another pool is another sample.
        conn.execute(
            text(
                "INSERT INTO usage_samples (team_id, pool, resolution, at, seconds, "
                "allocated_gpu, requested_gpu, quota_gpu, guaranteed_gpu_s, borrowed_gpu_s) "
                "VALUES (1, 'l40s', 'hour', '2026-11-10 10:00:00+00:00', 3600, 1, 1, 1, 3600, 0)"
            )
        )
        with pytest.raises(DatabaseError, match=r"resolution|CHECK"), conn.begin_nested():
            conn.execute(text("UPDATE usage_samples SET resolution = 'week'"))
        suggestion = (
            "INSERT INTO rightsizing_suggestions (team_id, pool, direction, guarantee_centi, "
            "average_centi, p95_centi, demand_p95_centi, waiting_share, suggested_centi, days, "
            "computed_at) VALUES (1, :pool, :direction, 100, 10, 10, 10, 0, 10, 14, "
            "'2026-11-10 10:00:00+00:00')"
        )
        conn.execute(text(suggestion), {"pool": "", "direction": "lower"})
        conn.execute(text(suggestion), {"pool": "l40s", "direction": "lower"})
        with pytest.raises(DatabaseError, match=r"direction|CHECK"), conn.begin_nested():
            conn.execute(text(suggestion), {"pool": "a100", "direction": "sideways"})
    command.downgrade(config, "0019")
    with engine.begin() as conn:
        assert conn.execute(text("SELECT count(*) FROM usage_samples")).scalar() == 2
    command.upgrade(config, "head")


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
        conn.execute(text("INSERT INTO orgs (name, parent_queue, lock_version, created_at) "
                          "VALUES ('o', 'o', 0, CURRENT_TIMESTAMP)"))  # fmt: skip
    insert = (
        "INSERT INTO teams (org_id, name, status, purpose, priority, created_at, updated_at, "
        "desired_generation, observed_generation, attempts) VALUES ((SELECT id FROM orgs), "
        "'nlp', :status, '', 100, CURRENT_TIMESTAMP, CURRENT_TIMESTAMP, 0, 0, 0)"
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
