"""Two portal processes on one PostgreSQL: SIGTERM hands the worker's leases over at once.

Each process is `gpu-portal serve` as a Deployment's replica runs it. Cluster calls are
slowed (the simulated backend blocks 0.4 s per call, as a slow API server or helm install
would), and leases last 300 s, so a replica that merely died would hold its teams for five
minutes. Replica A takes the three seeded teams; replica B starts while A holds them; A
gets SIGTERM; B must finish all three within seconds, and no team is provisioned twice.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from sqlalchemy import create_engine, text

from app.core.db import make_engine
from tests.servers import free_port, wait_http

ROOT = Path(__file__).resolve().parents[2]
LEASE_SECONDS = 300


@pytest.fixture
def handover_db(pg_url: str) -> str:
    admin = make_engine(pg_url, isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        conn.execute(text("DROP DATABASE IF EXISTS portal_handover"))
        conn.execute(text("CREATE DATABASE portal_handover"))
    admin.dispose()
    return pg_url.rsplit("/", 1)[0] + "/portal_handover"


def _replica(tmp_path: Path, name: str, db: str) -> tuple[subprocess.Popen[bytes], Path, int]:
    port = free_port()
    log = tmp_path / f"{name}.log"
    env = {
        **os.environ,
        "PORTAL_DEVELOPMENT": "true",
        "PORTAL_DATABASE_URL": db,
        "PORTAL_SIMULATED_STEP_SECONDS": "0",
        # Slow calls keep A busy with its teams (leases held) while B starts on a loaded
        # machine.
        "PORTAL_SIMULATED_CALL_SECONDS": "0.8",
        "PORTAL_WORKER_LEASE_SECONDS": str(LEASE_SECONDS),
        "PORTAL_WORKER_INTERVAL_SECONDS": "0.2",
        "PORTAL_USAGE_COLLECTOR_ENABLED": "false",
    }
    process = subprocess.Popen(
        [sys.executable, "-m", "app.cli", "serve", "--seed", "--port", str(port)],
        env=env,
        stdout=log.open("w"),
        stderr=subprocess.STDOUT,
        cwd=ROOT,
    )
    wait_http(f"http://127.0.0.1:{port}/healthz", timeout=60)
    return process, log, port


def _leases(db: str) -> dict[str, str | None]:
    engine = create_engine(db.replace("postgresql://", "postgresql+psycopg://", 1))
    with engine.connect() as conn:
        rows = conn.execute(
            text(
                "SELECT t.name, s.lease_owner FROM teams t "
                "LEFT JOIN team_schedules s ON s.team_id = t.id ORDER BY t.id"
            )
        ).all()
    engine.dispose()
    return {name: owner for name, owner in rows}


def _scalar(db: str, sql: str) -> int:
    engine = create_engine(db.replace("postgresql://", "postgresql+psycopg://", 1))
    with engine.connect() as conn:
        value = conn.execute(text(sql)).scalar_one()
    engine.dispose()
    return int(value)


def test_sigterm_hands_the_leases_to_the_other_replica(tmp_path: Path, handover_db: str) -> None:
    a, a_log, _ = _replica(tmp_path, "a", handover_db)
    b: subprocess.Popen[bytes] | None = None
    try:
        deadline = time.monotonic() + 30
        while not all(owner and f":{a.pid}:" in owner for owner in _leases(handover_db).values()):
            assert time.monotonic() < deadline, _leases(handover_db)
            time.sleep(0.1)
        b, _, _ = _replica(tmp_path, "b", handover_db)
        assert all(f":{a.pid}:" in (o or "") for o in _leases(handover_db).values()), (
            "A still holds every team while B starts"
        )

        stopped = time.monotonic()
        a.send_signal(signal.SIGTERM)
        a.wait(30)
        exited = time.monotonic() - stopped
        deadline = time.monotonic() + 60
        ready = "SELECT count(*) FROM teams WHERE status = 'ready'"
        while _scalar(handover_db, ready) < 3:
            assert time.monotonic() < deadline, _leases(handover_db)
            time.sleep(0.2)
        all_ready = time.monotonic() - stopped
    finally:
        for process in (a, b):
            if process is not None and process.poll() is None:
                process.terminate()
                process.wait(30)

    log = a_log.read_text()
    # uvicorn ends with the signal it was stopped by, after a clean shutdown.
    assert a.returncode in (0, -signal.SIGTERM), (a.returncode, log[-2000:])
    assert "Application shutdown complete" in log
    assert "handed back 2 lease(s)" in log, log[-2000:]
    assert exited < 15
    # Far sooner than the 300 s a lease lasts: B took the teams as soon as A let go.
    assert all_ready < 45, all_ready
    # Each team was made ready once: no second worker redid a team in another's hands.
    events = "SELECT count(*) FROM audit_events WHERE action = 'team.ready'"
    assert _scalar(handover_db, events) == 3
