"""The process model: one loop type for every periodic job, the jobs each role runs, the
effects that wake them, and readiness read from the running loops."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest

from app.cli import migrate
from app.core.db import Effect, request_effect, unit_of_work
from app.core.jobs import Loop, Role
from app.runtime import JOBS, WEB_PARTS, Portal, serve_roles
from app.usage.jobs import (
    REFRESH_CPU_SHARE,
    refresh_wait,
)
from tests.conftest import settings_for


def wait_for(condition: object, timeout: float = 5.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if callable(condition) and condition():
            return True
        time.sleep(0.01)
    return False


def test_a_loop_keeps_its_last_error_and_recovers() -> None:
    outcomes = iter([ValueError("cluster unreachable"), None, None])
    passes: list[int] = []
    stopped = threading.Event()

    def run() -> float | None:
        passes.append(len(passes))
        outcome = next(outcomes, None)
        if outcome is not None:
            raise outcome
        return None

    loop = Loop(name="test_job", run=run, period=60.0, on_stop=stopped.set)
    loop.start()
    try:
        assert wait_for(lambda: loop.runs == 1)
        assert loop.last_error == "ValueError: cluster unreachable"
        assert loop.alive(), "a failing pass does not end the loop"
        loop.wake.set()  # sooner than its period of a minute
        assert wait_for(lambda: loop.runs == 2)
        assert loop.last_error is None, "a pass that succeeds clears the error"
    finally:
        loop.stop()
    assert not loop.alive()
    assert stopped.is_set(), "on_stop runs once the thread has ended"
    assert passes == [0, 1]


def test_a_loop_waits_what_its_pass_asks() -> None:
    loop = Loop(name="test_job", run=lambda: 0.01, period=60.0)
    loop.start()
    try:
        assert wait_for(lambda: loop.runs >= 5, timeout=2.0), "0.01 s apart, not 60 s"
    finally:
        loop.stop()


def test_every_job_has_one_name_and_a_role() -> None:
    names = [job.name for job in JOBS]
    assert len(names) == len(set(names))
    assert all(job.roles for job in JOBS)


def test_each_process_runs_the_jobs_of_its_roles(tmp_path: Path) -> None:
    on = settings_for(
        f"sqlite:///{tmp_path / 'p.db'}",
        worker_enabled=True,
        delivery_enabled=True,
        usage_collector_enabled=True,
    )
    web_only = on.model_copy(update={"worker_enabled": False, "delivery_enabled": False})

    def names(settings: object, roles: frozenset[Role]) -> set[str]:
        return {job.name for job in Portal(settings, roles=roles).jobs()}  # type: ignore[arg-type]

    assert serve_roles(on) == {Role.WEB, Role.WORK, Role.DELIVER}
    assert serve_roles(web_only) == {Role.WEB}
    assert names(on, serve_roles(on)) == set(n.name for n in JOBS)
    assert names(web_only, serve_roles(web_only)) == {
        "usage_collector",
        "rightsizing",
        "view_refresher",
    }
    assert names(on, frozenset({Role.WORK})) == {
        "provisioning_worker",
        "access_sweeper",
        "sleep_policy",
        "quota_grants",
        "gpu_budgets",
        "kai_decisions",
    }
    assert names(on, frozenset({Role.DELIVER})) == {
        "notification_delivery",
        "kubeconfig_expiry_notices",
        "weekly_digest",
    }
    off = on.model_copy(update={"usage_collector_enabled": False})
    assert names(off, frozenset({Role.WEB})) == set(), "the settings turn a job off"


def test_effects_wake_the_loops_that_answer_them(tmp_path: Path) -> None:
    settings = settings_for(f"sqlite:///{tmp_path / 'p.db'}", worker_interval_seconds=60.0)
    migrate(settings)
    portal = Portal(settings, roles={Role.WORK})
    portal.start()
    try:
        worker = portal.loops["provisioning_worker"]
        assert wait_for(lambda: worker.runs == 1)
        with unit_of_work(portal.session_factory) as session:
            request_effect(session, Effect.PROVISIONING_DUE)
        assert wait_for(lambda: worker.runs == 2), "woken by the commit, not after 60 s"
        assert Effect.NOTIFIED not in portal.effects, "no delivery runs in a work process"
        assert not portal.built("oidc"), "a part nobody used is never made"
    finally:
        portal.stop()
    assert not worker.alive()


def test_readiness_names_a_job_that_died_or_keeps_failing(tmp_path: Path) -> None:
    settings = settings_for(f"sqlite:///{tmp_path / 'p.db'}")
    migrate(settings)
    portal = Portal(settings, roles=set())
    assert portal.readiness().failed == {}
    failing = Loop(name="flaky", run=lambda: 1 / 0, period=60.0)
    portal.loops["flaky"] = failing
    failing.start()
    try:
        assert wait_for(lambda: failing.runs == 1)
        ready = portal.readiness()
        assert ready.failed == {}, "a job that fails and retries does not stop traffic"
        assert ready.degraded == ("flaky",)
    finally:
        failing.stop()
    assert portal.readiness().failed == {"flaky": "not running"}
    portal.stop()


def test_a_web_process_makes_what_requests_share_before_serving(tmp_path: Path) -> None:
    """Requests run on many threads: the parts they share are made at start, once."""
    settings = settings_for(f"sqlite:///{tmp_path / 'p.db'}")
    migrate(settings)
    web = Portal(settings, roles={Role.WEB})
    web.start()
    try:
        assert all(web.built(part) for part in WEB_PARTS)
    finally:
        web.stop()
    deliver = Portal(settings, roles={Role.DELIVER})
    deliver.start()
    try:
        assert not deliver.built("backend"), "a deliver process never makes a cluster client"
    finally:
        deliver.stop()


def test_the_view_refresher_keeps_within_its_share_of_a_core() -> None:
    """A cheap pass (a small org) waits its period; a costly one (10,000 teams) waits long
    enough to stay within REFRESH_CPU_SHARE of a core, but never so long that pages stop
    taking its view (3 ttl + 1 s)."""
    period, ttl = 2.5, 5.0
    assert refresh_wait(0.005, period=period, ttl=ttl) == period
    costly = refresh_wait(0.3, period=period, ttl=ttl)
    assert costly > period
    assert 0.3 / (0.3 + costly) == pytest.approx(REFRESH_CPU_SHARE)
    assert refresh_wait(5.0, period=period, ttl=ttl) == 2 * ttl < 3 * ttl + 1
    assert refresh_wait(0.0, period=0.2, ttl=0.0) == 0.2, "tests' ttl of 0: its period"
