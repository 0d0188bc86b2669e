"""The team page's provisioning progress never runs backwards: a step once in place counts
while it is re-applied, and the step list says what is happening to it now."""

from __future__ import annotations

import re

from fastapi import FastAPI
from sqlalchemy import update

from app.adapters.simulated import SimulatedBackend
from app.core.db import unit_of_work
from app.core.models import Step, TeamSchedule, utcnow
from app.runtime import portal_of
from tests.web.conftest import Client, client_for, portal


def shown(lead: Client, team_id: int) -> tuple[int, list[str]]:
    """The progress bar's figure and each step's condition, as the page shows them."""
    text = lead.get(f"/teams/{team_id}").text
    found = re.search(r'role="progressbar"[^>]*aria-valuenow="(\d+)"', text)
    assert found, "the page shows the progress"
    return int(found.group(1)), re.findall(r'<li class="step step-(\w+)"', text)


def one_pass(app: FastAPI, finished: Step | None = None) -> None:
    """A reconcile pass, after the simulated cluster's ``finished`` step took its time."""
    backend = portal_of(app).backend
    assert isinstance(backend, SimulatedBackend)
    if finished is not None:
        backend.finish(finished, "asr")
    with unit_of_work(portal_of(app).session_factory) as session:
        session.execute(update(TeamSchedule).values(next_attempt_at=utcnow()))
    portal_of(app).reconciler.run_once()


def test_a_step_put_back_while_provisioning_does_not_lower_the_progress(db_url: str) -> None:
    for app in portal(db_url, simulated_step_seconds=30.0):
        lead = client_for(app, "lead-asr@example.org")
        admin = client_for(app, "admin@example.org", admin=True)
        asked = lead.api(
            "POST", "/api/v1/requests", {"name": "asr", "gpu_quota": "0.01", "gpu_limit": "1"}
        ).json()
        admin.api("POST", f"/api/v1/requests/{asked['id']}/approve", {})
        team_id = asked["team_id"]
        one_pass(app)
        one_pass(app, Step.QUEUE)
        one_pass(app, Step.NAMESPACE)
        assert shown(lead, team_id) == (40, ["done", "done", "progressing", "pending", "pending"])
        # Someone deletes the namespace meanwhile: the portal makes it again.
        backend = portal_of(app).backend
        assert isinstance(backend, SimulatedBackend)
        backend.delete_object(Step.NAMESPACE, "asr")
        one_pass(app)
        assert shown(lead, team_id) == (
            40,
            ["done", "progressing", "progressing", "pending", "pending"],
        )
        one_pass(app, Step.NAMESPACE)
        one_pass(app, Step.VCLUSTER)
        progress, steps = shown(lead, team_id)
        assert progress == 60
        assert steps[:3] == ["done", "done", "done"]
