"""In-app notifications: each event reaches the right people, in the transaction of the
change, never the person who caused it; the bell counts unread ones."""

from __future__ import annotations

from fastapi import FastAPI
from sqlalchemy import update

from app.core.db import unit_of_work
from app.core.models import Step, TeamSchedule, utcnow
from app.runtime import portal_of
from tests.parts import simulated_backend
from tests.web.conftest import Client, client_for

NLP = 1


def titles(person: Client) -> list[str]:
    answer = person.get("/api/v1/notifications")
    assert answer.status_code == 200
    return [n["title"] for n in answer.json()["items"]]


def unread(person: Client) -> int:
    return int(person.get("/api/v1/notifications").json()["unread"])


def test_a_request_its_decision_and_the_ready_cluster_are_told(
    app: FastAPI, admin: Client, lead: Client
) -> None:
    asked = lead.api(
        "POST", "/api/v1/requests", {"name": "speech", "gpu_quota": "0.01", "gpu_limit": "1"}
    )
    assert asked.status_code == 201, asked.text
    assert titles(admin)[0] == (
        "Nlp lead asks for cluster speech: guarantee 0.01 GPU, limit 1 GPU, weight 1, priority 100"
    )
    assert not any("speech" in t for t in titles(lead)), "not to the one who asked"
    request_id = asked.json()["id"]
    admin.api(
        "POST",
        f"/api/v1/requests/{request_id}/approve",
        {"adjusted": {"gpu_quota": "0.01", "gpu_limit": "0.5"}, "reason": ""},
    )
    assert titles(lead)[0] == "The cluster for speech was approved with changes: GPU limit 1 → 0.5"
    portal_of(app).reconciler.run_once()
    assert titles(lead)[0] == "speech is ready: download your kubeconfig"
    # The bell shows the count; marking read clears it.
    bell = lead.get("/notifications/bell").text
    assert f'<span class="badge">{unread(lead)}</span>' in bell
    # Every page carries the count itself (no script needed to see it).
    count = unread(lead)
    assert count > 0
    for path in ("/teams", "/teams/1", "/audit"):
        page = lead.get(path).text
        shown = page.split('id="bell"')[1].split("</a>")[0]
        assert f'aria-label="Notifications: {count} unread"' in shown, path
        assert f'<span class="badge">{count}</span>' in shown, path
    page = lead.get("/notifications").text
    assert "speech is ready: download your kubeconfig" in page
    assert lead.form("/notifications/read").status_code in (200, 303)
    assert unread(lead) == 0
    assert '<span class="badge">' not in lead.get("/notifications/bell").text
    assert (
        '<span class="badge">' not in lead.get("/teams").text.split('id="bell"')[1].split("</a>")[0]
    )


def test_a_rejection_a_failure_and_a_new_member_are_told(
    app: FastAPI, admin: Client, lead: Client
) -> None:
    change = lead.api(
        "POST", f"/api/v1/teams/{NLP}/quota-requests", {"gpu_quota": "0.2", "gpu_limit": "1"}
    )
    assert change.status_code == 201
    assert titles(admin)[0].startswith("Nlp lead asks to change nlp's quota")
    admin.api("POST", f"/api/v1/requests/{change.json()['id']}/reject", {"reason": "pool full"})
    assert titles(lead)[0] == "The quota change for nlp was rejected: pool full"

    lead.api("POST", f"/api/v1/teams/{NLP}/members", {"email": "new@example.org", "role": "member"})
    newcomer = client_for(app, "new@example.org")
    assert titles(newcomer) == ["Nlp lead made you a member of nlp"]

    backend = simulated_backend(app)
    asked = lead.api(
        "POST", "/api/v1/requests", {"name": "doomed", "gpu_quota": "0", "gpu_limit": "0.1"}
    )
    approved = admin.api("POST", f"/api/v1/requests/{asked.json()['id']}/approve", {})
    assert approved.status_code == 200, approved.text
    backend.inject_failure(Step.QUEUE, team="doomed", times=100, message="quota webhook down")
    for _ in range(12):
        portal_of(app).reconciler.run_once()
        with unit_of_work(portal_of(app).session_factory) as session:
            session.execute(update(TeamSchedule).values(next_attempt_at=utcnow()))
    # Told once, after the third failure in a row, to the lead and the admins.
    told = "Provisioning doomed failed 3 times, retrying: simulated: quota webhook down"
    assert titles(lead).count(told) == 1, titles(lead)
    assert titles(admin).count(told) == 1
