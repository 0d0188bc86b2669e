"""The teams domain's periodic job: temporary quota grants applied at their start, taken
back at their end and announced before it (level-triggered: a start or end that passed
while no portal ran is applied at the next pass)."""

from __future__ import annotations

from typing import Protocol

from sqlalchemy.orm import Session, sessionmaker

from app.core.config import Settings
from app.core.db import Effect, request_effect, unit_of_work
from app.core.jobs import Job, Loop, Role
from app.core.models import utcnow
from app.teams import grants


class Parts(Protocol):
    @property
    def settings(self) -> Settings: ...
    @property
    def session_factory(self) -> sessionmaker[Session]: ...


def grants_loop(parts: Parts) -> Loop:
    settings, factory = parts.settings, parts.session_factory

    def run() -> None:
        now = utcnow()
        with unit_of_work(factory) as session:
            if grants.tick(session, now):
                request_effect(session, Effect.PROVISIONING_DUE)  # the queues change now
            grants.remind(session, now, hours=settings.grant_notice_hours)

    return Loop(
        name="quota_grants",
        run=run,
        period=settings.grants_seconds,
        failure="pass failed; trying again",
    )


JOBS: tuple[Job[Parts], ...] = (
    Job(
        name="quota_grants",
        roles=frozenset({Role.WORK}),
        build=grants_loop,
        enabled=lambda settings: settings.worker_enabled,
    ),
)
