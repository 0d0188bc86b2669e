"""A large org's split: web replicas with the worker off, `gpu-portal work` apart. A team
asked for and approved on the web is provisioned by the separate process, and that
process hands its leases back when told to stop."""

from __future__ import annotations

import signal
import time
from typing import Any

import pytest
from sqlalchemy import select

from app.core.models import Team, TeamSchedule
from app.runtime import portal_of
from tests.web.conftest import client_for, portal, portal_command


@pytest.mark.parametrize("db_url", ["postgresql"], indirect=True)
def test_a_separate_work_process_provisions_what_the_web_approves(db_url: str) -> None:
    for app in portal(db_url, worker_enabled=False):
        lead = client_for(app, "lead-speech@example.org")
        admin = client_for(app, "admin@example.org", admin=True)
        asked = lead.api(
            "POST", "/api/v1/requests", {"name": "speech", "gpu_quota": "0.01", "gpu_limit": "1"}
        )
        assert asked.status_code == 201, asked.text
        team_id = asked.json()["team_id"]
        approved = admin.api("POST", f"/api/v1/requests/{asked.json()['id']}/approve", {})
        assert approved.status_code == 200, approved.text
        time.sleep(1)  # the web replica itself provisions nothing
        assert lead.get(f"/api/v1/teams/{team_id}").json()["status"] == "approved"

        fast = {"worker_interval_seconds": "0.2", "simulated_step_seconds": "0"}
        worker = portal_command(db_url, "work", settings=fast, log=True)
        try:
            team: dict[str, Any] = {}
            for _ in range(300):
                team = lead.get(f"/api/v1/teams/{team_id}").json()
                if team["status"] == "ready" or worker.poll() is not None:
                    break
                time.sleep(0.1)
            assert team["status"] == "ready", team
            assert [s["status"] for s in team["steps"]] == ["done"] * 5
        finally:
            worker.send_signal(signal.SIGTERM)
            output = worker.communicate(timeout=30)[0]
        assert worker.returncode == 0, output
        assert "handed back" in output
        with portal_of(app).session_factory() as session:
            held = session.scalars(
                select(Team.name).join(Team.schedule).where(TeamSchedule.lease_owner.is_not(None))
            ).all()
        assert held == []
