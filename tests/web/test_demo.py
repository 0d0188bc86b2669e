"""The demo as a person sees it across restarts: the simulated cluster lives in the
process's memory, so a restart restores it from the database and says so once (no drift
alarm per team); its vClusters carry chart versions, so a new version rolls out one team
at a time with the rollout card; and the seeded org comes with history to right-size."""

from __future__ import annotations

import re
import time

import pytest
from fastapi import FastAPI
from sqlalchemy import select, update

from app.adapters.simulated import SimulatedBackend
from app.cli import seed
from app.core.db import unit_of_work
from app.core.models import AuditEvent, Step, Team, TeamSchedule, utcnow
from app.provisioning import restore
from app.runtime import portal_of
from app.usage.history import RightsizingRun
from tests.conftest import settings_for
from tests.web.conftest import client_for, portal
from tests.web.test_review import words


def _actions(app: FastAPI) -> list[str]:
    with portal_of(app).session_factory() as session:
        return list(session.scalars(select(AuditEvent.action).order_by(AuditEvent.id)))


def _versions(app: FastAPI) -> dict[str, str | None]:
    with portal_of(app).session_factory() as session:
        return dict(session.execute(select(Team.name, Team.vcluster_version)).all())


def test_a_restart_restores_the_simulated_cluster_and_says_so_once(db_url: str) -> None:
    for app in portal(db_url, vcluster_chart_version="0.36.0"):
        for _ in range(3):
            portal_of(app).reconciler.run_once()
        lead = client_for(app, "lead-nlp@example.org")
        assert lead.get("/api/v1/teams/1").json()["status"] == "ready"
    for app in portal(db_url, vcluster_chart_version="0.36.0"):
        for _ in range(3):
            portal_of(app).reconciler.run_once()
        actions = _actions(app)
        assert "provisioning.drift_repaired" not in actions
        assert actions.count("provisioning.simulated_restarted") == 1
        admin = client_for(app, "admin@example.org", admin=True)
        assert "Repaired in the cluster" not in admin.get("/admin").text
        audit = admin.get("/audit").text
        assert (
            "the simulated cluster started empty in this process: the objects of 3 teams were "
            "re-created from the database (nothing real exists)" in audit
        )
        lead = client_for(app, "lead-nlp@example.org")
        assert lead.get("/api/v1/teams/1").json()["status"] == "ready"
        issued = lead.form("/teams/1/kubeconfig")
        assert issued.status_code == 200, "the restored vCluster hands out kubeconfigs"
        # An object deleted by hand after the restart is still drift, and repaired.
        backend = portal_of(app).backend
        assert isinstance(backend, SimulatedBackend)
        backend.delete_object(Step.NAMESPACE, "vision")
        with unit_of_work(portal_of(app).session_factory) as session:
            session.execute(update(TeamSchedule).values(next_attempt_at=utcnow()))
        portal_of(app).reconciler.run_once()
        assert "provisioning.drift_repaired" in _actions(app)


def test_the_restore_reads_the_teams_a_batch_at_a_time(
    db_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every team is restored when they span several batches (10,000 teams' rows are
    never all loaded at once)."""
    monkeypatch.setattr(restore, "RESTORE_BATCH", 2)
    for app in portal(db_url):
        for _ in range(3):
            portal_of(app).reconciler.run_once()
    for app in portal(db_url):
        backend = portal_of(app).backend
        assert isinstance(backend, SimulatedBackend)
        held = {name for (step, name) in backend._objects if step == Step.NAMESPACE}
        assert held == {"nlp", "vision", "recommender"}
        portal_of(app).reconciler.run_once()
        assert "provisioning.drift_repaired" not in _actions(app)


def test_a_new_chart_version_rolls_over_the_simulated_teams_one_at_a_time(db_url: str) -> None:
    for app in portal(db_url, vcluster_chart_version="0.36.0"):
        for _ in range(3):
            portal_of(app).reconciler.run_once()
    for app in portal(db_url, vcluster_chart_version="0.36.1", simulated_step_seconds=0.2):
        admin = client_for(app, "admin@example.org", admin=True)
        portal_of(app).reconciler.run_once()
        card = admin.get("/admin").text
        assert "Rollout: vCluster chart upgrade to 0.36.1 (from 0.36.0)" in card
        counts = re.findall(r"data-rollout-count>(\d+) of (\d+) teams<", card)
        # One team at a time: the first may already be through on a loaded machine (each
        # simulated step takes 0.2 s), never more.
        assert counts in ([("0", "3")], [("1", "3")])
        upgraded: set[int] = set()
        for _ in range(200):
            portal_of(app).reconciler.run_once()
            versions = _versions(app)
            upgraded.add(sum(1 for v in versions.values() if v == "0.36.1"))
            if set(versions.values()) == {"0.36.1"}:
                break
            time.sleep(0.05)
        assert set(versions.values()) == {"0.36.1"}, versions
        assert upgraded >= {1, 2, 3}, "one team at a time"
        assert _actions(app).count("vcluster.upgraded") == 3
        # The rollout's own steps: one line as it starts, one once done.
        assert _actions(app).count("vcluster.rollout_started") == 1
        assert _actions(app).count("vcluster.rollout_done") == 1
        assert 'id="rollout-title"' not in admin.get("/admin").text, "done: the card goes"


def test_the_demo_seed_gives_right_sizing_an_idle_and_a_starved_team(db_url: str) -> None:
    settings = settings_for(db_url)
    assert seed(settings), "an empty database is seeded"
    assert not seed(settings), "and only once"
    for app in portal(db_url):
        for _ in range(3):
            portal_of(app).reconciler.run_once()
        run = RightsizingRun(portal_of(app).session_factory, settings)
        assert run.maybe_run() == 2
        admin = client_for(app, "admin@example.org", admin=True)
        page = admin.get("/admin/rightsizing").text
        rows = {
            name: words(row)
            for name, row in re.findall(
                r"<tr[^>]*>\s*<t[dh][^>]*>(?:<[^>]+>)*(\w+)(.*?)</tr>", page, re.S
            )
        }
        assert rows["vision"].startswith("idle"), rows
        assert "Propose 0.05 GPU" in rows["vision"]
        assert rows["recommender"].startswith("starved"), rows
        assert "100 %" in rows["recommender"]
        # The admin's page says what fits today too, and offers it first.
        assert "1 0.34 fits today" in rows["recommender"]
        assert "Propose 0.34 GPU (fits today) Propose 1 GPU anyway" in rows["recommender"]
        assert "fits today" not in rows["vision"], "a lower guarantee always fits"
        assert "nlp" not in rows, "busy around its guarantee: nothing to say"
        # Quota over time in the demo: one grant running, one budget half spent.
        running = admin.api("GET", "/api/v1/grants").json()
        assert [(g["team_id"], g["pool"], g["gpus"], g["state"]) for g in running] == [
            (2, "l40s", "0.5", "running")
        ]
        (budget,) = admin.api("GET", "/api/v1/budgets").json()
        # Twice what nlp used this month (none yet in a month's first hour: 1 GPU-hour).
        half = 50 if budget["used_gpu_hours"] >= 0.05 else 0
        assert (budget["team_id"], round(budget["percent"])) == (1, half)
        sparkline = admin.get("/teams/2").text
        assert 'data-spark="peak">0.04<' in sparkline, "a week of history in vision's sparkline"
        # recommender's lead is told what the pool can guarantee today, and asks for it.
        lead = client_for(app, "lead-recommender@example.org")
        page = lead.get("/teams/3").text
        room = re.search(r'data-testid="rs-room">(.*?)</p>', page, re.S)
        assert room, "a raise above what is free says so"
        assert words(room.group(1)) == (
            "The pool can guarantee recommender at most 0.34 GPU today (the other teams hold "
            "0.66 of its 1): an admin can approve up to that, or 1 once the pool grows or "
            "another team's guarantee shrinks."
        )
        assert ">Ask for 0.34 GPU (fits today)</button>" in page
        assert ">Ask for 1 GPU anyway</button>" in page
        too_much = lead.form("/teams/3/rightsizing", {"gpus": "2"}, follow_redirects=True)
        assert "Ask for between 0.33 and 1 GPU" in words(too_much.text)
        asked = lead.form("/teams/3/rightsizing", {"gpus": "0.34"}, follow_redirects=True)
        assert "Asked to change recommender's guarantee to 0.34 GPU" in words(asked.text)
        change = lead.api("GET", "/api/v1/requests").json()[-1]
        assert change["requested"]["gpu_quota"] == "0.34"
        assert "Asked for 0.34 GPU: what the pool can guarantee today." in change["purpose"]
        approved = admin.api("POST", f"/api/v1/requests/{change['id']}/approve", {})
        assert approved.status_code == 200, approved.text
