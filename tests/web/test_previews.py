"""Previews that can happen: a pool below the guarantees is said to be unsaveable, and
lowering a team's quota names the running work KAI may take back."""

from __future__ import annotations

import re
from datetime import timedelta

from sqlalchemy import select

from app.access import service as access
from app.adapters.simulated import SimulatedBackend
from app.core.db import unit_of_work
from app.core.models import KubeconfigGrant, Team, TeamStatus, utcnow
from app.runtime import portal_of
from tests.web.conftest import client_for, portal


def test_a_pool_below_the_guarantees_is_flagged_in_its_preview(db_url: str) -> None:
    for app in portal(db_url):
        admin = client_for(app, "admin@example.org", admin=True)
        preview = admin.form("/admin/pool/impact", {"gpus": "0.5"}).text
        assert (
            "A pool of 0.5 GPU is below the 0.99 GPU already guaranteed to teams: KAI could "
            "not give every team its guarantee at once." in preview
        )
        assert 'name="below_committed" value="confirm"' in preview
        fits = admin.form("/admin/pool/impact", {"gpus": "2"}).text
        assert "below-committed" not in fits
        assert "below_committed" not in fits


def test_lowering_a_quota_names_what_kai_may_take_back(db_url: str) -> None:
    for app in portal(db_url):
        backend = portal_of(app).backend
        assert isinstance(backend, SimulatedBackend)
        backend.pin_usage("nlp", allocated=0.9, requested=0.9)
        for team in ("vision", "recommender"):
            backend.pin_usage(team, allocated=0.0, requested=0.0)
        lead = client_for(app, "lead-nlp@example.org")
        asked = lead.api(
            "POST", "/api/v1/teams/1/quota-requests", {"gpu_quota": "0.1", "gpu_limit": "0.3"}
        )
        assert asked.status_code == 201, asked.text
        admin = client_for(app, "admin@example.org", admin=True)
        card = admin.get("/admin/requests").text
        found = re.search(r'data-reclaim-team="nlp">([^<]+)<', card)
        assert found is not None
        assert found.group(1) == (
            "nlp uses 0.9 GPU now; after this its fair share is 0.3 (guarantee 0.1), so KAI "
            "may take back 0.6 GPU of its running work when other teams ask for theirs."
        )
        assert 'data-reclaim-team="vision"' not in card


def test_a_member_is_called_a_member_by_the_name_typed(db_url: str) -> None:
    for app in portal(db_url):
        lead = client_for(app, "lead-nlp@example.org")
        assert ">Nlp lead · team lead<" in lead.get("/teams/1").text
        added = lead.api("POST", "/api/v1/teams/1/members", {"email": "ada@example.org"})
        assert added.status_code == 201, added.text
        member = client_for(app)
        member.refresh_csrf()
        signed = member.post(
            "/login/dev",
            data={
                "csrf_token": member.csrf,
                "email": "ada@example.org",
                "name": "Ada Lovelace",
                "role": "lead",
            },
            follow_redirects=False,
        )
        assert signed.status_code == 303
        assert ">Ada Lovelace · member<" in member.get("/teams/1").text


def test_a_failure_with_a_retry_coming_shows_as_retrying(db_url: str) -> None:
    for app in portal(db_url):
        factory = portal_of(app).session_factory
        with unit_of_work(factory) as session:
            team = session.get(Team, 1)
            assert team is not None
            team.status = TeamStatus.FAILED
            team.last_error = "queue: the API server did not answer"
            team.next_attempt_at = utcnow() + timedelta(seconds=6)
        lead = client_for(app, "lead-nlp@example.org")
        page = lead.get("/teams/1").text
        assert re.search(
            r'<span id="team-pill"><span class="pill pill-provisioning"[^>]*>retrying<', page
        )
        assert "pill-failed" not in page
        with unit_of_work(factory) as session:
            team = session.get(Team, 1)
            assert team is not None
            team.next_attempt_at = utcnow() - timedelta(seconds=10)  # due: being taken
        assert "pill-failed" not in lead.get("/teams/1").text
        with unit_of_work(factory) as session:
            team = session.get(Team, 1)
            assert team is not None
            team.next_attempt_at = utcnow() - timedelta(minutes=2)  # nobody is retrying
        assert "pill pill-failed" in lead.get("/teams/1").text
        with unit_of_work(factory) as session:
            team = session.get(Team, 1)
            assert team is not None
            team.next_attempt_at = None  # given up: a failure
        assert "pill pill-failed" in lead.get("/teams/1").text


def test_a_one_day_kubeconfig_is_not_announced_as_expiring(db_url: str) -> None:
    """Its holder chose a day a moment ago; a week-long one is told a day before."""
    for app in portal(db_url):
        lead = client_for(app, "lead-nlp@example.org")
        for ttl in ("1d", "7d"):
            assert lead.api("POST", f"/api/v1/teams/1/kubeconfig?ttl={ttl}").status_code == 200
        with unit_of_work(portal_of(app).session_factory) as session:
            day, week = session.scalars(select(KubeconfigGrant).order_by(KubeconfigGrant.id))
            soon = utcnow() + timedelta(seconds=18)
            assert access.tell_expiring(session, now=soon) == 0
            assert access.tell_expiring(session, now=week.expires_at - timedelta(hours=25)) == 0
            assert access.tell_expiring(session, now=week.expires_at - timedelta(hours=23)) == 1
            assert day.expiry_told_at is None


def test_two_kubeconfigs_of_one_person_are_counted_and_named(db_url: str) -> None:
    for app in portal(db_url):
        lead = client_for(app, "lead-nlp@example.org")
        for ttl in ("8h", "2d"):
            assert lead.api("POST", f"/api/v1/teams/1/kubeconfig?ttl={ttl}").status_code == 200
        page = lead.get("/teams/1").text
        row = page.split('data-holder="lead-nlp@example.org"')[1].split("</li>")[0]
        assert "<b>Nlp lead</b>" in row
        assert "2 kubeconfigs, the first expires" in row
        assert ", the last " in row


def test_pending_and_rejected_teams_show_what_they_asked_for(db_url: str) -> None:
    for app in portal(db_url):
        lead = client_for(app, "lead-nlp@example.org")
        asked = lead.api(
            "POST",
            "/api/v1/requests",
            {"name": "speech", "gpu_quota": "0.2", "gpu_limit": "0.5", "purpose": "ASR"},
        )
        assert asked.status_code == 201, asked.text
        team_id = asked.json()["team_id"]
        page = lead.get(f"/teams/{team_id}").text
        assert "Quota asked for" in page
        assert re.search(r'data-quota="gpu_quota">0.2<', page)
        assert re.search(r'data-quota="gpu_limit">0.5<', page)
        admin = client_for(app, "admin@example.org", admin=True)
        rejected = admin.api(
            "POST", f"/api/v1/requests/{asked.json()['id']}/reject", {"reason": "too big"}
        )
        assert rejected.status_code == 200, rejected.text
        page = lead.get(f"/teams/{team_id}").text
        assert "The request was rejected; these are the values it asked for." in page
        assert f'href="/teams/new?again={team_id}"' in page
        form = lead.get(f"/teams/new?again={team_id}").text
        assert 'value="speech"' in form
        assert 'value="0.5"' in form
        assert (
            "Request again"
            not in client_for(app, "lead-vision@example.org").get(f"/teams/{team_id}").text
        )


def test_the_pool_change_is_told_in_words(db_url: str) -> None:
    for app in portal(db_url):
        admin = client_for(app, "admin@example.org", admin=True)
        assert admin.api("PUT", "/api/v1/pool", {"gpus": "2"}).status_code == 200
        kept = admin.get("/api/v1/pool").json()
        assert (kept["cpu_cores"], kept["memory_gb"]) == ("40", "160"), "left out: kept"
        changed = admin.api("PUT", "/api/v1/pool", {"gpus": "3", "cpu_cores": "4"})
        assert changed.status_code == 200
        summaries = [e["summary"] for e in admin.get("/api/v1/audit").json()]
        assert "pool changed: GPUs 2 → 3, CPU cores 40 → 4" in summaries


def test_the_api_sets_a_pool_below_the_guarantees_only_when_told_to(db_url: str) -> None:
    for app in portal(db_url):
        admin = client_for(app, "admin@example.org", admin=True)
        refused = admin.api("PUT", "/api/v1/pool", {"gpus": "0.5"})
        assert refused.status_code == 422
        assert "below_committed" in refused.text or "confirm a pool below" in refused.text
        lost = admin.api("PUT", "/api/v1/pool", {"gpus": "0.5", "below_committed": True})
        assert lost.status_code == 200, lost.text
        assert (lost.json()["gpus"], lost.json()["committed_gpus"]) == ("0.5", "0.99")
        assert lost.json()["free_gpus"] == "0"
        event = admin.get("/api/v1/audit").json()[0]
        assert event["details"]["below_committed"] == "0.99"


def test_a_decision_settles_the_admins_notices_that_asked_for_it(db_url: str) -> None:
    """The seed's requests were decided long ago: no admin's bell counts them; a new
    request counts until another admin decides it."""
    for app in portal(db_url):
        admin = client_for(app, "admin@example.org", admin=True)
        other = client_for(app, "admin2@example.org", admin=True)
        assert admin.get("/api/v1/notifications").json()["unread"] == 0
        lead = client_for(app, "lead-nlp@example.org")
        asked = lead.api(
            "POST", "/api/v1/requests", {"name": "speech", "gpu_quota": "0", "gpu_limit": "0.1"}
        )
        assert asked.status_code == 201
        assert admin.get("/api/v1/notifications").json()["unread"] == 1
        decided = other.api("POST", f"/api/v1/requests/{asked.json()['id']}/approve", {})
        assert decided.status_code == 200, decided.text
        assert admin.get("/api/v1/notifications").json()["unread"] == 0


def test_the_bell_is_drawn_not_an_emoji(db_url: str) -> None:
    """Without an emoji font the bell drew as a box: it is an SVG in the page's colour."""
    for app in portal(db_url):
        admin = client_for(app, "admin@example.org", admin=True)
        for path in ("/admin", "/notifications/bell"):
            page = admin.get(path).text
            assert 'class="bell-icon"' in page
            assert "\U0001f514" not in page


def test_an_org_queue_capped_at_its_pool_follows_the_pool_being_tried(db_url: str) -> None:
    """With PORTAL_ORG_QUEUE_GPU_LIMIT=pool the org's queue may use only its pool: a
    smaller pool tried in a preview is fewer GPUs for its teams (the limit follows it)."""
    for app in portal(db_url, org_queue_gpu_limit="pool", simulated_cluster_gpus=4):
        backend = portal_of(app).backend
        assert isinstance(backend, SimulatedBackend)
        for team in ("nlp", "vision", "recommender"):
            backend.pin_usage(team, allocated=0.3, requested=1.0)
        admin = client_for(app, "admin@example.org", admin=True)
        imp = admin.get("/api/v1/pool/impact", params={"gpus": "3"}).json()
        after = sum(t["fair_now_after"] or 0 for t in imp["teams"])
        before = sum(t["fair_now_before"] or 0 for t in imp["teams"])
        assert round(before, 2) == 1.0, "today: the org holds its pool of 1"
        assert round(after, 2) == 3.0, "a pool of 3 tried: the org's limit is 3 too"
