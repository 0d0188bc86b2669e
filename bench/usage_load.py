"""Usage benchmark: 500 teams with 90 days of samples on PostgreSQL.

Prints p50/p99 for the org view, the team page and the showback CSV export, the
collector's time per pass, and the size of the samples' storage.

    .venv/bin/python bench/usage_load.py
"""

from __future__ import annotations

import argparse
import io
import re
import statistics
import sys
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import psycopg
from sqlalchemy import text

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from app.adapters.simulated import SimulatedBackend  # noqa: E402
from app.cli import migrate  # noqa: E402
from app.core.config import Settings  # noqa: E402
from app.core.db import make_engine, make_session_factory  # noqa: E402
from app.usage.history import Collector  # noqa: E402
from app.usage.service import UsageCache  # noqa: E402
from bench.load import Call, measure  # noqa: E402
from bench.portal_load import running_portal, seed, sign_in  # noqa: E402
from tests.servers import postgres_server  # noqa: E402


def seed_samples(url: str, days: int, interval: int) -> int:
    """What the collector keeps: daily rows, hourly rows for the last 8 days, raw rows for
    the last day, for `days` days, written with COPY."""
    dsn = url.replace("postgresql+psycopg://", "postgresql://")
    now = datetime.now(UTC).replace(second=0, microsecond=0)
    with psycopg.connect(dsn) as conn:
        team_ids = [r[0] for r in conn.execute("SELECT id FROM teams ORDER BY id").fetchall()]
        rows = 0
        with (
            conn.cursor() as cur,
            cur.copy(
                "COPY usage_samples (team_id, resolution, at, seconds, allocated_gpu,"
                " requested_gpu, quota_gpu, guaranteed_gpu_s, borrowed_gpu_s) FROM STDIN"
            ) as copy,
        ):
            raw_start = now - timedelta(days=1)
            hour_start = (now - timedelta(days=8)).replace(minute=0)
            day_start = (now - timedelta(days=days)).replace(hour=0, minute=0)
            for n, team_id in enumerate(team_ids):
                buffer = io.StringIO()

                def row(
                    resolution: str,
                    at: datetime,
                    seconds: int,
                    allocated: float,
                    buffer: io.StringIO = buffer,
                    team_id: int = team_id,
                ) -> None:
                    g, b = min(allocated, 0.5), max(0.0, allocated - 0.5)
                    buffer.write(
                        f"{team_id}\t{resolution}\t{at.isoformat()}\t{seconds}\t"
                        f"{allocated}\t{allocated}\t0.5\t{g * seconds}\t{b * seconds}\n"
                    )

                at = day_start
                while at < hour_start.replace(hour=0):
                    row("day", at, 86400, 0.3 + 0.4 * ((at.day + n) % 7) / 7)
                    at += timedelta(days=1)
                    rows += 1
                at = hour_start
                while at < raw_start:
                    row("hour", at, 3600, 0.25 + 0.5 * ((at.hour + n) % 24) / 24)
                    at += timedelta(hours=1)
                    rows += 1
                at = raw_start
                while at < now:
                    row("raw", at, interval, 0.3 + 0.6 * ((at.minute + n) % 60) / 60)
                    at += timedelta(seconds=interval)
                    rows += 1
                copy.write(buffer.getvalue())
        conn.commit()
        conn.execute("ANALYZE usage_samples")
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--teams", type=int, default=500)
    parser.add_argument("--days", type=int, default=90)
    parser.add_argument("--interval", type=int, default=60)
    parser.add_argument("--requests", type=int, default=300)
    parser.add_argument("--concurrency", type=int, default=4)
    args = parser.parse_args()

    with postgres_server() as server_url:
        engine = make_engine(server_url, isolation_level="AUTOCOMMIT")
        with engine.connect() as conn:
            conn.execute(text("CREATE DATABASE usage_bench"))
        engine.dispose()
        url = server_url.rsplit("/", 1)[0] + "/usage_bench"
        migrate(Settings(development=True, database_url=url))
        seed(url, args.teams, 2000)
        started = time.perf_counter()
        rows = seed_samples(url, args.days, args.interval)
        print(
            f"seeded {args.teams} teams with {rows:,} samples ({args.days} days) "
            f"in {time.perf_counter() - started:.1f} s"
        )

        with running_portal(url, "usage-bench.log", PORTAL_USAGE_COLLECTOR_ENABLED="false") as (
            base,
            _pid,
            _seconds,
        ):
            check = make_engine(url)
            admin = sign_in(base, "admin@example.org", True)
            leads = [sign_in(base, f"lead-{i}@example.org", False) for i in range(args.concurrency)]
            team_of = {
                id(c): int(re.search(r'href="/teams/(\d+)"', c.get("/teams").text).group(1))  # type: ignore[union-attr]
                for c in leads
            }
            admins = [admin] + [
                sign_in(base, "admin@example.org", True) for _ in range(args.concurrency - 1)
            ]

            org_view = Call.of_each(admins, ["/admin"] * len(admins))
            team_page = Call.of_each(leads, [f"/teams/{team_of[id(c)]}" for c in leads])
            export = Call.of_each(admins, ["/admin/showback.csv"] * len(admins))

            def run(name: str, call: Call, requests: int, connections: int) -> dict[str, float]:
                return measure(name, base, call, requests=requests, connections=connections)

            run("org view (warm-up)", org_view, 20, args.concurrency)
            run("team page (warm-up)", team_page, 20, args.concurrency)
            results = {
                "org view": run("org view", org_view, args.requests, args.concurrency),
                "team page": run("team page", team_page, args.requests, args.concurrency),
                "showback CSV": run("showback CSV", export, 20, 2),
            }
            csv_lines = admin.get("/admin/showback.csv").text.count("\n")
            print(f"showback CSV: {csv_lines - 1} rows (team x month)")

            factory = make_session_factory(check)
            backend = SimulatedBackend(step_seconds=0)
            # The collector against the same database, with every queue present.
            from app.provisioning.backend import spec_for
            from app.teams import repository as repo

            with factory() as session:
                org = repo.get_org(session)
                for team in repo.get_teams(session, statuses=["ready"]):
                    from app.core.models import Step

                    backend.apply(Step.QUEUE, spec_for(team, org))
            collector = Collector(factory, UsageCache(backend, ttl=0), interval=args.interval)
            passes = []
            for i in range(5):
                now = datetime.now(UTC) + timedelta(seconds=args.interval * (i + 1))
                passes.append(collector.collect_once(now).seconds)
            print(
                f"collector pass: median {1000 * statistics.median(passes):.0f} ms "
                f"(max {1000 * max(passes):.0f} ms) for {args.teams} teams"
            )
            with check.connect() as conn:
                table = (
                    conn.execute(text("SELECT pg_total_relation_size('usage_samples')")).scalar()
                    or 0
                )
                database = (
                    conn.execute(text("SELECT pg_database_size(current_database())")).scalar() or 0
                )
            print(
                f"samples storage: {table / 1e6:.0f} MB (table and indexes); "
                f"database {database / 1e6:.0f} MB"
            )
            check.dispose()
            targets = [
                ("org view p50 < 150 ms", results["org view"]["p50_ms"] < 150),
                ("team page p50 < 40 ms", results["team page"]["p50_ms"] < 40),
                ("collector pass < 1 s", max(passes) < 1.0),
                ("samples storage < 200 MB", table < 200e6),
            ]
            for label, met in targets:
                print(f"  [{'met' if met else 'MISSED'}] {label}")


if __name__ == "__main__":
    main()
