"""The benchmarks' compiled load client (tools/loadclient) against a real HTTP server:
every request sent once, over exactly the connections asked for (kept alive), with the
headers and body given, failures counted by status, and its own CPU reported."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler

import pytest

from bench.load import Call, client_check, run
from tests.servers import http_server


class _Counting(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive
    seen: list[tuple[str, str, str, str, bytes]] = []
    connections: set[int] = set()
    lock = threading.Lock()

    def _answer(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else b""
        with self.lock:
            self.seen.append(
                (
                    self.command,
                    self.path,
                    self.headers.get("Cookie", ""),
                    self.headers.get("X-CSRF-Token", ""),
                    body,
                )
            )
            self.connections.add(id(self.connection))
        status = 500 if self.path.startswith("/fail") else 200
        status = 303 if self.path.startswith("/form") else status
        payload = b"x" * 2000
        self.send_response(status)
        if status == 303:
            self.send_header("Location", "/elsewhere")
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)

    do_GET = _answer
    do_POST = _answer

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def server() -> Iterator[str]:
    _Counting.seen, _Counting.connections = [], set()
    with http_server(_Counting) as url:
        yield url


def test_every_request_is_sent_once_over_kept_alive_connections(server: str) -> None:
    call = Call("POST", "/what-if", {"Cookie": "s=1", "X-CSRF-Token": "t"}, "q_1=1.5")
    got = run(server, call, requests=200, connections=4)
    assert len(_Counting.seen) == 200
    assert set(_Counting.seen) == {("POST", "/what-if", "s=1", "t", b"q_1=1.5")}
    assert len(_Counting.connections) == 4
    assert got["connections"] == 4
    assert got["failures"] == 0
    assert 0 < got["p50_ms"] <= got["p99_ms"]
    assert got["rps"] > 0
    assert got["client_cpu_ms"] > 0


def test_failures_are_counted_by_status(server: str) -> None:
    got = run(server, Call("GET", "/fail"), requests=20, connections=2)
    assert got["failures"] == 20
    assert len(_Counting.seen) == 20


def test_a_request_made_from_a_signed_in_client_carries_its_cookie_and_token(
    server: str,
) -> None:
    import httpx

    client = httpx.Client(base_url=server)
    client.cookies.set("portal_session", "abc")
    client.headers["X-CSRF-Token"] = "tok"
    call = Call.of(client, "/admin/what-if", method="POST", data={"q_1": "1.5"})
    run(server, call, requests=3, connections=1)
    assert set(_Counting.seen) == {
        ("POST", "/admin/what-if", "portal_session=abc", "tok", b"q_1=1.5")
    }


def test_the_client_check_compares_one_process_with_two(server: str) -> None:
    check = client_check(server, Call("GET", "/"), seconds=0.3)
    assert len(_Counting.seen) > 0
    assert check["one_rps"] > 0
    assert check["two_rps"] > 0
    assert check["gain"] == pytest.approx(check["two_rps"] / check["one_rps"])


def test_each_connection_sends_its_own_session_and_a_redirect_is_not_followed(
    server: str,
) -> None:
    """As the benchmarks' form posts: each connection a signed-in person of its own, a
    new name on every request, the 303 itself measured."""
    call = Call(
        "POST",
        "/form",
        {"Content-Type": "application/x-www-form-urlencoded"},
        "name=bench-{n}",
        (
            {":path": "/form/a", "Cookie": "s=a", "X-CSRF-Token": "ta"},
            {":path": "/form/b", "Cookie": "s=b", "X-CSRF-Token": "tb"},
        ),
    )
    got = run(server, call, requests=40, connections=2, ok=303)
    assert got["failures"] == 0
    assert len(_Counting.seen) == 40, "no redirect followed"
    sent = {(path, cookie, token) for _m, path, cookie, token, _b in _Counting.seen}
    assert sent == {("/form/a", "s=a", "ta"), ("/form/b", "s=b", "tb")}
    names = sorted(body for *_rest, body in _Counting.seen)
    assert names == sorted(f"name=bench-{n}".encode() for n in range(40))


def test_a_round_of_fixed_length_lasts_its_seconds(server: str) -> None:
    import time

    started = time.monotonic()
    got = run(server, Call("GET", "/"), seconds=0.5, connections=2)
    took = time.monotonic() - started
    assert 0.5 <= took < 5
    assert got["requests"] == len(_Counting.seen) > 0
    assert got["failures"] == 0
