"""Exactly once with two portal processes: two `gpu-portal deliver` processes drain the
same PostgreSQL outbox at once; every e-mail and every webhook post arrives once."""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

import pytest
from fastapi import FastAPI
from sqlalchemy import func, select

from app.core.db import unit_of_work
from app.core.models import Delivery, KubeconfigGrant, Notification, User, utcnow
from app.notifications import service as notifications
from app.runtime import portal_of
from tests.receivers import SmtpServer, self_signed, smtp_server, webhook_receiver
from tests.web.conftest import client_for, portal, portal_command, set_hook

EVENTS = 150


@pytest.fixture
def tls(tmp_path: Path) -> tuple[Path, Path]:
    return self_signed(tmp_path)


@pytest.fixture
def smtp(tmp_path: Path, tls: tuple[Path, Path]) -> Iterator[SmtpServer]:
    with smtp_server(tmp_path, tls=tls) as server:
        yield server


def smtp_settings(smtp: SmtpServer, tls: tuple[Path, Path]) -> dict[str, str]:
    return {
        "smtp_host": "127.0.0.1",
        "smtp_port": str(smtp.port),
        "smtp_security": "starttls",
        "smtp_ca_file": str(tls[0]),
        "smtp_from": "gpu-portal@example.org",
    }


@pytest.mark.parametrize("db_url", ["postgresql"], indirect=True)
def test_two_processes_deliver_each_message_once(
    db_url: str, smtp: SmtpServer, tls: tuple[Path, Path]
) -> None:
    values = smtp_settings(smtp, tls)
    app: FastAPI
    for app in portal(db_url, **values):
        lead = client_for(app, "lead-nlp@example.org")
        admin = client_for(app, "admin@example.org", admin=True)
        with webhook_receiver() as slack, webhook_receiver() as signed:
            set_hook(lead, "/teams/1/webhooks", "slack", slack.url())
            set_hook(admin, "/admin/webhooks", "json", signed.url())
            with unit_of_work(portal_of(app).session_factory) as session:
                people = [
                    User(email=f"p{n}@example.org", display_name=f"p{n}") for n in range(EVENTS)
                ]
                session.add_all(people)
                session.flush()
                for person in people:
                    notifications.notify(
                        session,
                        event="team.member_added",
                        title=f"you are in nlp ({person.email})",
                        link="/teams/1",
                        user_ids=[person.id],
                        team_id=1,
                    )
            with portal_of(app).session_factory() as session:
                due = session.scalar(
                    select(func.count()).select_from(Delivery).where(Delivery.status == "pending")
                )
            assert due is not None
            assert due >= 3 * EVENTS

            workers = [
                portal_command(db_url, "deliver", "--until-idle", settings=values, log=True)
                for _ in range(2)
            ]
            outputs = [w.communicate(timeout=300)[0] for w in workers]
            assert [w.returncode for w in workers] == [0, 0], outputs
            made = [int(o.rsplit("delivered: ", 1)[1].split()[0]) for o in outputs]
            assert sum(made) == due
            assert min(made) > 0, f"both processes took part: {made}"

            for receiver in (slack, signed):
                ids = Counter(p.headers["X-Portal-Delivery"] for p in receiver.posts)
                assert len(receiver.posts) == len(ids), "no post twice"
            assert len(slack.posts) >= EVENTS
            assert len(signed.posts) >= EVENTS
            message_ids = Counter(str(m["Message-ID"]) for m in smtp.messages())
            assert max(message_ids.values()) == 1, "no e-mail twice"
            mailed = {str(m["To"]) for m in smtp.messages()}
            assert {f"p{n}@example.org" for n in range(EVENTS)} <= mailed
            with portal_of(app).session_factory() as session:
                left = session.scalars(select(Delivery).where(Delivery.status != "sent")).all()
            assert left == []


@pytest.mark.parametrize("db_url", ["sqlite"], indirect=True)
def test_a_separate_deliverer_also_tells_expiring_kubeconfigs(
    db_url: str, smtp: SmtpServer, tls: tuple[Path, Path]
) -> None:
    """With delivery off on the web replicas, `gpu-portal deliver` does the chores too,
    and mails what they write to those who get e-mail."""
    values = smtp_settings(smtp, tls)
    for app in portal(db_url, **values):
        now = utcnow()
        with unit_of_work(portal_of(app).session_factory) as session:
            session.add(
                KubeconfigGrant(
                    team_id=1,
                    user_id=2,
                    portal_role="lead",
                    cluster_role="cluster-admin",
                    account="portal-user-2",
                    issued_at=now - timedelta(days=2),
                    expires_at=now + timedelta(hours=12),
                )
            )
        worker = portal_command(
            db_url, "deliver", settings={**values, "delivery_poll_seconds": "0.2"}
        )
        try:
            told: list[Notification] = []
            mailed: list[str] = []
            for _ in range(300):
                with portal_of(app).session_factory() as session:
                    told = list(
                        session.scalars(
                            select(Notification).where(Notification.event == "kubeconfig.expiring")
                        )
                    )
                mailed = [
                    str(m["Subject"])
                    for m in smtp.messages()
                    if "kubeconfig for nlp expires" in str(m["Subject"])
                ]
                if (told and mailed) or worker.poll() is not None:
                    break
                time.sleep(0.1)
        finally:
            worker.terminate()
            worker.wait(20)
        assert [n.user_id for n in told] == [2]
        assert told[0].title.startswith("Your kubeconfig for nlp expires at")
        assert len(mailed) == 1, "the holder wants e-mail: the notice is mailed too"
