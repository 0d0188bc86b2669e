"""The provisioning domain's periodic job: the reconciler's worker loop."""

from __future__ import annotations

import logging
from typing import Protocol

from app.core.config import Settings
from app.core.db import Effect
from app.core.jobs import Job, Loop, Role
from app.provisioning.reconciler import POLL_SECONDS, Reconciler

log = logging.getLogger(__name__)


class Parts(Protocol):
    @property
    def settings(self) -> Settings: ...
    @property
    def reconciler(self) -> Reconciler: ...


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


JOBS: tuple[Job[Parts], ...] = (
    Job(
        name="provisioning_worker",
        roles=frozenset({Role.WORK}),
        build=worker_loop,
        wakes_on=(Effect.PROVISIONING_DUE,),
    ),
)
