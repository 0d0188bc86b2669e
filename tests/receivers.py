"""Real local receivers for notification deliveries: an SMTP server process (aiosmtpd)
that stores what it accepts in a Maildir, and an HTTP server that records webhook posts
and can fail or hang on purpose."""

from __future__ import annotations

import contextlib
import datetime as dt
import ipaddress
import json
import mailbox
import ssl
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from app.core.config import PROJECT_ROOT
from tests.servers import free_port


def self_signed(folder: Path, names: tuple[str, ...] = ("localhost",)) -> tuple[Path, Path]:
    """A certificate for 127.0.0.1 and ``names`` that is its own CA: (cert, key)."""
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "test smtp")])
    now = dt.datetime.now(dt.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(minutes=5))
        .not_valid_after(now + dt.timedelta(days=1))
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .add_extension(
            x509.SubjectAlternativeName(
                [
                    *(x509.DNSName(n) for n in names),
                    x509.IPAddress(ipaddress.ip_address("127.0.0.1")),
                ]
            ),
            critical=False,
        )
        .sign(key, hashes.SHA256())
    )
    stem = "smtp" if names == ("localhost",) else names[0]
    cert_path, key_path = folder / f"{stem}.crt", folder / f"{stem}.key"
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    return cert_path, key_path


@dataclass
class SmtpServer:
    port: int
    maildir: Path
    process: subprocess.Popen[str]

    def messages(self) -> list[mailbox.MaildirMessage]:
        return list(mailbox.Maildir(str(self.maildir), create=False))


@contextlib.contextmanager
def smtp_server(
    folder: Path,
    *,
    tls: tuple[Path, Path] | None = None,
    implicit_tls: bool = False,
    user: str | None = None,
    password: str | None = None,
) -> Iterator[SmtpServer]:
    port = free_port()
    maildir = folder / f"maildir-{port}"
    args = [sys.executable, "-m", "tests.smtp_server", "--port", str(port)]
    args += ["--maildir", str(maildir)]
    if tls:
        args += ["--cert", str(tls[0]), "--key", str(tls[1])]
    if implicit_tls:
        args.append("--implicit-tls")
    if user:
        args += ["--user", user, "--password", password or ""]
    mailbox.Maildir(str(maildir), create=True)
    process = subprocess.Popen(
        args, cwd=PROJECT_ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    try:
        assert process.stdout is not None
        line = process.stdout.readline()
        if line.strip() != "ready":
            process.kill()
            raise RuntimeError(f"the SMTP server did not start: {process.stderr.read()}")  # type: ignore[union-attr]
        yield SmtpServer(port, maildir, process)
    finally:
        process.terminate()
        try:
            process.wait(10)
        except subprocess.TimeoutExpired:
            process.kill()


@dataclass
class Post:
    path: str
    headers: dict[str, str]
    body: bytes

    def json(self) -> dict[str, str]:
        found: dict[str, str] = json.loads(self.body)
        return found


@dataclass
class WebhookReceiver:
    """Records every POST; ``mode`` ok (204), fail (500) or hang (answers after
    ``hang_seconds``); on ``address`` and ``port`` (0: any free one), over TLS with
    ``tls`` (cert, key)."""

    mode: str = "ok"
    hang_seconds: float = 30.0
    posts: list[Post] = field(default_factory=list)
    port: int = 0
    address: str = "127.0.0.1"
    tls: tuple[Path, Path] | None = None

    def __post_init__(self) -> None:
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
                receiver.posts.append(Post(self.path, dict(self.headers.items()), body))
                if receiver.mode == "hang":
                    time.sleep(receiver.hang_seconds)
                self.send_response(500 if receiver.mode == "fail" else 204)
                self.end_headers()

            def log_message(self, *args: object) -> None:
                pass

        self._server = ThreadingHTTPServer((self.address, self.port), Handler)
        self._server.daemon_threads = True
        if self.tls is not None:
            context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            context.load_cert_chain(str(self.tls[0]), str(self.tls[1]))
            self._server.socket = context.wrap_socket(self._server.socket, server_side=True)
        self.port = int(self._server.server_address[1])
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()

    def url(self, path: str = "/hook") -> str:
        return f"{'https' if self.tls else 'http'}://{self.address}:{self.port}{path}"

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()


@contextlib.contextmanager
def webhook_receiver(mode: str = "ok") -> Iterator[WebhookReceiver]:
    receiver = WebhookReceiver(mode=mode)
    try:
        yield receiver
    finally:
        receiver.close()
