"""Two portal replicas on one PostgreSQL, and what the portal's own metrics cost.

    .venv/bin/python bench/replicas.py [--teams 300] [--requests 400] [--rounds 3]

1. Provisioning: the seeded teams are approved, and two replicas start at once on the
   same database; they share the work through row leases. Prints the time until every
   team is ready and checks that no team was provisioned twice (one `team.ready` audit
   event per team).
2. Throughput: the team page under 4 client threads against one replica, then against
   both (clients alternate between them), interleaved for --rounds rounds; medians.
3. /metrics: the team page's p50 on one replica with the request metrics on and on one
   with them off (PORTAL_METRICS_ENABLED), interleaved; medians and the ratio (target:
   under 5 %), and the middleware's own cost measured in-process.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import re
import statistics
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

from sqlalchemy import text

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from app.core.db import make_engine  # noqa: E402
from bench.load import Call, measure  # noqa: E402
from bench.portal_load import bench_database, seed, sign_in  # noqa: E402
from tests.servers import free_port, wait_http  # noqa: E402

CONCURRENCY = 4


@contextlib.contextmanager
def replicas(url: str, count: int, **env: str) -> Iterator[list[tuple[str, int]]]:
    """``count`` portal processes on ``url`` (base URL, pid), stopped with SIGTERM."""
    processes: list[tuple[subprocess.Popen[bytes], str]] = []
    try:
        for n in range(count):
            port = free_port()
            log = (Path(os.environ.get("TMPDIR", "/tmp")) / f"replica-{n}.log").open("w")
            process = subprocess.Popen(
                [sys.executable, "-m", "app.cli", "serve", "--port", str(port)],
                env={
                    **os.environ,
                    "PORTAL_DEVELOPMENT": "true",
                    "PORTAL_DATABASE_URL": url,
                    "PORTAL_SIMULATED_STEP_SECONDS": "0",
                    "PORTAL_SIMULATED_CALL_SECONDS": "0.002",
                    "PORTAL_WORKER_INTERVAL_SECONDS": "0.2",
                    "PORTAL_USAGE_COLLECTOR_ENABLED": "false",
                    **env,
                },
                cwd=ROOT,
                stdout=log,
                stderr=subprocess.STDOUT,
            )
            processes.append((process, f"http://127.0.0.1:{port}"))
        for _, base in processes:
            wait_http(base + "/healthz", timeout=60)
        yield [(base, process.pid) for process, base in processes]
    finally:
        for process, _ in processes:
            process.terminate()
        for process, _ in processes:
            process.wait(30)


def scalar(url: str, sql: str) -> int:
    engine = make_engine(url)
    with engine.connect() as conn:
        value = int(conn.execute(text(sql)).scalar_one())
    engine.dispose()
    return value


def provisioning(url: str, teams: int) -> None:
    started = time.perf_counter()
    with replicas(url, 2) as running:
        while scalar(url, "SELECT count(*) FROM teams WHERE status != 'ready'"):
            time.sleep(0.2)
        seconds = time.perf_counter() - started
        pids = [pid for _, pid in running]
    ready_events = scalar(url, "SELECT count(*) FROM audit_events WHERE action = 'team.ready'")
    print(
        f"provisioning: {teams} teams ready in {seconds:.1f} s with 2 replicas "
        f"(pids {pids[0]}, {pids[1]}); team.ready events {ready_events} "
        f"(= {teams}: none twice)",
        flush=True,
    )
    assert ready_events == teams, "a team was provisioned twice"


def team_page_calls(bases: list[str]) -> Call:
    """Each connection a lead of its own on a replica of ``bases`` in turn, loading the
    page of the lead's team."""
    clients, urls = [], []
    for worker in range(CONCURRENCY):
        base = bases[worker % len(bases)]
        client = sign_in(base, f"lead-{worker}@example.org", False)
        found = re.search(r'href="/teams/(\d+)"', client.get("/teams").text)
        assert found is not None, "the lead sees a team"
        clients.append(client)
        urls.append(f"{base}/teams/{found.group(1)}")
    return Call.of_each(clients, urls)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--teams", type=int, default=300)
    parser.add_argument("--requests", type=int, default=400)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    with bench_database() as url:
        seed(url, args.teams, 2000)
        provisioning(url, args.teams)

        results: dict[str, list[dict[str, float]]] = {
            "1 replica": [],
            "2 replicas": [],
            "1 replica, metrics off": [],
        }
        with (
            replicas(url, 2) as both,
            replicas(url, 1, PORTAL_METRICS_ENABLED="false") as bare,
        ):
            # One replica with metrics on is the first of the pair: measured once, it is
            # both the one-replica throughput and the metrics-on latency.
            factories = {
                "1 replica": team_page_calls([both[0][0]]),
                "2 replicas": team_page_calls([base for base, _ in both]),
                "1 replica, metrics off": team_page_calls([bare[0][0]]),
            }
            for factory in factories.values():
                measure("warm-up", "", factory, requests=40, connections=CONCURRENCY)
            for n in range(args.rounds):
                print(f"-- round {n + 1}", flush=True)
                for name, factory in factories.items():
                    results[name].append(
                        measure(
                            f"team page, {name}",
                            "",
                            factory,
                            requests=args.requests,
                            connections=CONCURRENCY,
                        )
                    )

        def median(name: str, figure: str) -> float:
            return statistics.median(r[figure] for r in results[name])

        one_rps, two_rps = median("1 replica", "rps"), median("2 replicas", "rps")
        on, off_ms = median("1 replica", "p50_ms"), median("1 replica, metrics off", "p50_ms")
        print(
            f"\nteam page throughput, medians of {args.rounds}: 1 replica {one_rps:.1f} req/s, "
            f"2 replicas {two_rps:.1f} req/s (x{two_rps / one_rps:.2f}; {os.cpu_count()} CPUs, "
            "the load generator on the same machine)"
        )
        print(
            f"request metrics, two processes A/B: team page p50 {on:.1f} ms with, "
            f"{off_ms:.1f} ms without ({100 * (on / off_ms - 1):+.1f} %)"
        )
        cost = observe_cost_us()
        print(
            f"request metrics, measured in-process: {cost:.1f} us per request "
            f"= {100 * cost / 1000 / off_ms:.3f} % of the team page's p50"
        )


def observe_cost_us(calls: int = 100_000) -> float:
    """What the middleware adds per request: labels looked up, counter and histogram."""
    from app.web.observability import RequestContext

    class Route:
        path = "/teams/{team_id}"

    scope = {"route": Route(), "method": "GET"}
    samples = []
    for _ in range(5):
        started = time.perf_counter()
        for _ in range(calls):
            RequestContext._observe(scope, 200, 0.01)
        samples.append((time.perf_counter() - started) / calls * 1e6)
    return statistics.median(samples)


if __name__ == "__main__":
    main()
