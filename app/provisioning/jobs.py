"""The provisioning domain's periodic job: the reconciler's worker loop."""

from __future__ import annotations

import logging
from typing import Protocol

from sqlalchemy.orm import Session, sessionmaker

from app.core.config import Settings
from app.core.db import Effect, unit_of_work
from app.core.jobs import Job, Loop, Role
from app.core.models import utcnow
from app.provisioning import sleep
from app.provisioning.backend import ClusterBackend
from app.provisioning.decisions import DecisionsPass
from app.provisioning.reconciler import POLL_SECONDS, Reconciler
from app.provisioning.workloads import Workloads

log = logging.getLogger(__name__)


class Parts(Protocol):
    @property
    def settings(self) -> Settings: ...
    @property
    def reconciler(self) -> Reconciler: ...
    @property
    def backend(self) -> ClusterBackend: ...
    @property
    def session_factory(self) -> sessionmaker[Session]: ...
    @property
    def workloads(self) -> Workloads: ...


def worker_loop(parts: Parts) -> Loop:
    """Passes over every due team; while teams keep coming, again within POLL_SECONDS.
    Stopping finishes the team in hand (its cluster calls are bounded by their timeouts),
    takes no other, then hands every lease back: another replica resumes at once instead
    of after the leases expire."""
    reconciler = parts.reconciler
    interval = parts.settings.worker.interval_seconds

    def run() -> float | None:
        busy = reconciler.run_once()
        return min(interval, POLL_SECONDS) if busy else None

    def hand_back() -> None:
        log.info("provisioning worker stopped; handed back %d lease(s)", reconciler.release_all())

    return Loop(
        name="provisioning_worker",
        run=run,
        period=interval,
        wake=reconciler.wake,
        before_stop=reconciler.stopping.set,
        on_stop=hand_back,
        failure="pass failed; retrying",
    )


def sleep_loop(parts: Parts) -> Loop:
    """The org's sleep policy: idle team clusters put to sleep, their leads told first;
    and the month's hours asleep counted up."""
    backend, factory = parts.backend, parts.session_factory

    def run() -> None:
        with unit_of_work(factory) as session:
            sleep.count_slept(session, utcnow())  # the month's hours asleep, for the overview
            if not sleep.policy_on(session):
                return  # no cluster read while nothing sleeps by policy
        running = backend.running_pods()  # read outside the transaction: no lock held
        with unit_of_work(factory) as session:
            slept = sleep.idle_pass(session, running, utcnow())
        if slept:
            log.info("the sleep policy put %d idle cluster(s) to sleep", slept)

    return Loop(
        name="sleep_policy",
        run=run,
        period=parts.settings.sleep_policy_seconds,
        failure="pass failed; trying again",
    )


def decisions_loop(parts: Parts) -> Loop:
    """KAI's decisions about the teams' work: evictions kept and told, long waits on the
    timeline, the team pages' workload readings kept fresh."""
    cache = parts.workloads
    decisions = DecisionsPass(parts.session_factory, cache.reader, parts.settings, cache)

    def run() -> None:
        decisions.run_once()

    return Loop(
        name="kai_decisions",
        run=run,
        period=parts.settings.workloads_seconds,
        failure="pass failed; trying again",
    )


JOBS: tuple[Job[Parts], ...] = (
    Job(
        name="provisioning_worker",
        roles=frozenset({Role.WORK}),
        build=worker_loop,
        wakes_on=(Effect.PROVISIONING_DUE,),
    ),
    Job(
        name="sleep_policy",
        roles=frozenset({Role.WORK}),
        build=sleep_loop,
        enabled=lambda settings: settings.worker_enabled,
    ),
    Job(
        name="kai_decisions",
        roles=frozenset({Role.WORK}),
        build=decisions_loop,
        enabled=lambda settings: settings.worker_enabled,
    ),
)
