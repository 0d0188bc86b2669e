"""Asking for quota in another pool, and approving it per pool: through the API, each
pool checked against its own budget, the approval copied to the team's lines and queue
spec, the messages naming the pool; a quota change keeps or leaves other pools."""

from __future__ import annotations

import httpx
from fastapi import FastAPI

from app.core.db import unit_of_work
from app.core.models import AuditEvent, Team, TeamStatus
from app.core.quota import Quota
from app.provisioning.backend import spec_for
from app.runtime import portal_of
from app.teams import repository as repo
from tests.web.conftest import Client

L40S = {"gpu_quota": "1", "gpu_limit": "2", "over_quota_weight": "2"}


def _ask(lead: Client, name: str, pools: object) -> httpx.Response:
    body = {"name": name, "gpu_quota": "0", "gpu_limit": "0.5", "pools": pools}
    return lead.api("POST", "/api/v1/requests", body)


def test_a_request_in_the_l40s_pool_is_approved_into_the_teams_queue_there(
    admin: Client, lead: Client, app: FastAPI
) -> None:
    made = _ask(lead, "speech", {"l40s": L40S})
    assert made.status_code == 201, made.text
    asked = made.json()
    assert asked["requested"]["pools"]["l40s"]["gpu"] == {
        "guarantee": "1",
        "limit": "2",
        "weight": "2",
    }
    approved = admin.api("POST", f"/api/v1/requests/{asked['id']}/approve", {})
    assert approved.status_code == 200, approved.text
    with unit_of_work(portal_of(app).session_factory) as session:
        team = session.get_one(Team, asked["team_id"])
        spec = spec_for(team, repo.get_org(session))
        (pool,) = spec.pools
        assert (pool.queue_name, pool.parent_queue, pool.label_value) == (
            "team-speech-l40s",
            "ml-org-l40s",
            "l40s",
        )
        assert dict(pool.resources)["gpu"].quota == 1.0
        summaries = [e.summary for e in session.query(AuditEvent).all()]
    assert any(
        s.startswith("requested cluster speech")
        and "; in pool l40s: guarantee 1 GPU, limit 2 GPU, weight 2" in s
        for s in summaries
    ), summaries


def test_each_pool_is_checked_against_its_own_budget(admin: Client, lead: Client) -> None:
    unknown = _ask(lead, "speech", {"h100": L40S})
    assert unknown.status_code == 422
    assert unknown.json()["errors"] == {
        "pools.h100": "no pool is named h100: the other pools are l40s"
    }
    over = _ask(lead, "speech", {"l40s": {"gpu_quota": "3", "gpu_limit": "3"}})
    assert over.status_code == 422
    errors = over.json()["errors"]
    assert errors == {
        "pools.l40s.gpu_limit": "in pool l40s: the limit (3 GPU) cannot exceed the pool of "
        "2 GPU: enter 2 or less"
    }
    first = _ask(lead, "speech", {"l40s": {"gpu_quota": "1.5", "gpu_limit": "2"}})
    other = _ask(lead, "audio", {"l40s": {"gpu_quota": "1", "gpu_limit": "2"}})
    assert (
        admin.api("POST", f"/api/v1/requests/{first.json()['id']}/approve", {}).status_code == 200
    )
    refused = admin.api("POST", f"/api/v1/requests/{other.json()['id']}/approve", {})
    assert refused.status_code == 409
    assert refused.json()["detail"] == (
        "approving a guarantee of 1 GPU in pool l40s would commit 2.5 of its 2 GPU; 0.5 GPU "
        "is free there. Approve with a guarantee of at most that, or raise the pool's "
        "budget first."
    )
    adjusted = admin.api(
        "POST",
        f"/api/v1/requests/{other.json()['id']}/approve",
        {
            "adjusted": {
                "gpu_quota": "0",
                "gpu_limit": "0.5",
                "pools": {"l40s": {"gpu_quota": "0.5", "gpu_limit": "2"}},
            }
        },
    )
    assert adjusted.status_code == 200, adjusted.text
    assert (
        adjusted.json()["decision"]["changes"]["pool l40s"]
        == [
            "1 GPU guaranteed, limit 2 GPU",
            "0.5 GPU guaranteed, limit 2 GPU",
        ]
        or "pool l40s" in adjusted.json()["decision"]["changes"]
    )


def test_a_quota_change_keeps_other_pools_unless_it_names_them(
    admin: Client, lead: Client, app: FastAPI
) -> None:
    made = _ask(lead, "speech", {"l40s": L40S})
    request_id = made.json()["id"]
    team_id = made.json()["team_id"]
    admin.api("POST", f"/api/v1/requests/{request_id}/approve", {})
    portal_of(app).reconciler.run_once()
    with unit_of_work(portal_of(app).session_factory) as session:
        session.get_one(Team, team_id).status = TeamStatus.READY
    kept = lead.api(
        "POST", f"/api/v1/teams/{team_id}/quota-requests", {"gpu_quota": "0.01", "gpu_limit": "0.5"}
    )
    assert kept.status_code == 201, kept.text
    assert kept.json()["requested"]["pools"]["l40s"]["gpu"]["guarantee"] == "1"
    approved = admin.api("POST", f"/api/v1/requests/{kept.json()['id']}/approve", {})
    assert approved.status_code == 200, approved.text
    left = lead.api(
        "POST",
        f"/api/v1/teams/{team_id}/quota-requests",
        {"gpu_quota": "0", "gpu_limit": "0.5", "pools": {}},
    )
    assert left.status_code == 201, left.text
    assert "l40s" not in left.json()["requested"]["pools"]
    approved = admin.api("POST", f"/api/v1/requests/{left.json()['id']}/approve", {})
    assert approved.status_code == 200, approved.text
    with unit_of_work(portal_of(app).session_factory) as session:
        team = session.get_one(Team, team_id)
        assert team.other_pools() == {}


def test_the_request_form_asks_for_each_other_pool_and_sends_it(
    lead: Client, admin: Client
) -> None:
    form = lead.get("/teams/new").text
    assert 'name="pools.l40s.gpu_quota"' in form
    assert "Pool l40s (NVIDIA L40S)" in form
    assert "2 GPU to guarantee" in form
    refused = lead.form(
        "/teams",
        {"name": "speech", "gpu_quota": "0", "gpu_limit": "0.5", "pools.l40s.gpu_limit": "1"},
    )
    assert refused.status_code == 422
    assert "in pool l40s: " in refused.text
    assert 'value="1"' in refused.text, "what was typed stays"
    sent = lead.form(
        "/teams",
        {
            "name": "speech",
            "gpu_quota": "0",
            "gpu_limit": "0.5",
            "pools.l40s.gpu_quota": "0.5",
            "pools.l40s.gpu_limit": "2",
        },
        follow_redirects=False,
    )
    assert sent.status_code == 303, sent.text
    asked = [r for r in admin.get("/api/v1/requests").json() if r["team"] == "speech"]
    assert asked[0]["requested"]["pools"]["l40s"]["gpu"] == {
        "guarantee": "0.5",
        "limit": "2",
        "weight": "1",
    }


def test_the_review_card_shows_what_is_asked_in_each_pool(lead: Client, admin: Client) -> None:
    _ask(lead, "speech", {"l40s": L40S})
    card = admin.get("/admin/requests").text
    assert (
        '<dt>In pool l40s</dt><dd data-asked="pool-l40s"><b>1</b> GPU guaranteed, limit 2 GPU, '
        "weight 2</dd>"
    ) in card


def test_the_quota_change_form_shows_the_other_pools_and_a_pool_emptied_is_left(
    admin: Client, lead: Client, app: FastAPI
) -> None:
    with unit_of_work(portal_of(app).session_factory) as session:
        org = repo.get_org(session)
        l40s = next(p for p in repo.get_pools(session, org.id) if p.name == "l40s")
        session.get_one(Team, 1).set_quota(l40s, Quota.of_gpu(50, 200))
    form = lead.get("/teams/1/quota").text
    assert 'name="pools.l40s.gpu_quota" type="text" value="0.5"' in form
    assert '<details class="more" id="pool-inputs" open>' in form
    left = lead.form(
        "/teams/1/quota",
        {
            "gpu_quota": "0.33",
            "gpu_limit": "1",
            "pools.l40s.gpu_quota": "",
            "pools.l40s.gpu_limit": "",
        },
        follow_redirects=False,
    )
    assert left.status_code == 303, left.text
    asked = [r for r in admin.get("/api/v1/requests").json() if r["status"] == "submitted"]
    assert [r["requested"]["pools"].get("l40s") for r in asked] == [None]
