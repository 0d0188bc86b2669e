"""A real SMTP server for the tests, in its own process: aiosmtpd from PyPI, storing
every message it accepts in a Maildir. STARTTLS or implicit TLS with the given
certificate; optional sign-in (AUTH PLAIN/LOGIN) with one user.

    python -m tests.smtp_server --port 2525 --maildir DIR [--cert C --key K]
        [--implicit-tls] [--user U --password P]
"""

from __future__ import annotations

import argparse
import signal
import ssl
import threading
from typing import Any

from aiosmtpd.controller import Controller
from aiosmtpd.handlers import Mailbox
from aiosmtpd.smtp import AuthResult, LoginPassword


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--maildir", required=True)
    parser.add_argument("--cert")
    parser.add_argument("--key")
    parser.add_argument("--implicit-tls", action="store_true")
    parser.add_argument("--user")
    parser.add_argument("--password")
    args = parser.parse_args()

    context = None
    if args.cert:
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(args.cert, args.key)

    def authenticate(
        server: Any, session: Any, envelope: Any, mechanism: str, data: Any
    ) -> AuthResult:
        ok = (
            isinstance(data, LoginPassword)
            and data.login.decode() == args.user
            and data.password.decode() == args.password
        )
        return AuthResult(success=ok)

    kwargs: dict[str, Any] = {}
    if args.implicit_tls:
        kwargs["ssl_context"] = context
    elif context is not None:
        kwargs["tls_context"] = context
        kwargs["require_starttls"] = True
    if args.user:
        kwargs["authenticator"] = authenticate
        kwargs["auth_required"] = True
        kwargs["auth_require_tls"] = context is not None
    controller = Controller(Mailbox(args.maildir), hostname="127.0.0.1", port=args.port, **kwargs)
    controller.start()
    print("ready", flush=True)
    done = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: done.set())
    signal.signal(signal.SIGINT, lambda *_: done.set())
    done.wait()
    controller.stop()


if __name__ == "__main__":
    main()
