"""The access domain's periodic jobs: the sweeper that keeps each vCluster's accounts
equal to the people allowed, and the notices of kubeconfigs about to expire."""

from __future__ import annotations

from typing import Protocol

from sqlalchemy.orm import Session, sessionmaker

from app.access import service
from app.access.sweeper import Sweeper
from app.core.db import Effect, unit_of_work
from app.core.jobs import Job, Loop, Role

SWEEP_SECONDS = 5.0
NOTICE_SECONDS = 60.0


class Parts(Protocol):
    @property
    def session_factory(self) -> sessionmaker[Session]: ...
    @property
    def sweeper(self) -> Sweeper: ...


def sweeper_loop(parts: Parts) -> Loop:
    sweeper = parts.sweeper

    def run() -> None:
        sweeper.run_once()

    return Loop(
        name="access_sweeper",
        run=run,
        period=SWEEP_SECONDS,
        wake=sweeper.wake,
        failure="sweep failed; retrying",
    )


def expiry_notice_loop(parts: Parts) -> Loop:
    """Tell holders of long-lived kubeconfigs that expire within a day, once a minute."""
    factory = parts.session_factory

    def run() -> None:
        with unit_of_work(factory) as session:
            service.tell_expiring(session)

    return Loop(name="kubeconfig_expiry_notices", run=run, period=NOTICE_SECONDS)


JOBS: tuple[Job[Parts], ...] = (
    Job(
        name="access_sweeper",
        roles=frozenset({Role.WORK}),
        build=sweeper_loop,
        wakes_on=(Effect.ACCESS_CHANGED,),
    ),
    Job(
        name="kubeconfig_expiry_notices",
        roles=frozenset({Role.DELIVER}),
        build=expiry_notice_loop,
    ),
)
