"""Fixtures: every database test runs on SQLite and on a real PostgreSQL server."""

from __future__ import annotations

import contextlib
import logging
import os
import re
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import Engine, text
from sqlalchemy.orm import Session, sessionmaker

from app.cli import migrate
from app.core import logs
from app.core.config import Settings
from app.core.db import make_engine, make_session_factory
from app.core.logs import TextFormatter
from tests.servers import postgres_server

TABLES = (
    "rightsizing_suggestions",
    "digest_runs",
    "deliveries",
    "webhooks",
    "notification_mutes",
    "notifications",
    "kubeconfig_grants",
    "usage_samples",
    "web_sessions",
    "api_tokens",
    "audit_events",
    "decision_quota_lines",
    "decisions",
    "request_quota_lines",
    "cluster_requests",
    "team_quota_lines",
    "provisioning_steps",
    "team_members",
    "teams",
    "users",
    "pool_capacities",
    "pools",
    "orgs",
)


class _EveryRecord(logging.Handler):
    """Every record of the test process at INFO and above, formatted as the portal
    formats its own log."""

    def __init__(self) -> None:
        super().__init__(logging.INFO)
        self.setFormatter(TextFormatter())
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        with contextlib.suppress(Exception):  # one that cannot be formatted: pytest's
            self.lines.append(self.format(record))


_PATH_OF_A_URL = re.compile(r"(?i)\bhttps?://[^/\s\"'<>?#]+[/?#](?!…)[^\s\"'<>]+")


@pytest.fixture(scope="session", autouse=True)
def log_has_no_secrets() -> Iterator[None]:
    """The whole suite's log (INFO and above, every logger) carries no URL's path (a
    webhook's credential) and no configured secret; the redaction is installed as the
    portal installs it at start. Checked when the session ends: an error there names the
    lines."""
    logs.install()
    root = logging.getLogger()
    level = root.level
    root.setLevel(logging.INFO)
    handler = _EveryRecord()
    root.addHandler(handler)
    yield
    root.removeHandler(handler)
    root.setLevel(level)
    secrets = sorted(logs._secrets)
    found = [
        line
        for line in handler.lines
        if _PATH_OF_A_URL.search(line) or any(secret in line for secret in secrets)
    ]
    assert not found, "the log carries a URL path or a secret:\n" + "\n".join(found[:10])


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Tests that use the Go tools carry the mark ``tools``: scripts/test.sh runs the
    others while the tools build, then these."""
    from tests.servers import TOOL_TESTS

    root = Path(__file__).resolve().parents[1]
    for item in items:
        where = item.path.relative_to(root).as_posix()
        if where.startswith(TOOL_TESTS):
            item.add_marker(pytest.mark.tools)


def settings_for(url: str, **overrides: object) -> Settings:
    values: dict[str, object] = {
        "development": True,
        "database_url": url,
        "worker_enabled": False,
        "delivery_enabled": False,
        "usage_collector_enabled": False,
        "usage_cache_seconds": 0.0,
        "simulated_step_seconds": 0.0,
        "retry_base_seconds": 0.0,
        "worker_lease_seconds": 30.0,
    }
    values.update(overrides)
    return Settings(**values)  # type: ignore[arg-type]


@pytest.fixture(scope="session")
def pg_url() -> Iterator[str]:
    """A PostgreSQL server for the whole run (or PORTAL_TEST_POSTGRES_URL if set)."""
    given = os.environ.get("PORTAL_TEST_POSTGRES_URL")
    if given:
        yield given
        return
    with postgres_server() as url:
        engine = make_engine(url, isolation_level="AUTOCOMMIT")
        with engine.connect() as conn:
            conn.execute(text("CREATE DATABASE portal_test"))
        engine.dispose()
        test_url = url.rsplit("/", 1)[0] + "/portal_test"
        migrate(settings_for(test_url))
        yield test_url


@pytest.fixture(scope="session")
def sqlite_template() -> Iterator[Path]:
    """A migrated SQLite file that each test copies (a fresh schema per test)."""
    folder = Path(tempfile.mkdtemp(prefix="portal-sqlite-"))
    template = folder / "template.db"
    migrate(settings_for(f"sqlite:///{template}"))
    yield template
    shutil.rmtree(folder, ignore_errors=True)


@pytest.fixture(params=["sqlite", "postgresql"])
def db_url(request: pytest.FixtureRequest, tmp_path: Path, sqlite_template: Path) -> Iterator[str]:
    if request.param == "sqlite":
        target = tmp_path / "portal.db"
        shutil.copy(sqlite_template, target)
        yield f"sqlite:///{target}"
        return
    url: str = request.getfixturevalue("pg_url")
    yield url
    engine = make_engine(url)
    with engine.begin() as conn:
        conn.execute(text(f"TRUNCATE {', '.join(TABLES)} RESTART IDENTITY CASCADE"))
    engine.dispose()


@pytest.fixture
def engine(db_url: str) -> Iterator[Engine]:
    engine = make_engine(db_url)
    yield engine
    engine.dispose()


@pytest.fixture
def session_factory(engine: Engine) -> sessionmaker[Session]:
    return make_session_factory(engine)


@pytest.fixture
def session(session_factory: sessionmaker[Session]) -> Iterator[Session]:
    with session_factory() as session:
        yield session
        session.rollback()
