"""Notification delivery against real local servers: an SMTP server process (aiosmtpd,
STARTTLS with sign-in) receives the e-mails, local HTTP receivers the Slack-compatible and
signed JSON webhooks. Each event reaches each channel once; failing and hanging receivers
are retried and shown, never felt by a request."""

from __future__ import annotations

import hashlib
import hmac
import logging
import re
import threading
import time
from collections import Counter
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from email.header import decode_header, make_header
from pathlib import Path

import pytest
from fastapi import FastAPI
from sqlalchemy import select, update

from app.access import service as access
from app.core.db import unit_of_work
from app.core.models import Delivery, KubeconfigGrant, Step, TeamSchedule, utcnow
from app.notifications import delivery
from app.notifications import service as notifications
from app.notifications.delivery import Deliverer
from app.notifications.jobs import delivery_loop
from app.runtime import portal_of
from app.usage import digest
from tests.parts import simulated_backend
from tests.receivers import (
    SmtpServer,
    WebhookReceiver,
    self_signed,
    smtp_server,
    webhook_receiver,
)
from tests.web.conftest import PUBLIC, client_for, portal, set_hook


@pytest.fixture(scope="module")
def tls(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    return self_signed(tmp_path_factory.mktemp("tls"))


@pytest.fixture
def smtp(tmp_path: Path, tls: tuple[Path, Path]) -> Iterator[SmtpServer]:
    with smtp_server(tmp_path, tls=tls, user="portal", password="mail-pass-123") as server:
        yield server


@pytest.fixture
def app(db_url: str, smtp: SmtpServer, tls: tuple[Path, Path]) -> Iterator[FastAPI]:
    yield from portal(
        db_url,
        smtp_host="127.0.0.1",
        smtp_port=smtp.port,
        smtp_security="starttls",
        smtp_ca_file=str(tls[0]),
        smtp_username="portal",
        smtp_password="mail-pass-123",
        smtp_from="GPU portal <gpu-portal@example.org>",
        delivery_retry_base_seconds=0.0,
        delivery_max_attempts=3,
        webhook_timeout_seconds=1.0,
    )


def deliver(app: FastAPI) -> int:
    deliverer: Deliverer = portal_of(app).deliverer
    return deliverer.run_once()


def mails(smtp: SmtpServer) -> list[tuple[str, str, str]]:
    """(to, subject, body) of every e-mail the server accepted."""
    found = []
    for message in smtp.messages():
        body = message.get_payload(decode=True)
        assert isinstance(body, bytes)
        decoded = str(make_header(decode_header(str(message["Subject"]))))
        subject = " ".join(decoded.split())  # unfolded
        found.append((str(message["To"]), subject, body.decode()))
    return found


def verified(post_headers: dict[str, str], body: bytes, secret: str) -> bool:
    """The receiver's side, as the README documents it."""
    timestamp = post_headers["X-Portal-Timestamp"]
    expected = hmac.new(secret.encode(), timestamp.encode() + b"." + body, hashlib.sha256)
    return hmac.compare_digest("v1=" + expected.hexdigest(), post_headers["X-Portal-Signature"])


def test_each_event_reaches_each_channel_once(app: FastAPI, smtp: SmtpServer) -> None:
    admin = client_for(app, "admin@example.org", admin=True)
    lead = client_for(app, "lead-nlp@example.org")
    with (
        webhook_receiver() as team_slack,
        webhook_receiver() as team_json,
        webhook_receiver() as org_slack,
    ):
        set_hook(lead, "/teams/1/webhooks", "slack", team_slack.url("/services/T0/B0/x"))
        secret = set_hook(lead, "/teams/1/webhooks", "json", team_json.url())
        assert secret.startswith("whsec_")
        set_hook(admin, "/admin/webhooks", "slack", org_slack.url())
        # The page shows where it posts, not the secret path.
        page = lead.get("/teams/1/webhooks").text
        assert f"http://127.0.0.1:{team_slack.port}/…" in page
        assert "/services/T0/B0/x" not in page
        assert secret not in page

        # 1. A quota change asked (to the admin), rejected (to the lead).
        change = lead.api(
            "POST", "/api/v1/teams/1/quota-requests", {"gpu_quota": "0.2", "gpu_limit": "1"}
        )
        admin.api("POST", f"/api/v1/requests/{change.json()['id']}/reject", {"reason": "pool full"})
        # 2. A member added (to that person).
        lead.api("POST", "/api/v1/teams/1/members", {"email": "new@example.org", "role": "member"})
        # 3. A new cluster asked, approved with changes, ready (to the lead; not on nlp's hooks).
        asked = lead.api(
            "POST", "/api/v1/requests", {"name": "speech", "gpu_quota": "0", "gpu_limit": "0.1"}
        )
        admin.api(
            "POST",
            f"/api/v1/requests/{asked.json()['id']}/approve",
            {"adjusted": {"gpu_quota": "0", "gpu_limit": "0.05"}},
        )
        portal_of(app).reconciler.run_once()
        # 4. Provisioning failing three times in a row (to the lead and the admin).
        backend = simulated_backend(app)
        asked = lead.api(
            "POST", "/api/v1/requests", {"name": "doomed", "gpu_quota": "0", "gpu_limit": "0.1"}
        )
        admin.api("POST", f"/api/v1/requests/{asked.json()['id']}/approve", {})
        backend.inject_failure(Step.QUEUE, team="doomed", times=100, message="quota webhook down")
        for _ in range(4):
            portal_of(app).reconciler.run_once()
            with unit_of_work(portal_of(app).session_factory) as session:
                session.execute(update(TeamSchedule).values(next_attempt_at=utcnow()))
        # 5. A two-day kubeconfig that now expires within a day (to its holder only).
        got = lead.api("POST", "/api/v1/teams/1/kubeconfig?ttl=2d")
        assert got.status_code == 200, got.text
        with unit_of_work(portal_of(app).session_factory) as session:
            grant = session.scalars(select(KubeconfigGrant)).one()
            assert access.tell_expiring(session, now=grant.expires_at - timedelta(hours=12)) == 1
            assert access.tell_expiring(session, now=grant.expires_at - timedelta(hours=11)) == 0
        # 6. The weekly digest on its day (to the leads of the 4 ready teams).
        monday = datetime(2026, 11, 30, 8, 0, tzinfo=UTC)
        with unit_of_work(portal_of(app).session_factory) as session:
            assert digest.write_weekly(session, portal_of(app).settings, now=monday) == 4
        with unit_of_work(portal_of(app).session_factory) as session:
            assert digest.write_weekly(session, portal_of(app).settings, now=monday) is None

        assert deliver(app) > 0
        assert deliver(app) == 0, "nothing is sent twice"

        got_mail = mails(smtp)
        subjects = {(to, subject) for to, subject, _ in got_mail}
        assert len(subjects) == len(got_mail), "each e-mail once"
        assert (
            "admin@example.org",
            "Nlp lead asks to change nlp's quota to guarantee 0.2 GPU, limit 1 GPU, "
            "weight 1, priority 100",
        ) in subjects
        assert (
            "lead-nlp@example.org",
            "The quota change for nlp was rejected: pool full",
        ) in subjects
        assert ("new@example.org", "Nlp lead made you a member of nlp") in subjects
        assert ("lead-nlp@example.org", "speech is ready: download your kubeconfig") in subjects
        assert (
            "lead-nlp@example.org",
            "The cluster for speech was approved with changes: GPU limit 0.1 → 0.05",
        ) in subjects
        failed = "Provisioning doomed failed 3 times, retrying: simulated: quota webhook down"
        assert ("lead-nlp@example.org", failed) in subjects
        assert ("admin@example.org", failed) in subjects
        assert any(
            to == "lead-nlp@example.org" and s.startswith("Your kubeconfig for nlp expires at")
            for to, s in subjects
        )
        assert any(
            to == "lead-nlp@example.org" and s.startswith("nlp this week:") for to, s in subjects
        )
        # vision's lead: the seed's approval, the cluster ready, the digest; nothing of nlp's.
        assert sorted(s for to, s, _ in got_mail if to == "lead-vision@example.org") == [
            "The cluster for vision was approved as asked",
            "vision is ready: download your kubeconfig",
            "vision this week: no usage recorded",
        ]
        # Links lead to the right page on the public address.
        body = next(b for to, s, b in got_mail if s == "speech is ready: download your kubeconfig")
        speech_id = re.search(rf"{PUBLIC}/teams/(\d+)", body)
        assert speech_id, body

        # nlp's channels: nlp's events only, each once; never the personal notice.
        team_events = [p.json()["event"] for p in team_json.posts]
        assert sorted(team_events) == sorted(
            [
                "quota_change.submitted",
                "request.rejected",
                "team.member_added",
                "rightsizing.digest",
            ]
        )
        assert len(team_slack.posts) == 4
        for post in team_json.posts:
            assert verified(post.headers, post.body, secret), "signature checks out"
            assert post.json()["team"] == "nlp"
            assert str(post.json()["url"]).startswith(f"{PUBLIC}/")
        ids = [p.headers["X-Portal-Delivery"] for p in team_json.posts]
        assert len(set(ids)) == len(ids)
        slack = [p.json()["text"] for p in team_slack.posts]
        # A channel's line names who was added (the person's own e-mail says "you").
        assert f"<{PUBLIC}/teams/1|Nlp lead made new@example.org a member of nlp>" in slack
        assert not any("made you" in text for text in slack)
        # The org's channel: every team's events (nlp's 4; speech asked, approved, ready;
        # doomed asked, approved, failing; the 3 other digests).
        org_events = Counter(p.json()["text"].split("|")[0] for p in org_slack.posts)
        assert sum(org_events.values()) == 4 + 3 + 3 + 3
        assert not any("expires at" in p.json()["text"] for p in org_slack.posts)


def test_preferences_mute_a_channel(app: FastAPI, smtp: SmtpServer) -> None:
    lead = client_for(app, "lead-nlp@example.org")
    newcomer = client_for(app, "new@example.org")
    page = newcomer.get("/notifications/settings").text
    assert 'name="on:team.member_added:email"' in page
    # Keep everything but e-mail for being added, and the bell for digests.
    ticked = {
        f"on:{e}:{c}": "on"
        for e in notifications.EVENTS
        for c in ("inapp", "email")
        if (e, c) not in {("team.member_added", "email"), ("team.member_added", "inapp")}
    }
    saved = newcomer.form("/notifications/settings", ticked)
    assert "2 muted" in saved.text
    page = newcomer.get("/notifications/settings").text
    assert re.search(r'name="on:team.member_added:email"[^>]*>', page)
    assert "checked" not in re.search(r'name="on:team.member_added:email"[^>]*>', page).group(0)  # type: ignore[union-attr]
    lead.api("POST", "/api/v1/teams/1/members", {"email": "new@example.org", "role": "member"})
    deliver(app)
    assert [s for to, s, _ in mails(smtp) if to == "new@example.org"] == []
    # Still on record in the list, but not counted in the bell.
    assert newcomer.get("/api/v1/notifications").json()["unread"] == 0
    assert "made you a member of nlp" in newcomer.get("/notifications").text


def test_failing_receiver_is_retried_then_given_up_and_shown(app: FastAPI) -> None:
    admin = client_for(app, "admin@example.org", admin=True)
    lead = client_for(app, "lead-nlp@example.org")
    with webhook_receiver(mode="fail") as broken:
        set_hook(lead, "/teams/1/webhooks", "slack", broken.url())
        lead.api("POST", "/api/v1/teams/1/members", {"email": "x@example.org", "role": "member"})
        deliver(app)
        with portal_of(app).session_factory() as session:
            d = session.scalars(select(Delivery).where(Delivery.channel == "slack")).one()
            assert (d.status, d.attempts) == ("pending", 1)
            assert d.last_error == f"127.0.0.1:{broken.port} answered 500"
        page = admin.get("/admin/deliveries").text
        assert f"127.0.0.1:{broken.port} answered 500" in page
        assert "next try" in page
        deliver(app)
        deliver(app)
        assert len(broken.posts) == 3
        with portal_of(app).session_factory() as session:
            d = session.scalars(select(Delivery).where(Delivery.channel == "slack")).one()
            assert (d.status, d.attempts) == ("failed", 3)
        page = admin.get("/admin/deliveries").text
        assert re.search(r'data-testid="failed">1<', page)
        assert "given up" in page
        # Mended receiver, one click: delivered.
        broken.mode = "ok"
        admin.form(f"/admin/deliveries/{d.id}/retry")
        deliver(app)
        assert len(broken.posts) == 4
        page = admin.get("/admin/deliveries").text
        assert re.search(r'data-testid="failed">0<', page)
        with portal_of(app).session_factory() as session:
            sent = session.get(Delivery, d.id)
            assert sent is not None
            assert sent.status == "sent"


def test_a_hanging_receiver_never_holds_a_request(app: FastAPI) -> None:
    """The receiver holds the delivery's connection until released; meanwhile requests
    that notify complete (they only write rows), and the delivery times out and retries."""
    lead = client_for(app, "lead-nlp@example.org")
    release = threading.Event()
    with webhook_receiver(mode="hang") as slow:
        slow.hang_seconds = 5.0
        set_hook(lead, "/teams/1/webhooks", "json", slow.url())
        thread = delivery_loop(portal_of(app))
        thread.period = 0.2
        thread.start()
        try:
            lead.api(
                "POST", "/api/v1/teams/1/members", {"email": "a@example.org", "role": "member"}
            )
            for _ in range(200):
                if slow.posts:
                    break
                release.wait(0.05)
            assert slow.posts, "the worker is posting (and the receiver hangs)"
            # While it hangs, more changes that notify go through.
            for n in range(3):
                r = lead.api(
                    "POST",
                    "/api/v1/teams/1/members",
                    {"email": f"b{n}@example.org", "role": "member"},
                )
                assert r.status_code == 201
            assert len(slow.posts) >= 1
            for _ in range(200):
                with portal_of(app).session_factory() as session:
                    timed_out = session.scalars(
                        select(Delivery).where(
                            Delivery.last_error.like("%did not answer within 1 s")
                        )
                    ).all()
                if timed_out:
                    break
                release.wait(0.05)
            assert timed_out, "the time-out is recorded and the delivery retried"
        finally:
            thread.stop()


def test_smtp_that_does_not_answer_is_named(db_url: str) -> None:
    from tests.servers import free_port

    port = free_port()
    for app in portal(db_url, smtp_host="127.0.0.1", smtp_port=port, smtp_from="p@example.org"):
        deliverer: Deliverer = portal_of(app).deliverer
        problem = deliverer.check_smtp()
        assert problem is not None
        assert f"the SMTP server 127.0.0.1:{port} (starttls) did not accept the portal" in problem
        assert "PORTAL_SMTP_HOST" in problem
        admin = client_for(app, "admin@example.org", admin=True)
        assert "did not accept the portal" in admin.get("/admin/deliveries").text
        # Mail waits, with the reason, instead of vanishing.
        lead = client_for(app, "lead-nlp@example.org")
        lead.api("POST", "/api/v1/teams/1/members", {"email": "c@example.org", "role": "member"})
        deliverer.run_once()
        with portal_of(app).session_factory() as session:
            waiting = session.scalars(select(Delivery).where(Delivery.channel == "email")).all()
        assert waiting, "the seed's and the new member's e-mails"
        for d in waiting:
            assert d.status == "pending"
            assert d.last_error.startswith(f"SMTP 127.0.0.1:{port}: ConnectionRefusedError")


def test_bad_webhook_addresses_are_refused_when_saved(app: FastAPI) -> None:
    lead = client_for(app, "lead-nlp@example.org")
    page = lead.form("/teams/1/webhooks", {"kind": "slack", "url": "hooks.slack.com/x"})
    assert page.status_code == 422
    assert "enter the full address, e.g. https://hooks.slack.com/services/" in page.text
    problem = notifications.check_webhook_url(
        "http://hooks.example.org/x", allow_private=True, development=False
    )
    assert problem == "the address must use https"
    problem = notifications.check_webhook_url(
        "https://127.0.0.1:8443/x", allow_private=False, development=False
    )
    assert problem is not None
    assert "a loopback address (127.0.0.1)" in problem
    problem = notifications.check_webhook_url(
        "https://u:p@hooks.example.org/x", allow_private=True, development=False
    )
    assert problem == "put no user name or password in the address"


def test_no_webhook_url_or_secret_is_stored_in_clear(app: FastAPI) -> None:
    lead = client_for(app, "lead-nlp@example.org")
    url = "http://127.0.0.1:9/services/T000/B000/XXXXSECRETPATH"
    set_hook(lead, "/teams/1/webhooks", "slack", url)
    secret = set_hook(lead, "/teams/1/webhooks", "json", "http://127.0.0.1:9/j")
    engine = portal_of(app).engine
    with engine.connect() as conn:
        from sqlalchemy import text

        dump = " ".join(
            str(row)
            for table in ("webhooks", "audit_events")
            for row in conn.execute(text(f"SELECT * FROM {table}"))
        )
    assert "XXXXSECRETPATH" not in dump
    assert secret not in dump
    assert "http://127.0.0.1:9/…" in dump


def test_implicit_tls_smtp(db_url: str, tmp_path: Path, tls: tuple[Path, Path]) -> None:
    with smtp_server(tmp_path, tls=tls, implicit_tls=True) as server:
        for app in portal(
            db_url,
            smtp_host="127.0.0.1",
            smtp_port=server.port,
            smtp_security="tls",
            smtp_ca_file=str(tls[0]),
            smtp_from="gpu-portal@example.org",
        ):
            assert portal_of(app).deliverer.check_smtp() is None
            lead = client_for(app, "lead-nlp@example.org")
            lead.api(
                "POST", "/api/v1/teams/1/members", {"email": "t@example.org", "role": "member"}
            )
            deliver(app)
            assert ("t@example.org", "Nlp lead made you a member of nlp") in {
                (to, s) for to, s, _ in mails(server)
            }


def test_a_certificate_the_portal_does_not_trust_is_refused(
    db_url: str, tmp_path: Path, tls: tuple[Path, Path]
) -> None:
    with smtp_server(tmp_path, tls=tls) as server:
        for app in portal(
            db_url, smtp_host="127.0.0.1", smtp_port=server.port, smtp_from="p@example.org"
        ):
            problem = portal_of(app).deliverer.check_smtp()
            assert problem is not None
            assert "CERTIFICATE_VERIFY_FAILED" in problem


def test_a_slack_post_leaves_no_webhook_path_in_the_log(
    app: FastAPI, caplog: pytest.LogCaptureFixture
) -> None:
    """The HTTP client logs every post at INFO; the log keeps the host, never the path
    (a Slack webhook's path is its credential)."""
    lead = client_for(app, "lead-nlp@example.org")
    with webhook_receiver() as receiver:
        set_hook(lead, "/teams/1/webhooks", "slack", receiver.url("/services/T0/B0/XXSECRETPATH"))
        lead.api("POST", "/api/v1/teams/1/members", {"email": "c@example.org", "role": "member"})
        with caplog.at_level(logging.DEBUG):
            deliver(app)
        assert [p.path for p in receiver.posts] == ["/services/T0/B0/XXSECRETPATH"]
    assert f"HTTP Request: POST http://127.0.0.1:{receiver.port}/… " in caplog.text
    assert "XXSECRETPATH" not in caplog.text
    assert "/services/" not in caplog.text


def test_a_reason_with_line_breaks_is_one_line_in_the_subject(
    app: FastAPI, smtp: SmtpServer
) -> None:
    """A rejection reason typed on three lines: the e-mail is sent (its subject one
    line), and the bell's title is one line too."""
    lead = client_for(app, "lead-nlp@example.org")
    created = lead.api(
        "POST", "/api/v1/requests", {"name": "multi", "gpu_quota": "0.1", "gpu_limit": "0.1"}
    )
    assert created.status_code == 201, created.text
    admin = client_for(app, "admin@example.org", admin=True)
    reason = "too big\r\nBcc: everyone@example.org\n\tsecond line"
    rejected = admin.api(
        "POST", f"/api/v1/requests/{created.json()['id']}/reject", {"reason": reason}
    )
    assert rejected.status_code == 200, rejected.text
    deliver(app)
    with portal_of(app).session_factory() as session:
        rows = session.scalars(
            select(Delivery).where(
                Delivery.channel == "email", Delivery.event == "request.rejected"
            )
        ).all()
    assert [(d.status, d.last_error) for d in rows] == [("sent", "")]
    assert "\n" not in rows[0].title
    assert "\r" not in rows[0].title
    found = [m for m in smtp.messages() if m["X-Portal-Event"] == "request.rejected"]
    assert len(found) == 1
    assert found[0]["Bcc"] is None
    assert "too big Bcc: everyone@example.org second line" in " ".join(
        str(make_header(decode_header(str(found[0]["Subject"])))).split()
    )


@pytest.mark.parametrize(
    "email",
    [
        "victim@example.org,postmaster",
        "<svg/onload=alert(1)>@x.io",
        "A <a@example.org>",
        '"a b"@example.org',
        "a@example.org b@example.org",
        "a@example..org",
        "a@-x.org",
    ],
)
def test_an_address_field_takes_one_plain_address(app: FastAPI, email: str) -> None:
    lead = client_for(app, "lead-nlp@example.org")
    added = lead.api("POST", "/api/v1/teams/1/members", {"email": email, "role": "member"})
    assert added.status_code == 422, added.text
    assert "enter one e-mail address" in added.json()["errors"]["email"]


def test_a_crashed_senders_deliveries_are_taken_back_within_the_lease(app: FastAPI) -> None:
    """A process that claimed deliveries and died (never recorded them): another process
    takes them back once the 20-second lease has passed, not before."""
    assert timedelta(seconds=5) <= delivery.LEASE <= timedelta(seconds=30)
    lead = client_for(app, "lead-nlp@example.org")
    with webhook_receiver() as receiver:
        set_hook(lead, "/teams/1/webhooks", "json", receiver.url())
        lead.api("POST", "/api/v1/teams/1/members", {"email": "c@example.org", "role": "member"})
        settings = portal_of(app).settings
        factory = portal_of(app).session_factory
        start = utcnow()
        crashed = Deliverer(factory, settings, now=lambda: start)
        assert crashed._claim(), "the crashed process held them"
        at = {"now": start + delivery.LEASE - timedelta(seconds=1)}
        other = Deliverer(factory, settings, now=lambda: at["now"])
        assert other.run_once() == 0, "still held within the lease"
        at["now"] = start + delivery.LEASE + timedelta(seconds=1)
        assert other.run_once() >= 1
        other.close()
        assert len(receiver.posts) == 1


def test_a_slow_receiver_keeps_its_lease_while_it_is_sent(
    app: FastAPI, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The lease is renewed while the pass sends: a second process that looks after the
    lease's length finds it held, and the receiver gets the delivery once."""
    monkeypatch.setattr(delivery, "LEASE", timedelta(seconds=1))
    monkeypatch.setattr(delivery, "HEARTBEAT", 0.2)
    lead = client_for(app, "lead-nlp@example.org")
    receiver = WebhookReceiver(mode="hang", hang_seconds=2.5)
    try:
        set_hook(lead, "/teams/1/webhooks", "json", receiver.url())
        lead.api("POST", "/api/v1/teams/1/members", {"email": "c@example.org", "role": "member"})
        settings = portal_of(app).settings.model_copy(update={"webhook_timeout_seconds": 10.0})
        factory = portal_of(app).session_factory
        slow = Deliverer(factory, settings)
        sending = threading.Thread(target=slow.run_once)
        sending.start()
        time.sleep(1.8)  # past the unrenewed lease
        other = Deliverer(factory, settings)
        assert other.run_once() == 0
        sending.join(20)
        slow.close()
        other.close()
    finally:
        receiver.close()
    assert len(receiver.posts) == 1


def test_a_webhook_is_tried_with_one_click_and_a_waiting_delivery_goes_now(
    app: FastAPI,
) -> None:
    import json

    admin = client_for(app, "admin@example.org", admin=True)
    lead = client_for(app, "lead-nlp@example.org")
    with webhook_receiver() as slack, webhook_receiver() as signed:
        missing = lead.form("/teams/1/webhooks/slack/test")
        assert missing.status_code == 404
        assert "no slack webhook is set here: save an address first" in missing.text
        set_hook(lead, "/teams/1/webhooks", "slack", slack.url("/services/T0/B0/x"))
        secret = set_hook(lead, "/teams/1/webhooks", "json", signed.url())
        page = lead.get("/teams/1/webhooks").text
        assert page.count(">Send test</button>") == 2
        # Only the team's leads (and admins) may try it.
        assert client_for(app, "member-nlp@example.org").form(
            "/teams/1/webhooks/slack/test"
        ).status_code in (403, 404)
        assert client_for(app, "lead-vision@example.org").form(
            "/teams/1/webhooks/slack/test"
        ).status_code in (403, 404)
        said = lead.form("/teams/1/webhooks/slack/test", follow_redirects=True)
        assert "Test message queued (delivery #" in said.text
        lead.form("/teams/1/webhooks/json/test")
        deliver(app)
        assert [p.path for p in slack.posts] == ["/services/T0/B0/x"]
        text = json.loads(slack.posts[0].body)["text"]
        assert text == (
            f"<{PUBLIC}/teams/1/webhooks|Test message from the GPU portal, sent by Nlp lead>"
        )
        assert len(signed.posts) == 1
        body = json.loads(signed.posts[0].body)
        assert body["event"] == "webhook.test"
        assert verified(signed.posts[0].headers, signed.posts[0].body, secret)
        # The org's channel too, by an admin.
        set_hook(admin, "/admin/webhooks", "slack", slack.url("/services/org"))
        admin.form("/admin/webhooks/slack/test")
        deliver(app)
        assert slack.posts[-1].path == "/services/org"
    # A delivery waiting for its next try goes now, its attempts kept.
    with portal_of(app).session_factory() as session:
        waiting = session.scalars(select(Delivery).order_by(Delivery.id.desc())).first()
        assert waiting is not None
    later = utcnow() + timedelta(hours=1)
    with unit_of_work(portal_of(app).session_factory) as session:
        session.execute(
            update(Delivery)
            .where(Delivery.id == waiting.id)
            .values(status="pending", attempts=2, next_attempt_at=later)
        )
    assert "Retry now" in admin.get("/admin/deliveries").text
    admin.form(f"/admin/deliveries/{waiting.id}/retry")
    with portal_of(app).session_factory() as session:
        now_due = session.get(Delivery, waiting.id)
        assert now_due is not None
        assert (now_due.status, now_due.attempts) == ("pending", 2)
        assert now_due.next_attempt_at is not None
        assert now_due.next_attempt_at <= utcnow()
