"""Every page, as the people who use it, through real HTTP requests to the app."""

from __future__ import annotations

import html
import re
import threading
from collections.abc import Sequence
from datetime import datetime
from typing import Any

import pytest
from fastapi import FastAPI
from sqlalchemy import event
from sqlalchemy.orm import Session

from app.core.models import Step
from app.runtime import portal_of
from tests.web.conftest import Client, client_for

NLP, VISION = 1, 2


def toasts(html: str) -> list[str]:
    return re.findall(r'class="toast toast-\w+" role="status">([^<]+)<', html)


def test_home_sends_people_where_they_belong(
    anonymous: Client, lead: Client, admin: Client
) -> None:
    assert anonymous.get("/", follow_redirects=False).headers["location"] == "/login"
    assert lead.get("/", follow_redirects=False).headers["location"] == "/teams"
    assert admin.get("/", follow_redirects=False).headers["location"] == "/admin"


def test_anonymous_pages_redirect_to_sign_in(anonymous: Client) -> None:
    response = anonymous.get(f"/teams/{NLP}", follow_redirects=False)
    assert response.status_code == 303
    assert response.headers["location"] == f"/login?next=/teams/{NLP}"
    htmx = anonymous.get("/admin", headers={"HX-Request": "true"}, follow_redirects=False)
    assert htmx.status_code == 401
    assert htmx.headers["HX-Redirect"] == "/login?next=/admin"


def test_sign_in_page_says_it_is_the_development_sign_in(anonymous: Client) -> None:
    page = anonymous.get("/login").text
    assert "Development sign-in" in page
    assert "Development mode: anyone can sign in as anyone" in page
    assert "admin@example.org" in page


def test_sign_in_redirects_only_to_local_paths(anonymous: Client) -> None:
    anonymous.refresh_csrf()
    for target, expected in (
        ("/teams/1", "/teams/1"),
        ("https://evil.example", "/"),
        ("//evil", "/"),
    ):
        response = anonymous.form(
            "/login/dev",
            {"email": "lead-nlp@example.org", "role": "lead", "next": target},
            follow_redirects=False,
        )
        assert response.headers["location"] == expected
        anonymous.refresh_csrf()


def test_every_page_says_the_cluster_is_simulated(lead: Client, admin: Client) -> None:
    for client, url in ((lead, "/teams"), (lead, f"/teams/{NLP}"), (admin, "/admin")):
        assert "Simulated cluster: nothing on these pages exists" in client.get(url).text


def test_lead_sees_own_team_only(lead: Client) -> None:
    page = lead.get("/teams").text
    assert 'href="/teams/1"' in page
    assert 'href="/teams/2"' not in page
    assert lead.get(f"/teams/{VISION}").status_code == 404
    assert lead.form(f"/teams/{VISION}/kubeconfig").status_code == 404
    assert lead.get(f"/teams/{VISION}/status").status_code == 404


def test_lead_cannot_open_admin_pages(lead: Client) -> None:
    for url in ("/admin", "/admin/requests"):
        response = lead.get(url)
        assert response.status_code == 403
        assert "only a portal admin may do this" in response.text


def test_a_member_can_download_but_not_change_the_quota(app: FastAPI) -> None:
    member = client_for(app, "member-nlp@example.org")
    page = member.get(f"/teams/{NLP}").text
    assert "Download kubeconfig" in page
    assert "Change quota" not in page
    assert "Decommission" not in page
    member.refresh_csrf()
    download = member.form(f"/teams/{NLP}/kubeconfig", {"ttl": "1h"})
    assert download.status_code == 200
    assert "(role inside the vCluster: edit)" in download.text


def test_team_page_shows_status_gauge_pod_spec_and_kubeconfig(lead: Client) -> None:
    page = lead.get(f"/teams/{NLP}").text
    assert "Download kubeconfig" in page
    assert "kai.scheduler/queue: team-nlp" in page
    assert "schedulerName: kai-scheduler" in page
    assert "gpu-fraction: &#34;0.33&#34;" in page or 'gpu-fraction: "0.33"' in page
    assert "key: nvidia.com/gpu" in page
    assert 'data-gauge="guaranteed">0.33<' in page
    assert 'data-gauge="limit">1<' in page
    assert re.search(r'data-gauge="allocated">[0-9.]+<', page), "usage is shown"
    status_tag = page.split('id="status"')[1].split(">")[0]
    assert 'hx-trigger="every 15s"' in status_tag, "ready: only a slow look for changes"


def statements_of(app: FastAPI, client: Client, url: str) -> tuple[str, list[str]]:
    """The page at ``url`` and the statements its request issued (on its own thread)."""
    seen: list[str] = []

    def count(_conn: Any, _cursor: Any, statement: str, *_args: Any) -> None:
        if threading.current_thread().name.startswith("AnyIO worker"):  # the request's
            seen.append(statement)

    engine = portal_of(app).read_engine  # a GET's (on SQLite the one engine)
    event.listen(engine, "before_cursor_execute", count)
    try:
        page = client.get(url).text
    finally:
        event.remove(engine, "before_cursor_execute", count)
    assert any("web_sessions" in s for s in seen), "the caller's lookup is among them"
    return page, seen


LISTS = ("cluster_requests", "_grants", "audit_")  # the team page's lists' tables


def test_the_team_page_is_one_statement(app: FastAPI, lead: Client) -> None:
    """Its caller, the team (its pool, steps and suggestion) and its requests, members,
    kubeconfig grants, events, temporary quota grants, quota lines by pool and budgets:
    one statement on PostgreSQL, each read on its own on SQLite (in-process, no round
    trip to save)."""
    lead.form(f"/teams/{NLP}/kubeconfig", {"ttl": "8h"})  # a grant to show
    lead.get(f"/teams/{NLP}")  # the caches a page fills (the org, the usage history)
    page, seen = statements_of(app, lead, f"/teams/{NLP}")
    assert "cluster-admin · expires" in page
    assert "downloaded a personal kubeconfig" in page
    assert 'data-gauge="guaranteed">0.33<' in page, "the team's own figures"
    assert "lead-nlp@example.org" in page, "its members"
    lists = [s for s in seen if any(t in s for t in LISTS)]
    if portal_of(app).engine.dialect.name == "postgresql":
        # (Its template's versions are read on their own, when it has one: this one has.)
        mine = [s for s in seen if any(t in s for t in (*LISTS, "web_sessions", "_steps"))]
        assert len(mine) == 1, mine
        assert all(t in mine[0] for t in ("web_sessions", "provisioning_steps", "team_members"))
        # The gauges' and forms' pools and the month's budgets too, read nowhere else.
        assert all(t in mine[0] for t in ("team_quota_lines", "gpu_budgets"))
        assert [s for s in seen if "gpu_budgets" in s] == mine
    else:
        # requests, kubeconfig grants, events, temporary quota grants
        assert len(lists) == 4, lists


def test_the_live_share_gauge_reads_none_of_the_lists(app: FastAPI, lead: Client) -> None:
    """Its poll (every 10 s while the numbers move) reads the gauge's figures only."""
    lead.get(f"/teams/{NLP}")
    gauge, seen = statements_of(app, lead, f"/teams/{NLP}/share")
    assert 'data-gauge="guaranteed">0.33<' in gauge
    assert 'data-gauge="limit">1<' in gauge
    assert [s for s in seen if any(t in s for t in LISTS)] == []


def test_kubeconfig_download_is_audited(lead: Client, admin: Client) -> None:
    response = lead.form(f"/teams/{NLP}/kubeconfig", {"ttl": "8h"})
    assert response.status_code == 200
    assert response.headers["content-disposition"] == 'attachment; filename="kubeconfig-nlp.yaml"'
    assert response.headers["cache-control"] == "no-store"
    assert "SIMULATED" in response.text
    assert "current-context: nlp/lead-nlp@example.org" in response.text
    audit = admin.get("/audit?action=kubeconfig").text
    assert "downloaded a personal kubeconfig for nlp (cluster-admin, expires in 8h)" in audit
    assert "lead-nlp@example.org" in audit
    page = lead.get(f"/teams/{NLP}").text
    access = page.split('id="access"')[1].split("</section>")[0]
    assert "lead-nlp@example.org" in access
    assert "cluster-admin · expires" in access


def test_a_kubeconfig_lifetime_outside_the_bounds_says_what_to_change(lead: Client) -> None:
    too_long = lead.form(f"/teams/{NLP}/kubeconfig", {"ttl": "30d"}, follow_redirects=True)
    assert "No kubeconfig: Valid for: the longest kubeconfig lasts 7d" in too_long.text
    nonsense = lead.api("POST", f"/api/v1/teams/{NLP}/kubeconfig?ttl=soon")
    assert nonsense.status_code == 422
    assert "'soon' is not a duration: use 30m, 8h or 7d" in nonsense.text


def test_request_form_validates_inline(lead: Client) -> None:
    response = lead.form(
        "/teams/new/validate",
        {"name": "NLP", "gpu_quota": "0.333", "gpu_limit": "3"},
        headers={"HX-Request": "true"},
    )
    assert response.status_code == 200
    assert 'id="feedback"' in response.text
    assert "<html" not in response.text, "a fragment, not a page"
    errors = dict(
        re.findall(
            r'id="err-(\w+)" class="error" role="alert" hx-swap-oob="true">([^<]*)<', response.text
        )
    )
    assert errors["name"] == "use lower-case letters only: &#39;nlp&#39;"
    assert "at most two decimals" in errors["gpu_quota"]
    assert "cannot exceed the pool of 1 GPU" in errors["gpu_limit"]
    assert errors["purpose"] == ""


def test_request_form_preview_shows_the_pool_after_approval(lead: Client) -> None:
    response = lead.form(
        "/teams/new/validate",
        {"name": "speech", "gpu_quota": "0.5", "gpu_limit": "1"},
        headers={"HX-Request": "true"},
    )
    assert "Over the pool by 0.49 GPU" in response.text
    assert "at most 0.01 GPU" in response.text


def test_invalid_request_keeps_what_was_typed(lead: Client) -> None:
    response = lead.form(
        "/teams", {"name": "nlp", "gpu_quota": "0.2", "gpu_limit": "1", "purpose": "keep me"}
    )
    assert response.status_code == 422
    assert "already has a cluster or a pending request" in response.text
    assert "keep me" in response.text


def test_whole_loop_through_the_pages(app: FastAPI, admin: Client) -> None:
    lead = client_for(app, "lead-speech@example.org")
    response = lead.form(
        "/teams",
        {"name": "speech", "gpu_quota": "0.01", "gpu_limit": "0.5", "purpose": "ASR"},
        follow_redirects=False,
    )
    assert response.status_code == 303
    team_url = response.headers["location"]
    page = lead.get(team_url).text
    assert "Waiting for an admin" in page
    assert "Download kubeconfig" not in page
    version = re.search(r'data-version="([0-9a-f]+)"', page).group(1)  # type: ignore[union-attr]
    assert 'hx-trigger="every 15s"' in page, "a waiting page still looks for the decision"
    poll = {"HX-Request": "true", "X-Page-Version": version}
    unchanged = lead.get(team_url + "/status", headers=poll)
    assert "HX-Trigger" not in unchanged.headers
    assert 'id="quota-card"' not in unchanged.text, "nothing else is sent while nothing changed"

    pending = admin.get("/admin/requests").text
    request_id = re.search(r"/admin/requests/(\d+)/approve", pending).group(1)  # type: ignore[union-attr]
    assert "Fits: the pool would be 1 of 1 GPU guaranteed" in pending
    approved = admin.form(f"/admin/requests/{request_id}/approve", {"mode": "as_asked"})
    assert "Approved speech as asked." in toasts(approved.text)

    # The open page's next poll learns of the approval and replaces the dependent panels.
    status = lead.get(team_url + "/status", headers=poll)
    assert 'hx-trigger="every 2s"' in status.text, "polls quickly while provisioning"
    assert status.headers["HX-Trigger"] == "team-changed"
    assert '<section class="card" id="quota-card" hx-swap-oob="true">' in status.text
    assert '<section class="card" id="team-requests" hx-swap-oob="true">' in status.text
    portal_of(app).reconciler.run_once()
    version = re.search(r'data-version="([0-9a-f]+)"', status.text).group(1)  # type: ignore[union-attr]
    done = lead.get(team_url + "/status", headers={**poll, "X-Page-Version": version})
    assert 'hx-trigger="every 15s"' in done.text, "slows down once ready"
    assert done.headers["HX-Trigger"] == "team-changed"
    assert 'id="team-actions" hx-swap-oob="true"' in done.text
    assert "Download kubeconfig" in done.text, "the download button appears without a reload"
    assert "Use the cluster" in done.text
    assert lead.form(team_url + "/kubeconfig").status_code == 200


def test_admin_adjusts_and_rejects(app: FastAPI, admin: Client) -> None:
    speech = client_for(app, "lead-speech@example.org")
    speech.form("/teams", {"name": "speech", "gpu_quota": "0.2", "gpu_limit": "1"})
    audio = client_for(app, "lead-audio@example.org")
    audio.form("/teams", {"name": "audio", "gpu_quota": "0.2", "gpu_limit": "1"})
    pending = admin.get("/admin/requests").text
    ids = re.findall(r"/admin/requests/(\d+)/approve", pending)
    speech_id, audio_id = ids[0], ids[2]
    assert "it fits: the pool would be 1 of 1 GPU guaranteed" in pending  # the preview's
    refused = admin.form(f"/admin/requests/{speech_id}/approve", {"mode": "as_asked"})
    assert refused.status_code == 409
    card = refused.text[refused.text.index(f'id="request-{speech_id}"') :]
    assert "Not approved:" in card[: card.index("</article>")]
    assert "0.01 GPU is free" in card[: card.index("</article>")]
    adjusted = admin.form(
        f"/admin/requests/{speech_id}/approve",
        {
            "mode": "adjusted",
            "gpu_quota": "0.01",
            "gpu_limit": "1",
            "over_quota_weight": "1",
            "priority": "100",
            "reason": "pool is full",
        },
    )
    assert "Approved speech with adjusted values." in toasts(adjusted.text)
    no_reason = admin.form(f"/admin/requests/{audio_id}/reject", {"reason": ""})
    assert "say why" in toasts(no_reason.text)[0]
    rejected = admin.form(f"/admin/requests/{audio_id}/reject", {"reason": "no GPUs left"})
    assert f"Rejected request #{audio_id}." in toasts(rejected.text)
    audio_page = audio.get("/teams").text
    assert "rejected" in audio_page


def test_quota_change_and_decommission_from_the_team_page(
    app: FastAPI, lead: Client, admin: Client
) -> None:
    form = lead.get(f"/teams/{NLP}/quota").text
    assert 'value="0.33"' in form
    bad = lead.form(f"/teams/{NLP}/quota", {"gpu_quota": "2", "gpu_limit": "1"})
    assert bad.status_code == 422
    assert "cannot be below the guarantee" in bad.text
    sent = lead.form(f"/teams/{NLP}/quota", {"gpu_quota": "0.3", "gpu_limit": "0.9"})
    assert "Quota change sent to the admins." in toasts(sent.text)
    assert "quota change" in admin.get("/admin/requests").text
    unconfirmed = lead.form(f"/teams/{NLP}/decommission", {"confirm": "nl"})
    assert "Not decommissioned: type nlp to confirm." in toasts(unconfirmed.text)
    assert lead.get("/api/v1/teams/1").json()["status"] == "ready"
    gone = lead.form(f"/teams/{NLP}/decommission", {"confirm": "nlp"})
    assert "Decommissioning nlp." in toasts(gone.text)
    portal_of(app).reconciler.run_once()
    page = lead.get(f"/teams/{NLP}").text
    assert "decommissioned" in page
    assert "quota change" not in admin.get("/admin/requests").text, "pending change cancelled"
    # Its people no longer change: no controls, and the forms are refused.
    assert f'action="/teams/{NLP}/members"' not in page
    assert "/remove" not in page
    added = lead.form(f"/teams/{NLP}/members", {"email": "x@example.org", "role": "member"})
    assert "nlp is decommissioned: its members no longer change." in html.unescape(added.text)
    # "Your teams" lists it apart, under the live ones, with no gauge.
    mine = lead.get("/teams").text
    assert f'class="card team-card" href="/teams/{NLP}"' not in mine
    past = mine.split('data-testid="past-teams"')[1]
    assert f'<a href="/teams/{NLP}">nlp</a>' in past
    assert "Decommissioned (1)" in past


def test_other_lead_cannot_act_on_a_team(other_lead: Client) -> None:
    assert other_lead.form(f"/teams/{NLP}/decommission").status_code == 404
    assert (
        other_lead.form(f"/teams/{NLP}/quota", {"gpu_quota": "1", "gpu_limit": "1"}).status_code
        == 404
    )
    assert other_lead.form(f"/teams/{VISION}/retry").status_code == 403


def test_failures_show_on_the_page_and_admin_can_retry(app: FastAPI, admin: Client) -> None:
    injected = admin.form("/admin/simulate/failure", {"step": "vcluster", "team": "", "times": "1"})
    assert "The next 1 attempt(s) at vcluster will fail." in toasts(injected.text)
    speech = client_for(app, "lead-speech@example.org")
    speech.form("/teams", {"name": "speech", "gpu_quota": "0.01", "gpu_limit": "1"})
    request_id = re.findall(r"/admin/requests/(\d+)/approve", admin.get("/admin/requests").text)[0]
    admin.form(f"/admin/requests/{request_id}/approve", {"mode": "as_asked"})
    portal_of(app).reconciler.run_once()
    page = admin.get("/teams/4").text
    assert "Attempt 1 failed:" in page
    assert "injected failure while applying vcluster" in page
    assert "Retry now" in page
    assert "injected failure" in admin.get("/admin").text
    retried = admin.form("/teams/4/retry")
    assert "Retrying speech now." in toasts(retried.text)
    portal_of(app).reconciler.run_once()
    assert "Attempt 1 failed" not in admin.get("/teams/4").text


def test_bad_failure_injection_is_explained(admin: Client) -> None:
    response = admin.form("/admin/simulate/failure", {"step": "nothing", "times": "1"})
    assert "Choose a step" in toasts(response.text)[0]
    assert {s.value for s in Step} <= set(
        re.findall(r"<option>(\w+)</option>", admin.get("/admin").text)
    )


def test_admin_overview_filters_and_sorts(admin: Client) -> None:
    page = admin.get("/admin").text
    assert "GPUs in the pool" in page
    assert "0.99 <small>(99%)</small>" in page
    rows = re.findall(r'<a href="/teams/\d+"><b>(\w+)</b>', page)
    assert rows == ["nlp", "recommender", "vision"]
    fragment = admin.get("/admin?q=vis&sort=usage", headers={"HX-Request": "true"}).text
    assert fragment.startswith('\n<div id="teams-table">') or 'id="teams-table"' in fragment
    assert "<html" not in fragment
    assert re.findall(r'<a href="/teams/\d+"><b>(\w+)</b>', fragment) == ["vision"]


def test_the_overview_is_one_statement(app: FastAPI, admin: Client) -> None:
    """Its caller, the org-wide figures and the page's teams: one statement on
    PostgreSQL (the caller and each read on its own on SQLite)."""
    admin.get("/admin")  # the caches a page fills (the org view, the drift lines)
    page, seen = statements_of(app, admin, "/admin")
    assert "0.99 <small>(99%)</small>" in page
    rows = re.findall(r'<a href="/teams/\d+"><b>(\w+)</b>', page)
    assert rows == ["nlp", "recommender", "vision"]
    # (The org view is read on its own when the usage figures it holds are out of date.)
    mine = [s for s in seen if any(t in s for t in ("web_sessions", "FROM orgs", "AS page"))]
    postgres = portal_of(app).engine.dialect.name == "postgresql"
    assert len(mine) == (1 if postgres else 3), mine


def test_pool_change_below_the_guarantees_needs_a_confirmation(admin: Client) -> None:
    typed = {"gpus": "0.5", "cpu_cores": "40", "memory_gb": "160"}
    refused = admin.form("/admin/pool", typed)
    assert refused.status_code == 422
    form = refused.text[refused.text.index('id="pool-form"') :]
    assert "Pool not changed: 0.99 GPU are already guaranteed to teams: enter at least 0.99" in form
    assert 'name="gpus" value="0.5"' in form, "what was typed stays in the form"
    assert 'name="below_committed" value="confirm"' in form
    assert "Pool is now" not in refused.text
    assert admin.get("/api/v1/pool").json()["gpus"] == "1"
    lost = admin.form("/admin/pool", typed | {"below_committed": "confirm"})
    assert "Pool is now 0.5 GPU." in toasts(lost.text)
    assert 'data-testid="pool-overcommitted"' in lost.text
    assert "0.49 GPU more than the pool" in lost.text
    changed = admin.form("/admin/pool", {"gpus": "8", "cpu_cores": "40", "memory_gb": "160"})
    assert "Pool is now 8 GPU." in toasts(changed.text)
    assert 'data-testid="pool-overcommitted"' not in changed.text


def test_audit_page_shows_leads_only_their_teams(lead: Client, admin: Client) -> None:
    mine = lead.get("/audit").text
    assert "requested cluster nlp" in mine
    assert "requested cluster vision" not in mine
    everything = admin.get("/audit").text
    assert "requested cluster vision" in everything
    assert "example pool ml-org" in everything


def test_security_headers_and_cookie(anonymous: Client) -> None:
    response = anonymous.get("/login")
    assert response.headers["x-frame-options"] == "DENY"
    assert "script-src 'self'" in response.headers["content-security-policy"]
    cookie = response.headers["set-cookie"]
    assert "httponly" in cookie.lower()
    assert "samesite=lax" in cookie.lower()


def test_admin_overview_pages_through_many_teams(
    admin: Client, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("app.web.pages.admin.PAGE_SIZE", 2)
    first = admin.get("/admin").text
    assert re.findall(r'<a href="/teams/\d+"><b>(\w+)</b>', first) == ["nlp", "recommender"]
    assert "3 teams · page 1 of 2" in first
    second = admin.get("/admin?status=live&sort=name&q=&page=2").text
    assert re.findall(r'<a href="/teams/\d+"><b>(\w+)</b>', second) == ["vision"]
    assert "0.99 <small>(99%)</small>" in second, "the summary counts every team, not the page"
    past_the_end = admin.get("/admin?page=99").text  # the list shrank: its last page
    assert re.findall(r'<a href="/teams/\d+"><b>(\w+)</b>', past_the_end) == ["vision"]
    assert "3 teams · page 2 of 2" in past_the_end
    nothing = admin.get("/admin?q=zzz").text
    assert "No teams match." in nothing
    assert "0 teams" in nothing


def test_the_overview_counts_every_live_team_through_decisions(
    app: FastAPI, admin: Client, lead: Client
) -> None:
    """The list's total: the teams holding a guarantee come from the ready view and the
    submitted ones from the database; every decision keeps the two in step."""

    def total() -> str:
        page = admin.get("/admin").text
        found = re.search(r'<span class="small muted">(\d+) teams?', page)
        assert found is not None, page
        return found.group(1)

    assert total() == "3"
    for name in ("speech", "audio"):
        asking = client_for(app, f"lead-{name}@example.org")
        asking.form("/teams", {"name": name, "gpu_quota": "0.01", "gpu_limit": "1"})
    assert total() == "5", "submitted teams are live"
    ids = re.findall(r"/admin/requests/(\d+)/approve", admin.get("/admin/requests").text)
    admin.form(f"/admin/requests/{ids[0]}/approve", {"mode": "as_asked"})
    assert total() == "5", "approved: the same team, now holding a guarantee"
    admin.form(f"/admin/requests/{ids[-1]}/reject", {"reason": "no GPUs left"})
    assert total() == "4", "a rejected team is not live"
    lead.form(f"/teams/{NLP}/decommission", {"confirm": "nlp"})
    assert total() == "4", "still live while decommissioning"
    for _ in range(3):
        portal_of(app).reconciler.run_once()
    assert total() == "3", "a decommissioned team is gone from the list at once"


def fix_usage(
    app: FastAPI, monkeypatch: pytest.MonkeyPatch, values: dict[str, tuple[float, float]]
) -> None:
    from app.usage.sources import QueueUsage

    def usage(names: list[str]) -> dict[str, QueueUsage]:
        return {n: QueueUsage(*values[n]) for n in names if n in values}

    monkeypatch.setattr(portal_of(app).backend, "usage", usage)
    portal_of(app).usage_cache.ttl = 0


FIXED = {"team-nlp": (0.8, 1.0), "team-vision": (0.1, 0.1), "team-recommender": (0.1, 0.1)}


def test_team_page_explains_the_share(
    app: FastAPI, lead: Client, monkeypatch: pytest.MonkeyPatch
) -> None:
    fix_usage(app, monkeypatch, FIXED)
    page = lead.get(f"/teams/{NLP}").text
    assert 'data-gauge="allocated">0.8<' in page
    assert 'data-gauge="borrowed">0.47<' in page
    assert 'data-gauge="requested">1<' in page
    assert 'data-gauge="fair">0.8<' in page
    assert 'data-explain="busy">0.34 GPU<' in page, "the oldest of three busy teams"
    assert 'data-explain="usable">0.8<' in page
    assert "nlp +0.47" in page
    why = " ".join(page.split('data-explain="why">')[1].split("</p>")[0].split())
    assert why.startswith(
        "0.2 GPU of your work is waiting because every GPU of the cluster is busy and you "
        "already use your fair share of 0.8: it starts when other teams need less."
    )


def test_share_panel_polls_until_the_numbers_stop_changing(
    app: FastAPI, lead: Client, monkeypatch: pytest.MonkeyPatch
) -> None:
    fix_usage(app, monkeypatch, FIXED)
    first = lead.get(f"/teams/{NLP}/share", headers={"HX-Request": "true"}).text
    found = re.search(r'hx-get="/teams/1/share\?last=(\w+)&amp;same=0"', first)
    assert found, first[:300]
    signature = found.group(1)
    assert 'hx-trigger="every 10s, team-changed from:body"' in first
    still = lead.get(f"/teams/{NLP}/share?last={signature}&same=4").text
    assert f"last={signature}&amp;same=5" in still
    stopped = lead.get(f"/teams/{NLP}/share?last={signature}&same=5").text
    assert "hx-trigger" not in stopped
    assert "Paused: no change for a minute" in stopped
    fix_usage(app, monkeypatch, {**FIXED, "team-nlp": (0.9, 1.0)})
    moved = lead.get(f"/teams/{NLP}/share?last={signature}&same=5").text
    assert 'hx-trigger="every 10s, team-changed from:body"' in moved


def test_admin_filters_borrowing_and_waiting_teams(
    app: FastAPI, admin: Client, monkeypatch: pytest.MonkeyPatch
) -> None:
    fix_usage(app, monkeypatch, {**FIXED, "team-vision": (0.1, 0.3)})

    def names(html: str) -> list[str]:
        return re.findall(r'<a href="/teams/\d+"><b>(\w+)</b>', html)

    assert names(admin.get("/admin?status=borrowing").text) == ["nlp"]
    assert names(admin.get("/admin?status=waiting").text) == ["nlp", "vision"]
    page = admin.get("/admin").text
    assert "borrowing 0.47" in page
    assert "0.2 waiting" in page


def test_showback_csv(app: FastAPI, admin: Client) -> None:
    from datetime import UTC

    from app.core.db import unit_of_work
    from app.core.models import UsageSample

    with unit_of_work(portal_of(app).session_factory) as session:
        session.add(
            UsageSample(
                team_id=1,
                resolution="hour",
                at=datetime(2026, 11, 3, tzinfo=UTC),
                seconds=3600,
                allocated_gpu=0.5,
                requested_gpu=0.5,
                quota_gpu=0.33,
                guaranteed_gpu_s=0.33 * 3600,
                borrowed_gpu_s=0.17 * 3600,
            )
        )
    response = admin.get("/admin/showback.csv?month=2026-11")
    assert response.headers["content-type"].startswith("text/csv")
    assert response.text.splitlines() == [
        "team,month,guaranteed_gpu_hours,borrowed_gpu_hours,total_gpu_hours,pool,gpu_type,"
        "price_per_gpu_hour,cost,budget_gpu_hours,budget_used_percent",
        "nlp,2026-11,0.330,0.170,0.500,default,NVIDIA H100,,,,",
    ]
    bad = admin.get("/admin/showback.csv?month=November")
    assert bad.status_code == 422
    assert "YYYY-MM" in bad.text


@pytest.mark.parametrize("path", ["/admin", "/teams", f"/teams/{NLP}"])
def test_ids_are_unique_on_pages_with_many_gauges(admin: Client, path: str) -> None:
    """Every gauge draws borrowed GPUs with one shared pattern, defined once per page."""
    page = admin.get(path).text
    ids = re.findall(r'\sid="([^"]+)"', page)
    assert len(page.split("<svg")) > 2, "the page shows gauges"
    assert sorted(ids) == sorted(set(ids)), [i for i in set(ids) if ids.count(i) > 1]
    assert ids.count("gauge-hatch") == 1


def test_audit_filter_with_all_teams_is_a_page_not_an_error(admin: Client) -> None:
    page = admin.get("/audit", params={"team_id": "", "action": ""})
    assert page.status_code == 200
    assert "request.approved" in page.text or "approved request" in page.text
    bad = admin.get("/audit", params={"team_id": "x"})
    assert bad.status_code == 422
    assert bad.headers["content-type"].startswith("text/html")
    assert "The team&#39;s number in the address" in bad.text  # its label, not its name
    assert "team_id" not in bad.text


def test_pod_specs_for_a_share_and_for_whole_gpus(lead: Client) -> None:
    page = lead.get(f"/teams/{NLP}").text
    assert "A 0.33 share of one GPU" in page
    assert "global.gpuSharing=true" in page
    assert "1 whole GPU" in page
    assert "nvidia.com/gpu: 1" in page
    assert "with a guarantee of 0.33 GPU this pod runs on borrowed capacity" in page


def test_pod_specs_use_the_configured_queue_label(db_url: str) -> None:
    from fastapi.testclient import TestClient

    from app.core.db import unit_of_work
    from app.main import create_app
    from app.teams.seed import seed_example
    from tests.conftest import settings_for

    application = create_app(settings_for(db_url, kai_queue_label="runai/queue"))
    with TestClient(application):
        with unit_of_work(portal_of(application).session_factory) as session:
            seed_example(session)
        for _ in range(6):
            portal_of(application).reconciler.run_once()
        page = client_for(application, "lead-nlp@example.org").get(f"/teams/{NLP}").text
    assert "runai/queue: team-nlp" in page
    assert "kai.scheduler/queue" not in page


def test_a_team_above_its_fair_share_is_told_why(
    app: FastAPI, lead: Client, monkeypatch: pytest.MonkeyPatch
) -> None:
    """nlp borrowed while vision was idle; vision now asks for its guarantee."""
    fix_usage(
        app,
        monkeypatch,
        {"team-nlp": (0.9, 0.9), "team-vision": (0.05, 0.5), "team-recommender": (0.05, 0.05)},
    )
    page = lead.get(f"/teams/{NLP}").text
    assert 'data-gauge="fair">0.62<' in page
    assert 'data-gauge="allocated">0.9<' in page
    above = page.split('data-explain="above"')[1].split("</dd>")[0]
    assert "more than KAI's fair share of 0.62" in above
    assert "KAI may reclaim 0.28 of them" in above
    api = lead.get(f"/api/v1/teams/{NLP}").json()["gpu_share"]
    assert (api["fair_now"], api["allocated"]) == (0.62, 0.9)


def test_gauges_say_what_each_kind_of_team_has(app: FastAPI, admin: Client, lead: Client) -> None:
    asked = lead.api(
        "POST", "/api/v1/requests", {"name": "fresh", "gpu_quota": "0.2", "gpu_limit": "0.5"}
    ).json()
    listing = lead.get("/teams").text
    card = listing.split("<h2>fresh</h2>")[1].split("</a>")[0]
    assert 'Asked guarantee <b data-gauge="guaranteed">0.2<' in card
    assert 'Asked limit <b data-gauge="limit">0.5<' in card
    assert "waiting for an admin" in card
    rejected = admin.api("POST", f"/api/v1/requests/{asked['id']}/reject", {"reason": "later"})
    assert rejected.status_code == 200
    after = lead.get("/teams").text.split("<h2>fresh</h2>")[1].split("</a>")[0]
    assert "data-gauge" not in after
    assert "No cluster: rejected." in after
    overview = admin.get("/admin").text
    assert 'id="gauge-legend"' in overview
    assert "▲ bottom: KAI's fair share now" in overview


def test_a_new_team_has_no_history_yet(lead: Client) -> None:
    page = lead.get(f"/teams/{NLP}").text
    assert 'data-history="empty"' in page
    assert "No data yet" in page


def test_the_request_form_opens_on_a_request_that_fits(lead: Client) -> None:
    """The example pool has 0.01 GPU left: the form offers that, not an over-the-pool 0.33."""
    page = lead.get("/teams/new").text
    assert 'name="gpu_quota"' in page
    assert re.search(r'name="gpu_quota"[^>]*value="0.01"', page)
    assert 'data-fit="yes"' in page
    assert "Over the pool" not in page


def test_the_request_form_gives_no_verdict_on_an_invalid_guarantee(lead: Client) -> None:
    htmx = {"HX-Request": "true", "X-CSRF-Token": lead.csrf}
    typed = {"name": "fresh", "gpu_quota": "0.0x", "gpu_limit": "1"}
    answer = lead.post("/teams/new/validate", data=typed, headers=htmx).text
    assert 'data-fit="unknown"' in answer
    assert "Fits" not in answer
    below = {"name": "fresh", "gpu_quota": "0.01", "gpu_limit": "0"}
    answer = lead.post("/teams/new/validate", data=below, headers=htmx).text
    limit_error = answer.split('id="err-gpu_limit"')[1].split("</small>")[0]
    assert "the limit (0 GPU) cannot be below the guarantee (0.01 GPU)" in limit_error
    quota_error = answer.split('id="err-gpu_quota"')[1].split("</small>")[0]
    assert "below" not in quota_error


def test_each_status_poll_updates_the_header_too(lead: Client) -> None:
    """During a retry the header said provisioning while the card said failed."""
    polled = lead.get(f"/teams/{NLP}/status", headers={"HX-Request": "true"}).text
    card = polled.split('id="status"')[1].split('id="team-pill"')[0]
    pill = polled.split('id="team-pill" hx-swap-oob="true">')[1].split("</span>")[0]
    states = [re.search(r'class="pill pill-(\w+)"', part) for part in (card, pill)]
    assert all(states)
    assert {m.group(1) for m in states if m} == {"ready"}
    page = lead.get(f"/teams/{NLP}").text
    assert '<span id="team-pill"><span class="pill pill-ready">' in page


def _drift_list(page: str) -> list[str]:
    """Each group of repairs the overview lists, as one line of text."""
    section = re.search(r'<ul class="plain small repairs">(.*?)</ul>', page, re.S)
    if not section:
        return []
    items = re.findall(r"<li [^>]*>(.*?)</li>", section.group(1), re.S)
    return [" ".join(html.unescape(re.sub(r"<[^>]+>", " ", i)).split()) for i in items]


def test_overview_groups_the_repairs_by_cause_until_an_admin_acknowledges_them(
    app: FastAPI, admin: Client, lead: Client, monkeypatch: pytest.MonkeyPatch
) -> None:
    from app.audit import repository as audit_repo
    from app.audit import service as audit_service
    from app.core.db import unit_of_work
    from app.core.events import Event

    def repaired(team_id: int | None, *entries: str) -> None:
        with unit_of_work(portal_of(app).session_factory) as session:
            audit_service.record(
                session,
                actor=None,
                event=Event.DRIFT_REPAIRED,
                team_id=team_id,
                summary="restored: " + "; ".join(entries),
                details={"repaired": list(entries)},
            )

    assert _drift_list(admin.get("/admin").text) == [], "no repairs: no section"
    repaired(NLP, "queue: queue team-nlp differs from the approved quota")
    repaired(VISION, "namespace: namespace vcluster-vision does not exist")
    repaired(NLP, "queue: queue team-nlp differs from the approved quota")
    repaired(
        VISION,
        "queue: queue team-vision differs from the approved quota",
        "template: CustomResourceDefinition x put back",
    )
    shown = _drift_list(admin.get("/admin").text)
    assert [re.sub(r" — last .*? Latest:", " | Latest:", line) for line in shown] == [
        "KAI queue put back for vision, nlp (2 times) | Latest: queue team-vision differs "
        "from the approved quota",
        "What a cluster template installs, put back inside for vision | Latest: "
        "CustomResourceDefinition x put back",
        "Host namespace put back for vision | Latest: namespace vcluster-vision does not exist",
    ]
    reads: list[tuple[int, ...]] = []
    original = audit_repo.get_lines

    def counted(session: Session, ids: Sequence[int]) -> list[audit_repo.Line]:
        reads.append(tuple(ids))
        return original(session, ids)

    monkeypatch.setattr(audit_repo, "get_lines", counted)
    admin.get("/admin")
    assert reads == [], "an unchanged list is not read again"
    # Acknowledged: gone from the overview (and audited); a lead may not.
    upto = re.search(r'name="upto" value="(\d+)"', admin.get("/admin").text)
    assert upto
    assert lead.form("/admin/repairs/acknowledge", {"upto": upto.group(1)}).status_code == 403
    done = admin.form("/admin/repairs/acknowledge", {"upto": upto.group(1)}, follow_redirects=True)
    assert "Acknowledged: the overview lists repairs made from now on." in html.unescape(done.text)
    assert _drift_list(done.text) == []
    assert "acknowledged the repairs in the cluster up to event" in admin.get("/audit").text
    # A later repair shows again; an id past the newest acknowledges no future one.
    repaired(NLP, "admission_policy: admission policy gpu-portal-queue-nlp does not exist")
    admin.form("/admin/repairs/acknowledge", {"upto": "999999"})
    repaired(NLP, "admission_policy: admission policy gpu-portal-queue-nlp does not exist")
    assert _drift_list(admin.get("/admin").text)[0].startswith(
        "Queue pinning policy put back for nlp — last"
    )


def test_overview_shows_the_chart_rollout_as_it_stands(app: FastAPI, admin: Client) -> None:
    from sqlalchemy import select

    from app.core.db import unit_of_work
    from app.core.models import Team, TeamStatus, utcnow
    from app.provisioning import repository as provisioning

    version = portal_of(app).settings.chart_version
    with unit_of_work(portal_of(app).session_factory) as session:
        for team in session.scalars(select(Team)):
            team.status = TeamStatus.READY
            team.vcluster_version = version if team.id == NLP else "0.1.0"
    with unit_of_work(portal_of(app).session_factory) as session:
        provisioning.take_turn(session, version=version, team_id=VISION, now=utcnow())
    page = admin.get("/admin").text
    title = re.search(r'id="rollout-title">([^<]+)<', page)
    assert title
    assert title.group(1) == f"Rollout: vCluster chart upgrade to {version} (from 0.1.0)"
    assert "1 of 3 teams" in page
    assert "Moving <b>vision</b>" in page
    assert re.search(r'data-rollout="waiting">Waiting \(2\): recommender, vision<', page)
    assert re.search(r'data-rollout="done">Done \(1\): nlp<', page)
    # An admin pauses it (and resumes it): audited, no other team starts meanwhile.
    paused = admin.form("/admin/rollout/pause", follow_redirects=True).text
    assert "The rollout is paused: no other team starts until it is resumed." in paused
    assert "<b>Paused.</b> paused by admin@example.org" in paused
    assert "Resume the rollout" in paused
    with unit_of_work(portal_of(app).session_factory) as session:
        assert provisioning.take_turn(session, version=version, team_id=3, now=utcnow()) == (
            f"the rollout of chart {version} is stopped: paused by admin@example.org"
        )
    admin.form("/admin/rollout/resume")
    with unit_of_work(portal_of(app).session_factory) as session:
        provisioning.stop_rollout(session, version=version, error="vision: boom", now=utcnow())
    stopped = admin.get("/admin").text
    assert "<b>Stopped.</b> vision: boom" in stopped
    # A chart older than the teams' is a downgrade, said so.
    with unit_of_work(portal_of(app).session_factory) as session:
        for team in session.scalars(select(Team)):
            team.vcluster_version = "9.0.0" if team.id != NLP else version
    title = re.search(r'id="rollout-title">([^<]+)<', admin.get("/admin").text)
    assert title
    assert title.group(1) == f"Rollout: vCluster chart downgrade to {version} (from 9.0.0)"
    with unit_of_work(portal_of(app).session_factory) as session:
        for team in session.scalars(select(Team)):
            team.vcluster_version = version
        provisioning.resume_rollout(session, version=version, now=utcnow())
    assert 'id="rollout-title"' not in admin.get("/admin").text, "done: no card"
