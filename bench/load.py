"""The benchmarks' load: one request sent many times over fixed keep-alive connections
by a compiled client (``tools/loadclient``, built into the tool cache by
``scripts/build-tools.sh``), so that what is measured is the server, not the client.

A Python client spends more CPU a request than a minimal FastAPI app does to serve one:
it capped such an app near 1,000 requests a second, where the compiled client measures
more than twice that. Each measurement therefore carries the client's own CPU a request
(``client_cpu_ms``) beside the server's, and ``client_check`` measures the fastest target
with one client process and with two: when two do not serve it faster, one was not the
limit.
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from urllib.parse import urlencode

import httpx

from tests.servers import tool

CONNECTIONS = 4


@dataclass(frozen=True)
class Call:
    """One request as the load client sends it: method, path, headers and body."""

    method: str
    path: str
    headers: Mapping[str, str] = field(default_factory=dict)
    body: str = ""

    @classmethod
    def of(
        cls,
        client: httpx.Client,
        path: str,
        *,
        method: str = "GET",
        data: Mapping[str, str] | None = None,
        headers: Mapping[str, str] | None = None,
    ) -> Call:
        """The request ``client`` would send (its cookies, its CSRF header), as a call."""
        sent = {
            "Cookie": "; ".join(f"{c.name}={c.value}" for c in client.cookies.jar),
            **{k: v for k, v in client.headers.items() if k.lower() == "x-csrf-token"},
            **(headers or {}),
        }
        body = ""
        if data is not None:
            body = urlencode(data)
            sent["Content-Type"] = "application/x-www-form-urlencoded"
        return cls(method, path, {k: v for k, v in sent.items() if v}, body)

    def send(self, base: str) -> httpx.Response:
        """The call once, from Python (to read its answer, not to measure it)."""
        return httpx.request(
            self.method, base + self.path, headers=dict(self.headers), content=self.body
        )


def run(
    base: str, call: Call, *, requests: int, connections: int = CONNECTIONS, ok: int = 200
) -> dict[str, float]:
    """``call`` sent ``requests`` times over ``connections`` keep-alive connections: p50
    and p99 (ms), requests a second, failures, connections opened and the client's CPU
    a request (ms)."""
    order = {
        "url": base + call.path,
        "method": call.method,
        "headers": dict(call.headers),
        "body": call.body,
        "requests": requests,
        "connections": connections,
        "ok": [ok],
    }
    done = subprocess.run(
        [str(tool("loadclient"))],
        input=json.dumps(order),
        capture_output=True,
        text=True,
        check=False,
        timeout=3600,
    )
    if done.returncode != 0:
        raise RuntimeError(f"the load client failed: {done.stderr.strip()}")
    answer = json.loads(done.stdout)
    return {
        "p50_ms": float(answer["p50_ms"]),
        "p99_ms": float(answer["p99_ms"]),
        "rps": float(answer["rps"]),
        "failures": float(answer["failures"]),
        "connections": float(answer["connections_opened"]),
        "client_cpu_ms": 1000 * float(answer["client_cpu_s"]) / requests,
    }


def measure(name: str, base: str, call: Call, *, requests: int, ok: int = 200) -> dict[str, float]:
    """``run``, printed as one line."""
    result = run(base, call, requests=requests, ok=ok)
    print(
        f"{name:<22} p50 {result['p50_ms']:7.1f} ms   p99 {result['p99_ms']:7.1f} ms   "
        f"{result['rps']:7.1f} req/s   client {result['client_cpu_ms']:5.2f} ms CPU/req   "
        f"failures {result['failures']:.0f}",
        flush=True,
    )
    return result


def client_check(base: str, call: Call, *, requests: int) -> dict[str, float]:
    """The same load from one client process and from two (each with half the
    connections, together as many): requests a second of each, and the client's CPU a
    request. When two processes are not faster than one, one was not the limit."""
    one = run(base, call, requests=requests)
    half = max(1, CONNECTIONS // 2)
    with ThreadPoolExecutor(2) as pool:
        both = list(
            pool.map(lambda _: run(base, call, requests=requests // 2, connections=half), range(2))
        )
    two = sum(r["rps"] for r in both)
    return {
        "one_rps": one["rps"],
        "two_rps": two,
        "gain": two / one["rps"],
        "client_cpu_ms": one["client_cpu_ms"],
    }
