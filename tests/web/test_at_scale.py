"""An admin's pages with more teams than fit on one screen: the what-if page lists the
changed teams first and then a page of teams (search, next page) and keeps every change
across them, a keystroke sends only the changed teams; the requests page shows twenty
cards a page; a review card's impact is computed once per decision input and ready view,
however often it is looked at."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

import pytest
from fastapi import FastAPI
from sqlalchemy import insert, select

from app.adapters.simulated import SimulatedBackend
from app.core.db import unit_of_work
from app.core.models import Org, Pool, Team, TeamQuotaLine, TeamStatus, User, utcnow
from app.core.quota import Quota
from app.runtime import portal_of
from app.teams import repository as repo
from app.teams import service
from app.usage import division
from app.usage import impact as usage_impact
from app.usage import what_if as usage_what_if
from tests.web.conftest import Client

EXTRA = 117  # with the example org's three: 120 teams, three pages of what-if rows


@pytest.fixture
def crowded(app: FastAPI) -> FastAPI:
    now = utcnow()
    portal = portal_of(app)
    with unit_of_work(portal.session_factory) as session:
        org_id = session.scalar(select(Org.id))
        admin_id = session.scalar(select(User.id).where(User.is_admin.is_(True)))
        session.execute(
            insert(Team),
            [
                {
                    "org_id": org_id,
                    "name": f"crowd-{i:03d}",
                    "status": TeamStatus.READY,
                    "purpose": "many teams",
                    "priority": 100,
                    "created_by_id": admin_id,
                    "created_at": now,
                    "updated_at": now,
                    "desired_generation": 1,
                    "observed_generation": 1,
                    "attempts": 0,
                }
                for i in range(EXTRA)
            ],
        )
        pool_id = session.scalar(select(Pool.id).where(Pool.is_default))
        crowd = session.scalars(select(Team.id).where(Team.name.like("crowd-%"))).all()
        session.execute(
            insert(TeamQuotaLine),
            [
                {"team_id": i, "pool_id": pool_id, "resource": "gpu", "guarantee": 0,
                 "quota_limit": 100, "weight": 100}
                for i in crowd
            ],
        )  # fmt: skip
    portal.usage_cache.forget_quotas()
    return app


def _team_id(app: FastAPI, name: str) -> int:
    with unit_of_work(portal_of(app).session_factory) as session:
        found = session.scalar(select(Team.id).where(Team.name == name))
        assert found is not None
        return int(found)


def _ask_for_more(app: FastAPI, teams: int) -> None:
    """Quota changes waiting for the first ``teams`` crowd teams, oldest first."""
    with unit_of_work(portal_of(app).session_factory) as session:
        actor = session.scalar(select(User).where(User.is_admin.is_(True)))
        assert actor is not None
        for i in range(teams):
            team = repo.get_team(session, _team_id(app, f"crowd-{i:03d}"))
            service.submit_quota_change(
                session,
                actor=actor,
                team=team,
                values=Quota.of_gpu(1, 100),
                purpose=f"more for {i}",
            )


def _input_rows(page: str) -> list[str]:
    return re.findall(r'aria-label="guarantee of ([\w-]+)"', page)


def test_the_what_if_page_lists_a_page_of_teams_and_finds_any(
    crowded: FastAPI, admin: Client
) -> None:
    page = admin.get("/admin/what-if").text
    assert len(_input_rows(page)) == 50
    assert "120 teams, page 1 of 3" in page
    third = admin.form("/admin/what-if", {"page": "3"}).text
    assert _input_rows(third)[-1] == "crowd-116"
    assert len(_input_rows(third)) == 20
    found = admin.form("/admin/what-if", {"find": "crowd-05", "page": "1"}).text
    assert _input_rows(found) == [f"crowd-05{i}" for i in range(10)]
    assert "10 of 120 teams match “crowd-05”" in found
    nothing = admin.form("/admin/what-if", {"find": "no-such-team"}).text
    assert "No team's name matches “no-such-team”" in nothing


def test_a_change_on_another_page_is_kept_first_and_counted(
    crowded: FastAPI, admin: Client
) -> None:
    far = _team_id(crowded, "crowd-110")
    form = {"pool": "2", f"q_{far}": "0.5", "page": "1"}
    page = admin.form("/admin/what-if", form).text
    rows = _input_rows(page)
    assert rows[0] == "crowd-110", "the changed team comes first, on any page"
    assert rows.count("crowd-110") == 1
    assert f'name="q_{far}" value="0.5" data-today="0"' in page
    assert "1 team changed" in page
    assert "pool 1 → 2 GPU" in page
    moved = page.split('data-whatif-result="crowd-110"')[1].split("</tr>")[0]
    assert re.search(r'data-whatif="guarantee">0.5<', moved), moved
    # A keystroke (HTMX) carries only the changed fields: the same answer.
    htmx = admin.post(
        "/admin/what-if",
        data={"pool": "2", f"q_{far}": "0.5"},
        headers={"HX-Request": "true", "X-CSRF-Token": admin.csrf},
    )
    assert htmx.status_code == 200
    assert "1 team changed" in htmx.text
    assert re.search(r"(\d+) teams keep their numbers", htmx.text)


def test_the_requests_page_shows_twenty_cards_a_page(crowded: FastAPI, admin: Client) -> None:
    _ask_for_more(crowded, 25)
    first = admin.get("/admin/requests").text
    assert first.count('class="card request"') == 20
    assert "25 requests waiting · page 1 of 2, oldest first" in first
    second = admin.get("/admin/requests?page=2").text
    assert second.count('class="card request"') == 5
    assert "crowd-024" in second
    assert "crowd-024" not in first


def test_a_review_cards_impact_is_computed_once_per_decision_input(
    crowded: FastAPI, admin: Client, monkeypatch: pytest.MonkeyPatch
) -> None:
    _ask_for_more(crowded, 3)
    calls = 0
    divide: Callable[..., Any] = division.divide_org

    def counting(*args: Any, **kwargs: Any) -> Any:
        nonlocal calls
        calls += 1
        return divide(*args, **kwargs)

    monkeypatch.setattr(usage_impact, "divide_org", counting)
    portal_of(crowded).usage_cache.refresher_running = True  # hold the ready view
    first = admin.get("/admin/requests").text
    assert first.count('class="card request"') == 3
    assert calls == 3, "one division after each card's decision"
    again = admin.get("/admin/requests").text
    assert calls == 3, "the next view reads the same three"
    assert again.count('data-impact-team="crowd-000"') == first.count(
        'data-impact-team="crowd-000"'
    )


def test_the_overview_by_usage_pages_through_busy_then_idle_by_name(
    crowded: FastAPI, admin: Client, lead: Client
) -> None:
    """The busy teams first (most GPUs first), then every other team by name, a team
    still waiting for approval among them; a later page reads on where the first ends."""
    portal = portal_of(crowded)
    backend = portal.backend
    assert isinstance(backend, SimulatedBackend)
    backend.pin_usage("nlp", allocated=0.2, requested=0.2)
    backend.pin_usage("vision", allocated=0.5, requested=0.5)
    backend.pin_usage("recommender", allocated=0.0, requested=0.0)
    asked = lead.api(
        "POST",
        "/api/v1/requests",
        {"name": "crowd-0005a", "purpose": "waits", "gpu_quota": "0", "gpu_limit": "0.5"},
    )
    assert asked.status_code == 201, asked.text
    portal.usage_cache.forget()

    def names(page: str) -> list[str]:
        return re.findall(r'<a href="/teams/\d+"><b>([\w-]+)</b>', page)

    first = names(admin.get("/admin?sort=usage").text)
    assert first[:2] == ["vision", "nlp"], "the most GPUs in use first"
    # Then by name, the team waiting for approval among them (crowd-000 < crowd-0005a).
    assert first[2:6] == ["crowd-000", "crowd-0005a", "crowd-001", "crowd-002"]
    assert len(first) == 50
    second = names(admin.get("/admin?sort=usage&page=2").text)
    assert second[0] == "crowd-047", "page 2 reads on where page 1 ends"
    everything = first + second + names(admin.get("/admin?sort=usage&page=3").text)
    assert len(everything) == len(set(everything)) == 121
    borrowing = names(admin.get("/admin?status=borrowing").text)
    assert borrowing == ["vision"], "nlp's 0.2 is within its guarantee of 0.33"


def test_the_what_if_with_nothing_changed_is_computed_once_per_view(
    crowded: FastAPI, admin: Client, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Over the ready view, the page with nothing changed (and values typed back to
    today's) is computed once however often it is asked for; a typed change, and the
    step-by-step account, each time."""
    computed: list[int] = []
    impact: Callable[..., Any] = usage_impact.impact

    def counting(*args: Any, **kwargs: Any) -> Any:
        computed.append(len(kwargs.get("changes") or {}))
        return impact(*args, **kwargs)

    monkeypatch.setattr(usage_what_if, "impact", counting)
    cache = portal_of(crowded).usage_cache
    cache.refresher_running = True  # hold the ready view
    # And one usage reading for the whole test: two renders of one typed change may come
    # more than a second apart on a loaded machine, and the simulated use moves.
    cache.ttl = 600.0
    htmx = {"HX-Request": "true", "X-CSRF-Token": admin.csrf}
    first = admin.get("/admin/what-if").text
    assert admin.get("/admin/what-if").text == first
    assert computed == [0], "the page with nothing changed, once"
    team = _team_id(crowded, "crowd-005")
    today = admin.post("/admin/what-if", data={f"q_{team}": "0"}, headers=htmx).text
    assert computed == [0], "a value typed back to today's is nothing changed"
    assert "0 teams changed" in today
    typed = admin.post("/admin/what-if", data={f"q_{team}": "0.5"}, headers=htmx).text
    assert admin.post("/admin/what-if", data={f"q_{team}": "0.5"}, headers=htmx).text == typed
    assert computed == [0, 1, 1], "a typed change, each time"
    assert "1 team changed" in typed
    for _ in range(2):
        admin.post("/admin/what-if", data={"explain_now": str(team)}, headers=htmx)
    assert computed == [0, 1, 1, 0, 0], "the account is traced each time"
