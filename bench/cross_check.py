"""The load client checked against a second compiled one: the same pages, connections
and request counts from ``tools/loadclient`` and from bombardier (a Go load generator on
fasthttp, built from the Go module proxy into the tool cache on first use), interleaved
round by round, side by side. When the two agree on requests a second and p50, neither
client is what the benchmarks measure.

    .venv/bin/python bench/cross_check.py [--teams 100] [--rounds 3] [--requests 2000]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.load import CONNECTIONS, Call, run  # noqa: E402
from bench.page_cost import ceiling  # noqa: E402
from bench.portal_load import bench_database, running_portal, seed, sign_in  # noqa: E402
from tests.servers import cache_dir  # noqa: E402

BOMBARDIER = "github.com/codesenberg/bombardier"
BOMBARDIER_VERSION = "v1.2.6"
AGREE = 0.15  # the two clients' medians within this share of each other


def bombardier() -> Path:
    """bombardier, built into the tool cache the first time (as scripts/build-tools.sh
    builds the other Go tools)."""
    built = cache_dir() / "bin" / f"bombardier-{BOMBARDIER_VERSION}"
    if not built.exists():
        print(f"building bombardier {BOMBARDIER_VERSION} (once; cached in {built.parent})")
        staging = built.parent / ".bombardier-build"
        subprocess.run(
            ["go", "install", f"{BOMBARDIER}@{BOMBARDIER_VERSION}"],
            env={**os.environ, "GOBIN": str(staging)},
            check=True,
        )
        (staging / "bombardier").rename(built)
        staging.rmdir()
    return built


def with_bombardier(base: str, call: Call, requests: int) -> dict[str, float]:
    """The call sent ``requests`` times over ``CONNECTIONS`` connections by bombardier."""
    headers: list[str] = []
    for name, value in {**call.headers, **(call.each[0] if call.each else {})}.items():
        if not name.startswith(":"):
            headers += ["-H", f"{name}: {value}"]
    done = subprocess.run(
        [
            str(bombardier()),
            "-c",
            str(CONNECTIONS),
            "-n",
            str(requests),
            "-m",
            call.method,
            "-l",
            "-p",
            "r",
            "-o",
            "j",
            *headers,
            base + call.path,
        ],
        capture_output=True,
        text=True,
        check=True,
    )
    result = json.loads(done.stdout)["result"]
    seconds = float(result["timeTakenSeconds"])
    ok = int(result["req2xx"])
    return {
        "rps": ok / seconds,
        "p50_ms": float(result["latency"]["percentiles"]["50"]) / 1000,
        "failures": float(requests - ok),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--teams", type=int, default=100)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--requests", type=int, default=2000)
    args = parser.parse_args()
    bombardier()
    with bench_database() as url:
        seed(url, args.teams, args.teams * 20)
        with running_portal(url, "cross-check.log", PORTAL_TEMPLATE_RELOAD="false") as (
            base,
            _pid,
            _seconds,
        ):
            lead = sign_in(base, "lead-0@example.org", False)
            admin = sign_in(base, "admin@example.org", True)
            found = re.search(r'href="/teams/(\d+)"', lead.get("/teams").text)
            assert found is not None, "the lead sees a team"
            team_page = f"/teams/{found.group(1)}"
            with ceiling(lead.get(team_page).text) as (ceiling_base, _ceiling_pid):
                targets = {
                    "ceiling (team page's bytes)": (ceiling_base, Call("GET", team_page), 4),
                    "no-op (/healthz)": (base, Call("GET", "/healthz"), 4),
                    "signed-in no-op": (base, Call.of(lead, "/api/v1/me"), 2),
                    "team page": (base, Call.of(lead, team_page), 1),
                    "admin overview": (base, Call.of(admin, "/admin"), 1),
                }
                figures: dict[str, dict[str, list[float]]] = {}
                for number in range(args.rounds):
                    for name, (where, call, times) in targets.items():
                        count = args.requests * times // 4
                        ours = run(where, call, requests=count)
                        theirs = with_bombardier(where, call, count)
                        assert ours["failures"] == theirs["failures"] == 0, (ours, theirs)
                        slot = figures.setdefault(name, {})
                        for key, value in (
                            ("ours_rps", ours["rps"]),
                            ("theirs_rps", theirs["rps"]),
                            ("ours_p50", ours["p50_ms"]),
                            ("theirs_p50", theirs["p50_ms"]),
                            ("rps_ratio", ours["rps"] / theirs["rps"]),
                        ):
                            slot.setdefault(key, []).append(value)
                    print(f"-- round {number + 1} of {args.rounds} done", flush=True)
    print()
    print(
        "target | loadclient req/s, p50 | bombardier req/s, p50 | loadclient / bombardier "
        "req/s (each round)"
    )
    checks = []
    for name, got in figures.items():
        ratio = statistics.median(got["rps_ratio"])
        rounds = " / ".join(f"{r:.2f}" for r in got["rps_ratio"])
        print(
            f"{name:<28} | {statistics.median(got['ours_rps']):7.1f}, "
            f"{statistics.median(got['ours_p50']):5.2f} ms | "
            f"{statistics.median(got['theirs_rps']):7.1f}, "
            f"{statistics.median(got['theirs_p50']):5.2f} ms | {ratio:.2f} ({rounds})"
        )
        checks.append(
            (f"{name}: the two clients within {100 * AGREE:.0f} %", abs(ratio - 1) <= AGREE)
        )
    for label, met in checks:
        print(f"  [{'met' if met else 'MISSED'}] {label}")


if __name__ == "__main__":
    main()
