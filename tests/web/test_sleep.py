"""Sleep and wake through the pages and the API: what a lead and an admin see and may do."""

from __future__ import annotations

import html
import re

from fastapi import FastAPI

from app.adapters.simulated import SimulatedBackend
from app.audit import service as audit
from app.core.db import unit_of_work
from app.core.events import Event
from app.core.models import Sleep
from app.provisioning import sleep
from app.runtime import portal_of
from app.teams import repository as repo
from app.teams.seed import seed_sleep
from tests.web.conftest import Client, client_for


def demo_sleep(app: FastAPI) -> None:
    """The demo's sleep (``make run``): the policy on and recommender put to sleep."""
    with unit_of_work(portal_of(app).session_factory) as session:
        assert seed_sleep(session)
    settle(app)


def settle(app: FastAPI) -> None:
    """The reconciler's passes until nothing is due now (a sleep is installed, then paused)."""
    reconciler = portal_of(app).reconciler
    for _ in range(5):
        if not reconciler.run_once():
            return


def sleep_of(app: FastAPI, name: str) -> str:
    with portal_of(app).session_factory() as session:
        team = repo.get_live_team_by_name(session, name)
        assert team is not None
        return str(team.sleep)


def text_of(page: str) -> str:
    return html.unescape(re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", page)))


def test_the_example_org_shows_a_sleeping_team_and_its_lead_wakes_it(app: FastAPI) -> None:
    demo_sleep(app)
    assert sleep_of(app, "recommender") == Sleep.ASLEEP
    lead = client_for(app, "lead-recommender@example.org")
    page = text_of(lead.get("/teams/3").text)
    assert "Asleep since" in page
    assert "nothing ran in it and nobody used it for 8 hours" in page
    assert "Wake now" in page
    assert "It answers again in about 30 s" in page
    response = lead.form("/teams/3/wake", follow_redirects=True)
    assert "Waking recommender: it answers again in about 30 s." in text_of(response.text)
    assert sleep_of(app, "recommender") == Sleep.WAKING
    assert "Waking since" in text_of(lead.get("/teams/3").text)
    settle(app)
    assert sleep_of(app, "recommender") == Sleep.AWAKE
    page = text_of(lead.get("/teams/3").text)
    assert re.search(
        r"Awake\. If nothing runs in it and nobody uses it, it sleeps in [78] h \(8 idle hours\)",
        page,
    ), page
    # Its leads heard of the sleep; the wake they asked for themselves is not news to them.
    bell = text_of(lead.get("/notifications").text)
    assert "recommender's cluster is asleep: nothing ran in it" in bell


def test_the_overview_counts_the_sleeping_clusters_and_the_memory_they_save(
    app: FastAPI, admin: Client
) -> None:
    demo_sleep(app)
    page = admin.get("/admin")
    found = re.search(r'data-testid="asleep">(\d+)<', page.text)
    assert found
    assert found.group(1) == "1"
    assert "1 cluster asleep saves 0.6 GiB of host memory now (0.57 GiB an awake vCluster" in (
        text_of(page.text)
    )


def test_a_kubeconfig_download_wakes_a_sleeping_cluster_and_says_when_to_ask_again(
    app: FastAPI,
) -> None:
    demo_sleep(app)
    lead = client_for(app, "lead-recommender@example.org")
    response = lead.api("POST", "/api/v1/teams/3/kubeconfig")
    assert response.status_code == 503
    assert response.headers["Retry-After"] == "30"
    assert "was asleep and is waking: ask again in about 30 s" in response.json()["detail"]
    assert sleep_of(app, "recommender") == Sleep.WAKING
    settle(app)
    assert lead.api("POST", "/api/v1/teams/3/kubeconfig").status_code == 200


def test_the_api_sleeps_and_wakes_and_refuses_what_it_must(app: FastAPI, lead: Client) -> None:
    settle(app)
    backend = portal_of(app).backend
    assert isinstance(backend, SimulatedBackend)
    backend.pin_usage("nlp", allocated=0.5, requested=0.5)
    refused = lead.api("POST", "/api/v1/teams/1/sleep")
    assert refused.status_code == 409
    assert (
        "nlp runs 1 pod on the cluster: nothing sleeps while a team pod runs"
        in (refused.json()["detail"])
    )
    backend.pin_usage("nlp", allocated=0, requested=0)
    slept = lead.api("POST", "/api/v1/teams/1/sleep")
    assert slept.status_code == 200, slept.text
    assert slept.json()["sleep"]["state"] == "falling_asleep"
    settle(app)
    got = lead.get("/api/v1/teams/1").json()["sleep"]
    assert got["state"] == "asleep"
    assert got["reason"] == "put to sleep by lead-nlp@example.org"
    # Another team's lead may not wake it; a member of the team may.
    assert client_for(app, "lead-vision@example.org").api(
        "POST", "/api/v1/teams/1/wake"
    ).status_code in (
        403,
        404,
    )
    member = client_for(app, "member-nlp@example.org")
    assert member.api("POST", "/api/v1/teams/1/wake").json()["sleep"]["state"] == "waking"
    # Without the CSRF header a browser session's POST is refused.
    assert member.post("/api/v1/teams/1/wake").status_code == 403
    # Bad choices say which field to change.
    bad = lead.api("PUT", "/api/v1/teams/1/sleep", {"sleep_after_hours": 500})
    assert bad.status_code == 422
    assert "sleep_after_hours" in bad.json()["errors"]


def test_the_admin_sets_the_policy_and_a_lead_cannot(
    app: FastAPI, admin: Client, lead: Client
) -> None:
    assert lead.api("PUT", "/api/v1/sleep-policy", {"sleep_after_hours": 2}).status_code == 403
    bad = admin.api("PUT", "/api/v1/sleep-policy", {"sleep_after_hours": 0, "sleep_max_hours": 24})
    assert bad.status_code == 422
    assert "sleep_after_hours" in bad.json()["errors"]
    page = admin.form(
        "/admin/pools/sleep-policy", {"sleep_after_hours": "4", "sleep_max_hours": "48"}
    )
    assert page.status_code in (200, 303)
    assert admin.get("/api/v1/sleep-policy").json() == {
        "sleep_after_hours": 4,
        "sleep_max_hours": 48,
        "sleep_quiet_hours": "",
        "sleep_weekends": False,
        "sleep_time_zone": "UTC",
    }
    zone = admin.api(
        "PUT",
        "/api/v1/sleep-policy",
        {"sleep_after_hours": 4, "sleep_quiet_hours": "22:00-07:00", "sleep_time_zone": "Berlin"},
    )
    assert zone.status_code == 422
    assert "is not a time zone" in zone.json()["errors"]["sleep_time_zone"]
    quiet = admin.form(
        "/admin/pools/sleep-policy",
        {
            "sleep_after_hours": "",
            "sleep_max_hours": "48",
            "sleep_quiet_hours": "22:00-07:00",
            "sleep_time_zone": "Europe/Berlin",
            "sleep_weekends": "on",
        },
    )
    assert quiet.status_code in (200, 303)
    assert lead.get("/api/v1/sleep-policy").json()["sleep_quiet_hours"] == "22:00-07:00"
    shown = text_of(lead.get("/teams/1").text)
    assert "(an idle hour in quiet hours (22:00-07:00 and weekends, Europe/Berlin))" in shown
    form = admin.form(
        "/admin/pools/sleep-policy", {"sleep_after_hours": "x", "sleep_max_hours": "48"}
    )
    assert form.status_code == 422
    assert "Asleep after idle hours: a whole number of hours." in text_of(form.text)
    with unit_of_work(portal_of(app).session_factory) as session:
        assert repo.get_org(session).sleep_after_hours is None


def test_a_wake_is_told_as_long_as_the_wakes_measured_here_took(app: FastAPI) -> None:
    """Before any wake the pages say 30 s; then the median of the last wakes measured
    (asked → answering), rounded up to 5 s; a wake by hand (no time) does not count."""
    demo_sleep(app)
    lead = client_for(app, "lead-recommender@example.org")
    with unit_of_work(portal_of(app).session_factory) as session:
        assert sleep.wake_seconds(session) == 30
        for seconds in (12.0, 14.2, 41.0, None):
            audit.record(
                session,
                actor=None,
                event=Event.VCLUSTER_AWAKE,
                summary="awake",
                details={"seconds": seconds},
            )
    assert "It answers again in about 15 s" in text_of(lead.get("/teams/3").text)
    response = lead.api("POST", "/api/v1/teams/3/kubeconfig")
    assert response.status_code == 503
    assert response.headers["Retry-After"] == "15"
    assert "ask again in about 15 s" in response.json()["detail"]


def test_a_lead_chooses_the_teams_idle_hours_on_the_page(app: FastAPI, lead: Client) -> None:
    demo_sleep(app)
    page = lead.get("/teams/1").text
    assert 'action="/teams/1/sleep-hours"' in page
    assert 'id="keep-awake"' in page  # where the sleep-soon notice leads
    assert "idle hours (1 to 168; empty: the default, 8)" in text_of(page)
    done = lead.form("/teams/1/sleep-hours", {"sleep_after_hours": "4"}, follow_redirects=True)
    assert "nlp's cluster sleeps after 4 idle hours." in text_of(done.text)
    assert re.search(r"it sleeps in [34] h \(4 idle hours\)", text_of(done.text))
    assert lead.get("/api/v1/teams/1").json()["sleep"]["sleep_after_hours"] == 4
    lines = text_of(lead.get("/teams/1").text)
    assert "nlp's vCluster sleeps after 4 idle hours" in lines  # the activity line
    for typed, said in (
        ("500", "Not changed: Sleep after (idle hours): Choose between 1 and 168 hours."),
        ("0", "Not changed: Sleep after (idle hours): Choose between 1 and 168 hours."),
        ("four", "Not changed: Sleep after (idle hours): Choose a whole number of hours."),
    ):
        refused = lead.form(
            "/teams/1/sleep-hours", {"sleep_after_hours": typed}, follow_redirects=True
        )
        assert said in text_of(refused.text), typed
    assert lead.get("/api/v1/teams/1").json()["sleep"]["sleep_after_hours"] == 4
    back = lead.form("/teams/1/sleep-hours", {"sleep_after_hours": ""}, follow_redirects=True)
    assert "nlp's cluster sleeps by the org's policy." in text_of(back.text)
    assert lead.get("/api/v1/teams/1").json()["sleep"]["sleep_after_hours"] is None
    # A member sees when it sleeps but may not change it; nor may a lead of another team.
    member = client_for(app, "member-nlp@example.org")
    assert 'action="/teams/1/sleep-hours"' not in member.get("/teams/1").text
    assert member.form("/teams/1/sleep-hours", {"sleep_after_hours": "2"}).status_code == 403
    other = client_for(app, "lead-vision@example.org")
    assert other.form("/teams/1/sleep-hours", {"sleep_after_hours": "2"}).status_code in (
        403,
        404,
    )
    assert lead.get("/api/v1/teams/1").json()["sleep"]["sleep_after_hours"] is None
