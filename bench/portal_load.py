"""Load benchmark: 1,000 teams and 20,000 audit events on PostgreSQL, the portal under
uvicorn in its own process, load from this one. Prints p50/p99 latency and requests/s
for the team page, the admin overview and request submission, and the portal's peak
memory (VmHWM).

    make bench            # or: .venv/bin/python bench/portal_load.py --teams 1000
"""

from __future__ import annotations

import argparse
import contextlib
import os
import re
import subprocess
import sys
import time
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

import httpx
from sqlalchemy import insert, text

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from app.cli import migrate  # noqa: E402
from app.core.config import Settings  # noqa: E402
from app.core.db import make_engine  # noqa: E402
from app.core.models import (  # noqa: E402
    AuditEvent,
    ClusterRequest,
    Decision,
    Org,
    Pool,
    PoolCapacity,
    RequestQuotaLine,
    Team,
    TeamMember,
    TeamQuotaLine,
    TeamSchedule,
    TeamStatus,
    User,
    utcnow,
)
from bench.load import Call, measure  # noqa: E402
from tests.servers import free_port, postgres_server, wait_http  # noqa: E402


@contextlib.contextmanager
def running_portal(url: str, log_name: str, **env: str) -> Iterator[tuple[str, int, float]]:
    """The portal under uvicorn in its own process, on PostgreSQL at ``url``, once its
    worker has provisioned every team. Yields (base URL, pid, seconds to provision)."""
    port = free_port()
    log = (Path(os.environ.get("TMPDIR", "/tmp")) / log_name).open("w")
    portal = subprocess.Popen(
        [sys.executable, "-m", "app.cli", "serve", "--port", str(port)],
        env={
            **os.environ,
            "PORTAL_DEVELOPMENT": "true",
            "PORTAL_DATABASE_URL": url,
            "PORTAL_SIMULATED_STEP_SECONDS": "0",
            "PORTAL_WORKER_INTERVAL_SECONDS": "0.2",
            **env,
        },
        cwd=ROOT,
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    base = f"http://127.0.0.1:{port}"
    try:
        wait_http(base + "/login", timeout=60)
        started = time.perf_counter()
        check = make_engine(url)
        while True:
            with check.connect() as conn:
                left = conn.execute(
                    text("SELECT count(*) FROM teams WHERE status != 'ready'")
                ).scalar()
            if not left:
                break
            time.sleep(0.5)
        check.dispose()
        yield base, portal.pid, time.perf_counter() - started
    finally:
        portal.terminate()
        portal.wait(20)
        log.close()


@contextlib.contextmanager
def bench_database() -> Iterator[str]:
    """A PostgreSQL server of its own with a migrated, empty portal database."""
    with postgres_server() as server_url:
        engine = make_engine(server_url, isolation_level="AUTOCOMMIT")
        with engine.connect() as conn:
            conn.execute(text("CREATE DATABASE portal_bench"))
        engine.dispose()
        url = server_url.rsplit("/", 1)[0] + "/portal_bench"
        migrate(Settings(development=True, database_url=url))
        yield url


def seed(url: str, teams: int, events: int) -> None:
    """Bulk-insert the data set: teams approved, so the portal's worker provisions them."""
    engine = make_engine(url)
    now = utcnow()
    with engine.begin() as conn:
        org_id = conn.execute(
            insert(Org).returning(Org.id),
            {
                "name": "ml-org",
                "parent_queue": "ml-org",
                "lock_version": 0,
                "created_at": now,
            },
        ).scalar_one()
        pool_id = conn.execute(
            insert(Pool).returning(Pool.id),
            {"org_id": org_id, "name": "default", "is_default": True, "created_at": now},
        ).scalar_one()
        conn.execute(
            insert(PoolCapacity),
            [
                {"pool_id": pool_id, "resource": "gpu", "amount": teams * 100},
                {"pool_id": pool_id, "resource": "cpu", "amount": 0},
                {"pool_id": pool_id, "resource": "memory", "amount": 0},
            ],
        )
        gpu_line = {"pool_id": pool_id, "resource": "gpu", "guarantee": 50, "quota_limit": 200}
        conn.execute(
            insert(User),
            [
                {
                    "email": "admin@example.org",
                    "display_name": "admin",
                    "is_admin": True,
                    "created_at": now,
                }
            ]
            + [
                {
                    "email": f"lead-{i}@example.org",
                    "display_name": f"lead {i}",
                    "is_admin": False,
                    "created_at": now,
                }
                for i in range(teams)
            ],
        )
        users: dict[str, int] = dict(conn.execute(text("SELECT email, id FROM users")).all())
        rows = []
        for i in range(teams):
            rows.append(
                {
                    "org_id": org_id,
                    "name": f"team-{i:04d}",
                    "status": TeamStatus.APPROVED,
                    "purpose": "benchmark",
                    "priority": 100,
                    "created_by_id": users[f"lead-{i}@example.org"],
                    "created_at": now,
                    "updated_at": now,
                    "desired_generation": 1,
                    "observed_generation": 0,
                    "attempts": 0,
                }
            )
        conn.execute(insert(Team), rows)
        team_ids: dict[str, int] = dict(conn.execute(text("SELECT name, id FROM teams")).all())
        conn.execute(
            insert(TeamQuotaLine),
            [{"team_id": i, **gpu_line, "weight": 100} for i in team_ids.values()],
        )
        # Approved: the worker's to provision now.
        conn.execute(
            insert(TeamSchedule),
            [{"team_id": i, "next_attempt_at": now} for i in team_ids.values()],
        )
        conn.execute(
            insert(TeamMember),
            [
                {
                    "team_id": team_ids[f"team-{i:04d}"],
                    "user_id": users[f"lead-{i}@example.org"],
                    "role": "lead",
                    "created_at": now,
                }
                for i in range(teams)
            ],
        )
        conn.execute(
            insert(ClusterRequest),
            [
                {
                    "team_id": team_ids[f"team-{i:04d}"],
                    "kind": "create",
                    "status": "approved",
                    "purpose": "benchmark",
                    "requested_by_id": users[f"lead-{i}@example.org"],
                    "created_at": now,
                    "priority": 100,
                }
                for i in range(teams)
            ],
        )
        request_ids = [r for (r,) in conn.execute(text("SELECT id FROM cluster_requests"))]
        conn.execute(
            insert(RequestQuotaLine),
            [{"request_id": r, **gpu_line, "weight": 100} for r in request_ids],
        )
        conn.execute(
            insert(Decision),
            [
                {
                    "request_id": r,
                    "actor_id": users["admin@example.org"],
                    "outcome": "approved",
                    "reason": "",
                    "decided_at": now,
                    "changes": {},
                }
                for r in request_ids
            ],
        )
        team_list = list(team_ids.values())
        conn.execute(
            insert(AuditEvent),
            [
                {
                    "at": now - timedelta(seconds=events - n),
                    "actor_id": users["admin@example.org"],
                    "actor": "admin@example.org",
                    "action": "request.approved",
                    "team_id": team_list[n % len(team_list)],
                    "summary": f"benchmark event {n}",
                    "details": {"n": n},
                }
                for n in range(events)
            ],
        )
    engine.dispose()


def sign_in(base: str, email: str, admin: bool) -> httpx.Client:
    client = httpx.Client(base_url=base, timeout=30)
    token = re.search(r'name="csrf-token" content="([^"]+)"', client.get("/login").text)
    assert token
    client.post(
        "/login/dev",
        data={"csrf_token": token.group(1), "email": email, "role": "admin" if admin else "lead"},
    )
    page = client.get("/teams/new").text
    found = re.search(r'name="csrf-token" content="([^"]+)"', page)
    assert found is not None, "the page carries its CSRF token"
    client.headers["X-CSRF-Token"] = found.group(1)
    return client


def peak_memory_mb(pid: int) -> float:
    status = Path(f"/proc/{pid}/status").read_text()
    found = re.search(r"VmHWM:\s+(\d+) kB", status)
    return int(found.group(1)) / 1024 if found else float("nan")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--teams", type=int, default=1000)
    parser.add_argument("--events", type=int, default=20_000)
    parser.add_argument("--requests", type=int, default=600)
    parser.add_argument("--concurrency", type=int, default=4)
    args = parser.parse_args()

    with bench_database() as url:
        started = time.perf_counter()
        seed(url, args.teams, args.events)
        print(
            f"seeded {args.teams} teams and {args.events} audit events in "
            f"{time.perf_counter() - started:.1f} s"
        )

        with running_portal(url, "portal-bench.log") as (base, pid, provisioning):
            print(
                f"worker provisioned {args.teams} teams (simulated backend) in {provisioning:.1f} s"
            )
            admin = sign_in(base, "admin@example.org", True)
            leads = [sign_in(base, f"lead-{i}@example.org", False) for i in range(args.concurrency)]
            team_ids = {
                c: int(re.search(r'href="/teams/(\d+)"', c.get("/teams").text).group(1))  # type: ignore[union-attr]
                for c in leads
            }
            submitters = [
                sign_in(base, f"new-{i}@example.org", False) for i in range(args.concurrency)
            ]
            admins = [admin] + [
                sign_in(base, "admin@example.org", True) for _ in range(1, args.concurrency)
            ]
            team_page = Call.of_each(leads, [f"/teams/{team_ids[c]}" for c in leads])
            overview = Call.of_each(admins, ["/admin"] * len(admins))
            # A new team's name on every request ("{n}": the request's number); the CSRF
            # token goes in each connection's header.
            submit = Call.of_each(
                submitters,
                ["/teams"] * len(submitters),
                method="POST",
                data={"name": "bench-{n}", "gpu_quota": "0.1", "gpu_limit": "1", "purpose": "load"},
            )

            def run(name: str, call: Call, requests: int, ok: int = 200) -> dict[str, float]:
                return measure(
                    name, base, call, requests=requests, ok=ok, connections=args.concurrency
                )

            for name, call in (("team page", team_page), ("admin overview", overview)):
                run(name + " (warm-up)", call, 40)
            results = {
                "team page": run("team page", team_page, args.requests),
                "admin overview": run("admin overview", overview, args.requests // 3),
                "request submission": run("request submission", submit, args.requests // 2, ok=303),
            }
            memory = peak_memory_mb(pid)
            print(f"portal peak memory (VmHWM): {memory:.0f} MB")
            targets = [
                ("admin overview p50 < 100 ms", results["admin overview"]["p50_ms"] < 100),
                ("team page p50 < 30 ms", results["team page"]["p50_ms"] < 30),
                ("peak memory < 250 MB", memory < 250),
                ("no failed requests", all(r["failures"] == 0 for r in results.values())),
            ]
            for label, met in targets:
                print(f"  [{'met' if met else 'MISSED'}] {label}")


if __name__ == "__main__":
    main()
