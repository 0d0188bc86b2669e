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
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from urllib.parse import urlencode

import httpx

from tests.servers import tool

CONNECTIONS = 4


@dataclass(frozen=True)
class Call:
    """One request as the load client sends it: method, path, headers and body ("{n}" in
    the path or body: the request's number), and headers of each connection's own (its
    signed-in session, say; connection i sends ``each[i % len(each)]``)."""

    method: str
    path: str
    headers: Mapping[str, str] = field(default_factory=dict)
    body: str = ""
    each: tuple[Mapping[str, str], ...] = ()

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
            body = urlencode(data, safe="{}")  # "{n}": the request's number
            sent["Content-Type"] = "application/x-www-form-urlencoded"
        return cls(method, path, {k: v for k, v in sent.items() if v}, body)

    @classmethod
    def of_each(
        cls,
        clients: Sequence[httpx.Client],
        paths: Sequence[str],
        *,
        method: str = "GET",
        data: Mapping[str, str] | None = None,
    ) -> Call:
        """The request each of ``clients`` sends to its path in ``paths`` (a full URL for
        a client of another server), a connection each (as many clients as
        connections)."""
        first = cls.of(clients[0], paths[0], method=method, data=data)
        return cls(
            method,
            paths[0],
            {k: v for k, v in first.headers.items() if k.lower() == "content-type"},
            first.body,
            tuple(
                {
                    ":path": path,
                    **{
                        k: v
                        for k, v in cls.of(c, path).headers.items()
                        if k.lower() in ("cookie", "x-csrf-token")
                    },
                }
                for c, path in zip(clients, paths, strict=True)
            ),
        )

    def with_headers(self, headers: Mapping[str, str]) -> Call:
        """The same call with ``headers`` added (on every connection)."""
        return Call(self.method, self.path, {**self.headers, **headers}, self.body, self.each)

    def send(self, base: str) -> httpx.Response:
        """The call once, from Python (to read its answer, not to measure it)."""
        headers = {**self.headers, **(self.each[0] if self.each else {})}
        path = headers.pop(":path", self.path).replace("{n}", "0")
        url = path if path.startswith("http") else base + path
        body = self.body.replace("{n}", "0")
        return httpx.request(self.method, url, headers=headers, content=body)


def run(
    base: str,
    call: Call,
    *,
    requests: int = 0,
    seconds: float = 0.0,
    connections: int = CONNECTIONS,
    ok: int = 200,
) -> dict[str, float]:
    """``call`` sent ``requests`` times (or for ``seconds``: a round of fixed length) over
    ``connections`` keep-alive connections: how many were sent, p50 and p99 (ms),
    requests a second, failures, connections opened and the client's CPU a request
    (ms)."""
    order = {
        "url": base + call.path,
        "method": call.method,
        "headers": dict(call.headers),
        "body": call.body,
        "requests": requests,
        "seconds": seconds,
        "connections": connections,
        "ok": [ok],
        "connection_headers": [
            {
                (":url" if k == ":path" else k): (
                    base + v if k == ":path" and not v.startswith("http") else v
                )
                for k, v in h.items()
            }
            for h in call.each
        ],
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
    sent = int(answer["requests"])
    return {
        "requests": float(sent),
        "p50_ms": float(answer["p50_ms"]),
        "p99_ms": float(answer["p99_ms"]),
        "rps": float(answer["rps"]),
        "failures": float(answer["failures"]),
        "connections": float(answer["connections_opened"]),
        "client_cpu_ms": 1000 * float(answer["client_cpu_s"]) / sent,
    }


def measure(
    name: str,
    base: str,
    call: Call,
    *,
    requests: int = 0,
    seconds: float = 0.0,
    ok: int = 200,
    connections: int = CONNECTIONS,
) -> dict[str, float]:
    """``run``, printed as one line."""
    result = run(base, call, requests=requests, seconds=seconds, ok=ok, connections=connections)
    print(
        f"{name:<22} p50 {result['p50_ms']:7.1f} ms   p99 {result['p99_ms']:7.1f} ms   "
        f"{result['rps']:7.1f} req/s   client {result['client_cpu_ms']:5.2f} ms CPU/req   "
        f"failures {result['failures']:.0f}",
        flush=True,
    )
    return result


def client_check(base: str, call: Call, *, seconds: float) -> dict[str, float]:
    """The same load from one client process and from two (each with half the
    connections, together as many), each for ``seconds``: requests a second of each, and
    the client's CPU a request. When two processes are not faster than one, one was not
    the limit."""
    one = run(base, call, seconds=seconds)
    half = max(1, CONNECTIONS // 2)
    with ThreadPoolExecutor(2) as pool:
        both = list(
            pool.map(lambda _: run(base, call, seconds=seconds, connections=half), range(2))
        )
    two = sum(r["rps"] for r in both)
    return {
        "one_rps": one["rps"],
        "two_rps": two,
        "gain": two / one["rps"],
        "client_cpu_ms": one["client_cpu_ms"],
    }
