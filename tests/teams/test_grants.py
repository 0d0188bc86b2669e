"""Temporary quota grants, with a clock the tests control: asked, fitted over time,
applied at their start and taken back at their end (also after a restart that spanned
it), a quota change approved meanwhile kept, racing admins never over-committing."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

import pytest
from fastapi import FastAPI
from sqlalchemy import event, func, select
from sqlalchemy.orm import Session

from app.adapters.simulated import SimulatedBackend
from app.core.db import unit_of_work
from app.core.errors import Conflict, InvalidInput
from app.core.models import AuditEvent, Notification, QuotaGrant, Step, User
from app.core.quota import Quota
from app.runtime import portal_of
from app.teams import grants
from app.teams import repository as repo
from tests.web.conftest import client_for, portal

NOW = datetime(2026, 12, 7, 9, 0, tzinfo=UTC)
DAY = timedelta(days=1)


@pytest.fixture
def app(db_url: str) -> Iterator[FastAPI]:
    """The example org with its pool grown to 2 GPU (the teams' guarantees take 0.99)."""
    for application in portal(db_url):
        admin = client_for(application, "admin@example.org", admin=True)
        assert admin.api("PUT", "/api/v1/pool", {"gpus": "2"}).status_code == 200
        yield application


def _session(app: FastAPI) -> Session:
    return portal_of(app).session_factory()


def _user(session: Session, email: str) -> User:
    found = session.scalar(select(User).where(User.email == email))
    assert found is not None
    return found


def _ask(app: FastAPI, team: str, gpus: str, start: datetime, end: datetime) -> int:
    with unit_of_work(portal_of(app).session_factory) as session:
        t = repo.get_live_team_by_name(session, team)
        assert t is not None
        asked = grants.parse_ask(
            {
                "gpus": gpus,
                "starts_at": start.isoformat(),
                "ends_at": end.isoformat(),
                "reason": "paper deadline",
            },
            now=NOW,
            max_days=31,
        )
        lead = _user(session, f"lead-{team}@example.org")
        return grants.ask(session, actor=lead, team=t, asked=asked, now=NOW).id


def _approve(app: FastAPI, grant_id: int, now: datetime = NOW) -> None:
    with unit_of_work(portal_of(app).session_factory) as session:
        grants.approve(
            session, actor=_user(session, "admin@example.org"), grant_id=grant_id, now=now
        )


def _tick(app: FastAPI, now: datetime) -> int:
    with unit_of_work(portal_of(app).session_factory) as session:
        return grants.tick(session, now)


def _guarantee(app: FastAPI, team: str) -> tuple[int | None, int | None]:
    with _session(app) as session:
        t = repo.get_live_team_by_name(session, team)
        assert t is not None
        line = t.quota.gpu
        return line.guarantee, line.limit


def _queue(app: FastAPI, team: str) -> tuple[float, float]:
    """The team's queue in the (simulated) cluster after a reconciler pass."""
    portal_of(app).reconciler.run_once()
    backend = portal_of(app).backend
    assert isinstance(backend, SimulatedBackend)
    gpu = dict(backend._objects[(Step.QUEUE, team)].spec.resources)["gpu"]
    return round(gpu.quota, 2), round(gpu.limit, 2)


def test_a_grant_runs_from_its_start_to_its_end_and_leaves_a_change_made_meanwhile(
    app: FastAPI,
) -> None:
    grant = _ask(app, "nlp", "0.5", NOW + timedelta(hours=1), NOW + 2 * DAY)
    _approve(app, grant)
    assert _tick(app, NOW + timedelta(minutes=30)) == 0, "not before its start"
    assert _guarantee(app, "nlp") == (33, 100)
    assert _tick(app, NOW + timedelta(hours=1)) == 1
    assert _guarantee(app, "nlp") == (83, 150)
    assert _queue(app, "nlp") == (0.83, 1.5)
    # The lead's quota form shows the team's own quota; a change approved now is kept.
    lead = client_for(app, "lead-nlp@example.org")
    form = lead.get("/teams/1/quota").text
    assert 'value="0.33"' in form
    asked = lead.api(
        "POST", "/api/v1/teams/1/quota-requests", {"gpu_quota": "0.4", "gpu_limit": "1"}
    )
    assert asked.status_code == 201, asked.text
    admin = client_for(app, "admin@example.org", admin=True)
    approved = admin.api("POST", f"/api/v1/requests/{asked.json()['id']}/approve", {})
    assert approved.status_code == 200, approved.text
    assert _guarantee(app, "nlp") == (90, 150), "0.4 of its own and the grant's 0.5"
    # Its end, passed while no pass ran: applied at the next one.
    assert _tick(app, NOW + 3 * DAY) == 1
    assert _guarantee(app, "nlp") == (40, 100)
    assert _queue(app, "nlp") == (0.4, 1.0)
    with _session(app) as session:
        lines = [
            e.summary
            for e in session.scalars(
                select(AuditEvent).where(AuditEvent.action.like("grant.%")).order_by(AuditEvent.id)
            )
        ]
    assert [line.split(":")[0] for line in lines] == [
        f"asked for grant #{grant} for nlp",
        f"approved grant #{grant} for nlp",
        f"grant #{grant} started",
        f"grant #{grant} ended",
    ]
    assert lines[-1].endswith("nlp's guarantee is back to 0.4 GPU")


def test_an_end_passed_while_the_portal_was_down_is_applied_after_its_restart(
    db_url: str,
) -> None:
    for app in portal(db_url):
        client_for(app, "admin@example.org", admin=True).api("PUT", "/api/v1/pool", {"gpus": "2"})
        grant = _ask(app, "vision", "1", NOW, NOW + DAY)
        _approve(app, grant)
        assert _guarantee(app, "vision") == (133, 200), "its start had come: applied at once"
    # Another process, a day and a half later: the first pass takes it back.
    for app in portal(db_url):
        assert _guarantee(app, "vision") == (133, 200)
        assert _tick(app, NOW + DAY + DAY / 2) == 1
        assert _guarantee(app, "vision") == (33, 100)
        assert _queue(app, "vision") == (0.33, 1.0)


def test_the_fit_is_checked_at_every_moment_of_the_window(app: FastAPI) -> None:
    """The pool of 2 holds the teams' 0.99 and 1 GPU more. One grant of 1 GPU from day 1
    to day 3: another of 1 GPU from day 2 would over-commit day 2, the same from day 3
    fits; a quota change is checked against the grants' peak too."""
    first = _ask(app, "nlp", "1", NOW + DAY, NOW + 3 * DAY)
    _approve(app, first)
    clash = _ask(app, "vision", "1", NOW + 2 * DAY, NOW + 4 * DAY)
    with pytest.raises(Conflict) as refused:
        _approve(app, clash)
    assert "would commit 2.99 of the pool's 2 GPU at 2026-12-09 09:00 UTC" in refused.value.message
    assert "0.01 GPU is free at that moment" in refused.value.message
    later = _ask(app, "recommender", "1", NOW + 3 * DAY, NOW + 5 * DAY)
    _approve(app, later)
    # The review page says the same before anyone clicks.
    admin = client_for(app, "admin@example.org", admin=True)
    page = admin.get("/admin/requests").text
    card = page.split(f'data-grant-review="{clash}"')[1].split("</article>")[0]
    assert 'data-grant-fit="no"' in card
    assert "would guarantee 2.99 of its 2 GPU" in " ".join(card.split())
    # A raise of a team's own guarantee must fit beside the grants' peak.
    lead = client_for(app, "lead-vision@example.org")
    raised = lead.api(
        "POST", "/api/v1/teams/2/quota-requests", {"gpu_quota": "0.4", "gpu_limit": "1"}
    )
    assert raised.status_code == 201
    answer = admin.api("POST", f"/api/v1/requests/{raised.json()['id']}/approve", {})
    assert answer.status_code == 409
    assert "temporary grants included at their peak" in answer.text


@pytest.mark.parametrize(
    ("fields", "field", "says"),
    [
        ({"ends_at": "2026-12-06T09:00"}, "ends_at", "is in the past"),
        (
            {"starts_at": "2026-12-09T09:00", "ends_at": "2026-12-08T09:00"},
            "ends_at",
            "after the start",
        ),
        ({"ends_at": "2027-02-01T09:00"}, "ends_at", "at most 31 days"),
        ({"starts_at": "2026-12-01T09:00"}, "starts_at", "is in the past"),
        ({"gpus": "0"}, "gpus", "at least 0.01 GPU"),
        ({"gpus": "-1"}, "gpus", "GPUs added"),
        ({"ends_at": "friday"}, "ends_at", "such as 2026-12-11T18:00"),
        ({"reason": ""}, "reason", "say what it is for"),
        ({"limit": "0.1"}, "limit", "at least as much limit as guarantee"),
    ],
)
def test_bad_grants_are_refused_naming_the_field(
    fields: dict[str, str], field: str, says: str
) -> None:
    data = {"gpus": "1", "ends_at": "2026-12-08T09:00", "reason": "a demo", **fields}
    with pytest.raises(InvalidInput) as refused:
        grants.parse_ask(data, now=NOW, max_days=31)
    assert says in refused.value.errors[field], refused.value.errors


def test_overlapping_grants_of_a_team_are_refused_and_nothing_is_half_written(
    app: FastAPI,
) -> None:
    _ask(app, "nlp", "0.5", NOW, NOW + 2 * DAY)
    with pytest.raises(InvalidInput) as refused:
        _ask(app, "nlp", "0.5", NOW + DAY, NOW + 3 * DAY)
    assert "overlaps grant #1" in refused.value.errors["starts_at"]
    with _session(app) as session:
        assert session.scalar(select(func.count()).select_from(QuotaGrant)) == 1
    # Through the page: the refusal names the form's label, the grant list is unchanged.
    lead = client_for(app, "lead-nlp@example.org")
    page = lead.form(
        "/teams/1/grants",
        {"gpus": "1", "ends_at": "2026-12-01T09:00", "reason": "x"},
        follow_redirects=True,
    ).text
    assert "Grant not asked: Until: is in the past" in page
    # Another team's lead cannot end it; its own lead can.
    other = client_for(app, "lead-vision@example.org")
    assert other.api("POST", "/api/v1/grants/1/end").status_code == 404
    ended = lead.api("POST", "/api/v1/grants/1/end")
    assert ended.status_code == 200
    assert ended.json()["state"] == "not granted"


def test_a_team_is_told_once_before_its_grant_ends(app: FastAPI) -> None:
    grant = _ask(app, "nlp", "0.5", NOW, NOW + 2 * DAY)
    _approve(app, grant)
    with unit_of_work(portal_of(app).session_factory) as session:
        assert grants.remind(session, NOW + DAY / 2, hours=24) == 0
        assert grants.remind(session, NOW + DAY + timedelta(hours=1), hours=24) == 1
        assert grants.remind(session, NOW + DAY + timedelta(hours=2), hours=24) == 0
    with _session(app) as session:
        titles = [
            n.title
            for n in session.scalars(
                select(Notification).where(Notification.event == "quota.grant")
            )
        ]
    assert "nlp's temporary grant of +0.5 GPU ends at 2026-12-09 09:00 UTC" in titles


def test_racing_admins_never_over_commit_the_pool_over_time(app: FastAPI) -> None:
    """Four grants of 0.6 GPU over the same days, approved at once by four admins: the
    pool's free 1.01 GPU holds one."""
    ids = [_ask(app, team, "0.6", NOW, NOW + DAY) for team in ("nlp", "vision", "recommender")]
    factory = portal_of(app).session_factory
    barrier = threading.Barrier(len(ids))
    outcomes = [""] * len(ids)

    def approve(i: int) -> None:
        try:
            with unit_of_work(factory) as session:
                event.listen(session, "before_commit", lambda _s: time.sleep(0.2))
                admin = _user(session, "admin@example.org")
                barrier.wait(timeout=10)
                grants.approve(session, actor=admin, grant_id=ids[i], now=NOW)
            outcomes[i] = "approved"
        except Conflict as exc:
            outcomes[i] = exc.message
        except Exception as exc:
            outcomes[i] = f"error: {type(exc).__name__}: {exc}"

    threads = [threading.Thread(target=approve, args=(i,)) for i in range(len(ids))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert outcomes.count("approved") == 1, outcomes
    assert all("is free at that moment" in o for o in outcomes if o != "approved"), outcomes
    with _session(app) as session:
        org = repo.get_org(session)
        assert repo.committed_by_pool(session, org.id)[org.default_pool.id] == 99 + 60


def test_a_grant_ends_with_its_teams_cluster_and_reserves_nothing_after(app: FastAPI) -> None:
    grant = _ask(app, "recommender", "1", NOW + DAY, NOW + 2 * DAY)
    _approve(app, grant)
    lead = client_for(app, "lead-recommender@example.org")
    assert lead.api("POST", "/api/v1/teams/3/decommission").status_code == 200
    for _ in range(3):
        portal_of(app).reconciler.run_once()
    assert _tick(app, NOW + DAY) == 1, "at its start: released with the team, never applied"
    with _session(app) as session:
        ended = session.get(QuotaGrant, grant)
        assert ended is not None
        assert (ended.applied_at, ended.released_at is not None) == (None, True)
    # Its day is free again for another team's grant of the same size.
    _approve(app, _ask(app, "vision", "1", NOW + DAY, NOW + 2 * DAY))


def test_a_change_asked_during_a_grant_speaks_of_the_teams_own_quota(app: FastAPI) -> None:
    """vision runs a grant in the L40S pool; its lead asks to change only the default
    pool: the review card shows no change in the L40S pool (the grant stays apart)."""
    with unit_of_work(portal_of(app).session_factory) as session:
        vision = repo.get_live_team_by_name(session, "vision")
        assert vision is not None
        l40s = next(p for p in repo.get_pools(session, vision.org_id) if p.name == "l40s")
        vision.set_quota(l40s, Quota.of_gpu(100, 200))
    l40s_grant = _ask_in(app, "vision", "l40s", "0.5")
    _approve(app, l40s_grant)
    lead = client_for(app, "lead-vision@example.org")
    asked = lead.api(
        "POST", "/api/v1/teams/2/quota-requests", {"gpu_quota": "0.4", "gpu_limit": "1"}
    )
    assert asked.status_code == 201, asked.text
    assert asked.json()["requested"]["pools"]["l40s"]["gpu"]["guarantee"] == "1"
    card = client_for(app, "admin@example.org", admin=True).get("/admin/requests").text
    assert 'data-pool-review="l40s"' not in card
    approved = client_for(app, "admin@example.org", admin=True).api(
        "POST", f"/api/v1/requests/{asked.json()['id']}/approve", {}
    )
    assert approved.status_code == 200, approved.text
    with _session(app) as session:
        vision = repo.get_live_team_by_name(session, "vision")
        assert vision is not None
        held = next(q for p, q in vision.quota_by_pool().items() if p.name == "l40s")
        assert held.gpu.guarantee == 150, "its own 1 and the grant's 0.5"


def _ask_in(app: FastAPI, team: str, pool: str, gpus: str) -> int:
    with unit_of_work(portal_of(app).session_factory) as session:
        t = repo.get_live_team_by_name(session, team)
        assert t is not None
        asked = grants.parse_ask(
            {
                "pool": pool,
                "gpus": gpus,
                "ends_at": (NOW + DAY).isoformat(),
                "reason": "a run",
            },
            now=NOW,
            max_days=31,
        )
        lead = _user(session, f"lead-{team}@example.org")
        return grants.ask(session, actor=lead, team=t, asked=asked, now=NOW).id
