"""Real servers the tests start: a throw-away PostgreSQL cluster and the portal itself."""

from __future__ import annotations

import contextlib
import glob
import os
import pwd
import shutil
import socket
import subprocess
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _pg_bin(name: str) -> str:
    found = shutil.which(name)
    if found and "postgresql" in os.path.realpath(found):
        return found
    candidates = sorted(glob.glob(f"/usr/lib/postgresql/*/bin/{name}"))
    if not candidates:
        raise RuntimeError(
            f"PostgreSQL's {name} is not installed: run `make setup-test` "
            "(it installs Debian's postgresql package)"
        )
    return candidates[-1]


@contextlib.contextmanager
def postgres_server() -> Iterator[str]:
    """initdb + pg_ctl on a free loopback port; yields a SQLAlchemy URL; removes it all."""
    root = Path(tempfile.mkdtemp(prefix="portal-pg-"))
    data, sock = root / "data", root / "sock"
    data.mkdir()
    sock.mkdir()
    as_user: list[str] = []
    if os.geteuid() == 0:  # PostgreSQL refuses to run as root
        user = pwd.getpwnam("postgres")
        for path in (root, data, sock):
            os.chown(path, user.pw_uid, user.pw_gid)
        as_user = ["runuser", "-u", "postgres", "--"]
    port = free_port()
    log = root / "server.log"
    subprocess.run(
        [
            *as_user,
            _pg_bin("initdb"),
            "-D",
            str(data),
            "-U",
            "portal",
            "--auth=trust",
            "--encoding=UTF8",
            "--no-sync",
        ],
        check=True,
        capture_output=True,
    )
    options = (
        f"-h 127.0.0.1 -p {port} -k {sock} "
        "-c fsync=off -c full_page_writes=off -c max_connections=200"
    )
    subprocess.run(
        [
            *as_user,
            _pg_bin("pg_ctl"),
            "-D",
            str(data),
            "-o",
            options,
            "-l",
            str(log),
            "-w",
            "start",
        ],
        check=True,
        capture_output=True,
    )
    try:
        url = f"postgresql+psycopg://portal@127.0.0.1:{port}/postgres"
        yield url
    finally:
        subprocess.run(
            [*as_user, _pg_bin("pg_ctl"), "-D", str(data), "-m", "immediate", "-w", "stop"],
            capture_output=True,
        )
        shutil.rmtree(root, ignore_errors=True)


def wait_http(url: str, timeout: float = 30.0) -> None:
    import httpx

    deadline = time.monotonic() + timeout
    while True:
        try:
            httpx.get(url, timeout=1.0)
            return
        except httpx.HTTPError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.1)


@contextlib.contextmanager
def http_server(handler: Callable[..., BaseHTTPRequestHandler]) -> Iterator[str]:
    """``handler`` served over plain HTTP on a free loopback port, on a thread; its URL."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


@contextlib.contextmanager
def _provider(command: list[str], env: dict[str, str], issuer: str) -> Iterator[str]:
    """An OpenID provider process, its output in a temporary log, once it serves its
    discovery document at ``issuer``."""
    log = tempfile.NamedTemporaryFile(prefix="oidc-", suffix=".log", delete=False)  # noqa: SIM115
    process = subprocess.Popen(
        command, stdout=log, stderr=subprocess.STDOUT, env={**os.environ, **env}
    )
    try:
        wait_http(issuer.rstrip("/") + "/.well-known/openid-configuration", timeout=30)
        yield issuer
    finally:
        process.terminate()
        process.wait(10)
        log.close()
        os.unlink(log.name)


@contextlib.contextmanager
def oidc_provider(*extra: str) -> Iterator[str]:
    """A real OpenID provider process (oidc-provider-mock) on a free loopback port."""
    import sys

    port = free_port()
    command = [sys.executable, "-m", "oidc_provider_mock", "--port", str(port), *extra]
    with _provider(command, {"NO_COLOR": "1"}, f"http://127.0.0.1:{port}") as url:
        yield url


@contextlib.contextmanager
def introspecting_provider(redirect_uri: str) -> Iterator[str]:
    """A real OpenID provider with token introspection and JWT access tokens (zitadel/oidc's
    example provider, tools/oidc-op): clients "web" and "api" get opaque access tokens,
    "jwt-web" JWT ones; each has the secret "secret". Its issuer ends in a slash."""
    port = free_port()
    env = {"PORT": str(port), "REDIRECT_URI": redirect_uri}
    with _provider([str(tool("oidc-op"))], env, f"http://localhost:{port}/") as url:
        yield url


# Read once: some tests give the tools they start another HOME.
_CACHE = Path(
    os.environ.get("PORTAL_CACHE")
    or Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "gpu-portal"
)


def cache_dir() -> Path:
    """The cache outside git where set-up puts tools and assets (as the scripts say)."""
    return _CACHE


# Tests that use the Go tools built into the cache (they run once the build is done).
TOOL_TESTS = (
    "tests/k8s/",
    "tests/usage/test_prometheus.py",
    "tests/test_compose.py",
    "tests/auth/test_introspection.py",
    "tests/test_load_client.py",
)


def tool(name: str) -> Path:
    """A binary built by scripts/build-tools.sh into the cache outside git."""
    path = cache_dir() / "bin" / name
    if os.environ.get("PORTAL_TOOLS_BUILDING"):
        # scripts/test.sh builds them meanwhile: a second build would race the first.
        raise RuntimeError(
            f"{name} is being built while this test runs: a test that uses the Go tools "
            "belongs in TOOL_TESTS (tests/servers.py), which run after the build"
        )
    if not path.exists():
        root = Path(__file__).resolve().parents[1]
        subprocess.run([str(root / "scripts/build-tools.sh")], check=True)
    return path


@contextlib.contextmanager
def prometheus_server(*scrape_targets: str) -> Iterator[str]:
    """A real Prometheus scraping each of ``scrape_targets`` (host:port) every second."""
    root = Path(tempfile.mkdtemp(prefix="portal-prom-"))
    config = root / "prometheus.yml"
    targets = ", ".join(f"'{t}'" for t in scrape_targets)
    config.write_text(
        "global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\n"
        "scrape_configs:\n  - job_name: kai\n"
        f"    static_configs:\n      - targets: [{targets}]\n"
    )
    port = free_port()
    log = (root / "prometheus.log").open("w")
    process = subprocess.Popen(
        [
            str(tool("prometheus")),
            f"--config.file={config}",
            f"--storage.tsdb.path={root / 'data'}",
            f"--web.listen-address=127.0.0.1:{port}",
        ],
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        wait_http(url + "/-/ready", timeout=60)
        yield url
    finally:
        process.terminate()
        process.wait(20)
        log.close()
        shutil.rmtree(root, ignore_errors=True)


@contextlib.contextmanager
def portal_process(folder: Path, port: int, env: dict[str, str]) -> Iterator[None]:
    """`gpu-portal serve --seed` in its own process, as `make run` starts it."""
    import sys

    log = (folder / "portal.log").open("w")
    process = subprocess.Popen(
        [sys.executable, "-m", "app.cli", "serve", "--seed", "--port", str(port)],
        env={**os.environ, **env},
        stdout=log,
        stderr=subprocess.STDOUT,
        cwd=Path(__file__).resolve().parents[1],
    )
    try:
        wait_http(f"http://127.0.0.1:{port}/login", timeout=60)
        yield
    finally:
        process.terminate()
        process.wait(20)
        log.close()
