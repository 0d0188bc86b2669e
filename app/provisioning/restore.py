"""A backend that keeps its cluster in memory (the simulated one) starts empty in every
process, while the database remembers what an earlier process created. Restoring it
from the database at start makes a restart a restart, said once in the audit trail,
instead of every team's objects "deleted" and repaired as drift."""

from __future__ import annotations

from collections.abc import Collection
from typing import Protocol

from sqlalchemy.orm import Session, sessionmaker

from app.audit import service as audit
from app.core.config import Settings
from app.core.db import unit_of_work
from app.core.events import Event
from app.core.models import Step, StepStatus
from app.provisioning.backend import TeamSpec
from app.provisioning.repository import HOLDING_STATUSES
from app.provisioning.specs import spec_of
from app.teams import repository as teams


class InMemoryCluster(Protocol):
    @property
    def empty(self) -> bool: ...

    def restore(self, spec: TeamSpec, steps: Collection[Step], version: str | None) -> None: ...


RESTORE_BATCH = 500


def restore_from_database(
    session_factory: sessionmaker[Session], cluster: InMemoryCluster, settings: Settings
) -> int:
    """Give an empty in-memory cluster the objects of every team that holds some (the
    steps the database records as done); the number of teams restored."""
    if not cluster.empty:
        return 0
    restored: list[str] = []
    offset = 0
    while True:  # a batch of teams at a time: 10,000 teams' rows are never all loaded
        with unit_of_work(session_factory) as session:
            if offset == 0 and not teams.has_org(session):
                return 0
            batch = teams.get_teams(
                session,
                statuses=HOLDING_STATUSES,
                with_steps=True,
                limit=RESTORE_BATCH,
                offset=offset,
            )
            org = teams.get_org(session) if batch else None  # once, not once a team
            for team in batch:
                done = [Step(s.step) for s in team.steps if s.status == StepStatus.DONE]
                if done:
                    spec = spec_of(session, team, settings, org)
                    cluster.restore(spec, done, team.vcluster_version)
                    restored.append(team.name)
        if len(batch) < RESTORE_BATCH:
            break
        offset += RESTORE_BATCH
    if restored:
        with unit_of_work(session_factory) as session:
            audit.record(
                session,
                actor=None,
                event=Event.SIMULATED_RESTARTED,
                summary=(
                    f"the simulated cluster started empty in this process: the objects of "
                    f"{len(restored)} team{'s' if len(restored) != 1 else ''} were re-created "
                    "from the database (nothing real exists)"
                ),
                details={"teams": restored[:50]},
            )
    return len(restored)
