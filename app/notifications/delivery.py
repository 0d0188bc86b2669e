"""Sends the deliveries that ``notify`` wrote: e-mail over SMTP, Slack-compatible incoming
webhooks and signed JSON webhooks.

Like the reconciler, each pass leases due deliveries (several portal processes share the
work; a delivery is held by one process at a time), sends them on a small thread pool
(one slow receiver holds one thread, never a request) and records each outcome while it
still holds the lease: sent; or retried after a back-off (base x 2^attempt, at most an
hour); or, after ``delivery_max_attempts``, given up and listed for the admins with its
last error. The lease is renewed while the pass sends; a process that dies mid-send
leaves a lease that expires within LEASE (20 s), and another process sends the delivery
again at its next poll (at least once; receivers drop repeats by the delivery id in the
``X-Portal-Delivery`` header and the e-mail's Message-ID).
"""

from __future__ import annotations

import hashlib
import hmac
import json
import logging
import os
import socket
import threading
import time
import uuid
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor, wait
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta

import httpx
from sqlalchemy.orm import Session, sessionmaker

from app.auth.secrets import unseal
from app.core import metrics, outbound
from app.core.config import Settings
from app.core.db import unit_of_work
from app.core.models import Delivery, utcnow
from app.notifications import repository as repo
from app.notifications.mailer import DeliveryFailed, Mailer, host_of, why

log = logging.getLogger(__name__)
# A pass holds what it claimed for LEASE and renews it every HEARTBEAT while it sends, so
# a slow receiver never loses its lease to a second sender, and the deliveries of a
# process that died are taken back by another once LEASE has passed (plus that one's
# poll period), not minutes later.
LEASE = timedelta(seconds=20)
HEARTBEAT = 5.0
BATCH = 64
MAX_BACKOFF = 3600.0
CLIENTS_KEPT = 32


@dataclass(frozen=True)
class Outbound:
    """What one attempt needs, read in the claiming transaction."""

    id: int
    channel: str
    event: str
    title: str
    body: str  # the channel's text (the e-mail's, the chat line); the title where empty
    url: str
    team: str | None
    created_at: datetime
    attempts: int
    to: str | None = None  # e-mail address
    hook_url: str | None = None
    hook_secret: str | None = None
    problem: str | None = None  # known before sending: the attempt fails with it


def signature(secret: str, timestamp: str, body: bytes) -> str:
    """The JSON webhook's signature: HMAC-SHA256 over "<timestamp>.<body>", hex, "v1="."""
    mac = hmac.new(secret.encode(), timestamp.encode() + b"." + body, hashlib.sha256)
    return "v1=" + mac.hexdigest()


def slack_text(title: str, url: str) -> str:
    escaped = title.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    return f"<{url}|{escaped}>"


@dataclass
class Deliverer:
    session_factory: sessionmaker[Session]
    settings: Settings
    owner: str = field(
        default_factory=lambda: f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:6]}"
    )
    threads: int = 8
    now: Callable[[], datetime] = utcnow
    wake: threading.Event = field(default_factory=threading.Event)
    smtp_problem: str | None = None
    resolver: outbound.Resolver | None = None  # socket.getaddrinfo unless a test sets one

    def __post_init__(self) -> None:
        self._pool = ThreadPoolExecutor(max_workers=self.threads, thread_name_prefix="deliver")
        # HTTP clients per receiving host (``_client_for``) and, per sending thread, one
        # SMTP connection reused within a pass.
        self._clients: dict[str, httpx.Client] = {}
        self._clients_lock = threading.Lock()
        # E-mail through the SMTP server its settings group describes, and nothing else.
        self.mailer = Mailer(self.settings.smtp, portal_url=self.settings.portal_url)

    def close(self) -> None:
        self._pool.shutdown(wait=True, cancel_futures=True)
        self.mailer.close()
        with self._clients_lock:
            for client in self._clients.values():
                client.close()
            self._clients.clear()
        with unit_of_work(self.session_factory) as session:
            repo.release_deliveries(session, owner=self.owner)

    # One pass ---------------------------------------------------------------------

    def run_once(self) -> int:
        """Send what is due now; returns how many attempts were made."""
        total = 0
        try:
            while True:
                batch = self._claim()
                if not batch:
                    return total
                outcomes = self._send_all(batch)
                self._record(batch, outcomes)
                total += len(batch)
                if len(batch) < BATCH:
                    return total
        finally:
            self.mailer.close()  # nothing more due: do not hold the server's slots

    def _send_all(self, batch: list[Outbound]) -> list[str | None]:
        """Send the batch on the pool; while it sends, renew the lease every HEARTBEAT
        (from this thread: a slow receiver never loses its lease to a second sender)."""
        futures = [self._pool.submit(self._attempt, item) for item in batch]
        ids = [item.id for item in batch]
        while True:
            _done, pending = wait(futures, timeout=HEARTBEAT)
            if not pending:
                break
            try:
                with unit_of_work(self.session_factory) as session:
                    repo.extend_leases(session, owner=self.owner, ids=ids, until=self.now() + LEASE)
            except Exception:  # the lease may lapse: at least once, never lost
                log.warning("could not renew the lease on %d deliveries", len(ids), exc_info=True)
        return [future.result() for future in futures]

    def _claim(self) -> list[Outbound]:
        now = self.now()
        with unit_of_work(self.session_factory) as session:
            ids = repo.claim_deliveries(
                session, owner=self.owner, now=now, until=now + LEASE, limit=BATCH
            )
            if not ids:
                return []
            return self._load(session, repo.get_deliveries(session, ids))

    def _load(self, session: Session, rows: list[Delivery]) -> list[Outbound]:
        key = self.settings.secret_key.get_secret_value()
        emails = repo.emails_of(session, [d.notification_id for d in rows if d.notification_id])
        hook_ids = {d.webhook_id for d in rows if d.webhook_id is not None}
        hooks = repo.get_webhooks_by_id(session, hook_ids)
        names = repo.team_names(session, {d.team_id for d in rows if d.team_id is not None})
        base = self.settings.portal_url
        out = []
        for d in rows:
            item = Outbound(
                id=d.id,
                channel=d.channel,
                event=d.event,
                title=d.title,
                body=d.body or d.title,
                url=base + (d.link or "/"),
                team=names.get(d.team_id) if d.team_id is not None else None,
                created_at=d.created_at,
                attempts=d.attempts,
            )
            if d.channel == "email":
                to = emails.get(d.notification_id or 0)
                out.append(replace(item, to=to, problem=None if to else "the person has no e-mail"))
                continue
            hook = hooks.get(d.webhook_id or 0)
            if hook is None:
                out.append(replace(item, problem="the webhook was removed"))
                continue
            url = unseal(hook.url_sealed, key)
            secret = unseal(hook.secret_sealed, key) if hook.secret_sealed else None
            unreadable = url is None or (hook.kind == "json" and secret is None)
            out.append(
                replace(
                    item,
                    hook_url=url,
                    hook_secret=secret,
                    problem="the webhook cannot be read (the portal's secret key changed): "
                    "set it again"
                    if unreadable
                    else None,
                )
            )
        return out

    def _attempt(self, item: Outbound) -> str | None:
        """None when delivered, else why not."""
        started = time.perf_counter()
        try:
            if item.problem:
                raise DeliveryFailed(item.problem)
            if item.channel == "email":
                self._send_email(item)
            elif item.channel == "slack":
                self._post(item, json.dumps({"text": slack_text(item.body, item.url)}).encode())
            else:
                self._post_signed(item)
        except DeliveryFailed as exc:
            metrics.DELIVERIES.labels(channel=item.channel, outcome="failed").inc()
            return str(exc)[:500]
        except Exception as exc:  # anything else a sender raised: retried, shown, logged
            log.exception("delivery %s on %s failed unexpectedly", item.id, item.channel)
            metrics.DELIVERIES.labels(channel=item.channel, outcome="failed").inc()
            return f"{type(exc).__name__}"[:500]
        metrics.DELIVERIES.labels(channel=item.channel, outcome="sent").inc()
        metrics.DELIVERY_SECONDS.labels(channel=item.channel).observe(time.perf_counter() - started)
        return None

    def _record(self, batch: list[Outbound], outcomes: list[str | None]) -> None:
        now = self.now()
        limit = self.settings.delivery_max_attempts
        base = self.settings.delivery_retry_base_seconds
        with unit_of_work(self.session_factory) as session:
            for item, error in zip(batch, outcomes, strict=True):
                attempts = item.attempts + 1
                if error is None:
                    values: dict[str, object] = {
                        "status": "sent",
                        "attempts": attempts,
                        "sent_at": now,
                        "last_error": "",
                    }
                elif attempts >= limit:
                    log.warning(
                        "gave up delivery %s (%s, %s) after %d attempts: %s",
                        item.id,
                        item.channel,
                        item.event,
                        attempts,
                        error,
                    )
                    values = {"status": "failed", "attempts": attempts, "last_error": error}
                else:
                    delay = min(MAX_BACKOFF, base * 2 ** (attempts - 1))
                    log.info(
                        "delivery %s (%s) failed, retrying in %.0f s: %s",
                        item.id,
                        item.channel,
                        delay,
                        error,
                    )
                    values = {
                        "attempts": attempts,
                        "last_error": error,
                        "next_attempt_at": now + timedelta(seconds=delay),
                    }
                if not repo.finish_delivery(session, item.id, owner=self.owner, **values):
                    log.warning("lost the lease on delivery %s; its outcome is dropped", item.id)

    # Channels ---------------------------------------------------------------------

    def _send_email(self, item: Outbound) -> None:
        self.mailer.send(
            to=item.to or "",
            subject=item.title,
            text=f"{item.body}\n\n{item.url}",
            message_id=f"delivery-{item.id}",
            event=item.event,
        )

    def check_smtp(self) -> str | None:
        """Whether the SMTP server answers (and accepts the sign-in): None, or what to fix.
        Run once at start; the admins' delivery page shows the answer."""
        self.smtp_problem = self.mailer.check()
        if self.smtp_problem:
            log.error("%s", self.smtp_problem)
        return self.smtp_problem

    def _post_signed(self, item: Outbound) -> None:
        body = json.dumps(
            {
                "id": item.id,
                "event": item.event,
                "title": item.title,
                "url": item.url,
                "team": item.team,
                "occurred_at": item.created_at.isoformat(),
            },
            separators=(",", ":"),
        ).encode()
        timestamp = str(int(time.time()))
        self._post(
            item,
            body,
            {
                "X-Portal-Timestamp": timestamp,
                "X-Portal-Signature": signature(item.hook_secret or "", timestamp, body),
            },
        )

    def _client_for(self, host: str) -> httpx.Client:
        """One HTTP client per receiving host (its connections and TLS sessions reused):
        connections go to pinned addresses, so a pool shared by every host could hand one
        host's request a connection whose certificate was checked for another."""
        with self._clients_lock:
            client = self._clients.pop(host, None)
            if client is None:
                client = httpx.Client(
                    timeout=self.settings.webhook_timeout_seconds,
                    follow_redirects=False,
                    limits=httpx.Limits(max_connections=self.threads),
                )
            self._clients[host] = client  # the most recently used last
            while len(self._clients) > CLIENTS_KEPT:
                self._clients.pop(next(iter(self._clients))).close()
            return client

    def _post(self, item: Outbound, body: bytes, headers: dict[str, str] | None = None) -> None:
        url = item.hook_url or ""
        host = host_of(url)
        try:
            # Resolved once: the connection goes to the address that passed the check.
            target = outbound.check(
                url,
                https_only=not self.settings.development,
                allow_private=self.settings.allow_private_webhooks,
                resolver=self.resolver,
            )
        except outbound.Refused as exc:
            raise DeliveryFailed(f"{host}: {exc}") from None
        pinned, host_header, extensions = target.pinned()
        client = self._client_for(target.host)
        try:
            request = client.build_request(
                "POST",
                pinned,
                content=body,
                headers={
                    **host_header,
                    "Content-Type": "application/json",
                    "User-Agent": "gpu-portal",
                    "X-Portal-Delivery": str(item.id),
                    "X-Portal-Event": item.event,
                    **(headers or {}),
                },
                extensions=extensions,
            )
            response = client.send(request)
        except httpx.TimeoutException:
            raise DeliveryFailed(
                f"{host} did not answer within {self.settings.webhook_timeout_seconds:g} s"
            ) from None
        except httpx.HTTPError as exc:
            raise DeliveryFailed(f"{host}: {why(exc)}") from None
        if 300 <= response.status_code < 400:
            raise DeliveryFailed(
                f"{host} answered {response.status_code} (a redirect): the portal does not "
                "follow redirects; set the webhook to the address it redirects to"
            )
        if not 200 <= response.status_code < 300:
            raise DeliveryFailed(f"{host} answered {response.status_code}")
