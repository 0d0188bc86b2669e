"""Sending e-mail through the SMTP server the settings' SMTP group describes: one
connection per sending thread, reused within a delivery pass, secured and signed in as
``PORTAL_SMTP_*`` say."""

from __future__ import annotations

import contextlib
import smtplib
import ssl
import threading
from email.message import EmailMessage
from email.utils import formatdate

from app.core.config import SmtpSettings
from app.core.text import is_address, one_line


class DeliveryFailed(Exception):
    """An attempt that did not deliver; the message says why, without any secret."""


def why(exc: BaseException) -> str:
    """The error's class and message (e.g. "ConnectionRefusedError: [Errno 111] ...")."""
    name = type(exc).__name__
    text = str(exc).strip()
    return (f"{name}: {text}" if text else name)[:300]


def host_of(url: str) -> str:
    return url.split("://", 1)[-1].split("/", 1)[0] or "portal"


class Mailer:
    def __init__(self, smtp: SmtpSettings, *, portal_url: str) -> None:
        self.settings = smtp
        self.portal_url = portal_url
        self._tls: ssl.SSLContext | None = None
        self._local = threading.local()
        self._open: list[smtplib.SMTP] = []
        self._open_lock = threading.Lock()

    def send(self, *, to: str, subject: str, text: str, message_id: str, event: str) -> None:
        s = self.settings
        message = EmailMessage()
        message["From"] = s.sender
        if not is_address(to):
            raise DeliveryFailed("the recipient is not one plain e-mail address")
        message["To"] = to
        message["Subject"] = one_line(subject, 300)  # a header is one line
        message["Date"] = formatdate(localtime=False)
        message["Message-ID"] = f"<{message_id}@{host_of(self.portal_url)}>"
        message["X-Portal-Event"] = one_line(event, 100)
        message.set_content(
            f"{text}\n\n"
            f"-- \nGPU cluster portal. Choose what you receive: "
            f"{self.portal_url}/notifications/settings\n"
        )
        try:
            try:
                self._thread_smtp().send_message(message)
            except (smtplib.SMTPServerDisconnected, ConnectionError):
                # The reused connection was dropped by the server: once more, afresh.
                self._drop_thread_smtp()
                self._thread_smtp().send_message(message)
        except (OSError, smtplib.SMTPException) as exc:
            self._drop_thread_smtp()
            raise DeliveryFailed(f"SMTP {s.host}:{s.port}: {why(exc)}") from None

    def connect(self) -> smtplib.SMTP:
        """A connection to the SMTP server, secured and signed in as the settings say."""
        s = self.settings
        host = s.host or "localhost"
        if self._tls is None:
            self._tls = ssl.create_default_context(cafile=s.ca_file)
        context = self._tls
        smtp: smtplib.SMTP
        if s.security == "tls":
            smtp = smtplib.SMTP_SSL(host, s.port, timeout=s.timeout_seconds, context=context)
        else:
            smtp = smtplib.SMTP(host, s.port, timeout=s.timeout_seconds)
        try:
            if s.security == "starttls":
                smtp.starttls(context=context)
            if s.username and s.password:
                smtp.login(s.username, s.password.get_secret_value())
        except BaseException:
            smtp.close()
            raise
        return smtp

    def check(self) -> str | None:
        """Whether the server answers (and accepts the sign-in): None, or what to fix."""
        s = self.settings
        if not s.enabled:
            return None
        try:
            with self.connect() as smtp:
                smtp.noop()
        except (OSError, smtplib.SMTPException) as exc:
            return (
                f"the SMTP server {s.host}:{s.port} ({s.security}) did not "
                f"accept the portal: {why(exc)}. Check PORTAL_SMTP_HOST, PORTAL_SMTP_PORT, "
                "PORTAL_SMTP_SECURITY and the credentials; e-mails wait and are retried."
            )
        return None

    def close(self) -> None:
        """Say goodbye on every connection of this pass; each thread opens a new one next
        time (a connection of another thread is never used from here while it sends)."""
        with self._open_lock:
            connections, self._open = self._open, []
        for smtp in connections:
            with contextlib.suppress(Exception):
                smtp.quit()
            with contextlib.suppress(Exception):
                smtp.close()
        self._local = threading.local()

    def _thread_smtp(self) -> smtplib.SMTP:
        smtp: smtplib.SMTP | None = getattr(self._local, "smtp", None)
        if smtp is None:
            smtp = self.connect()
            self._local.smtp = smtp
            with self._open_lock:
                self._open.append(smtp)
        return smtp

    def _drop_thread_smtp(self) -> None:
        smtp: smtplib.SMTP | None = getattr(self._local, "smtp", None)
        self._local.smtp = None
        if smtp is not None:
            with self._open_lock:
                if smtp in self._open:
                    self._open.remove(smtp)
            with contextlib.suppress(Exception):
                smtp.close()
