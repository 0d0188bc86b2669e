"""What the workloads card and its API show: a team's work as KAI sees it (running or
waiting, and why in the team's words with KAI's figures) and what KAI did to it (its
evictions and long waits, kept by the portal)."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta

from sqlalchemy.orm import Session

from app.core.models import Team, WorkloadEvent, utcnow
from app.provisioning import repository as provisioning_repo
from app.provisioning.backend import Workload
from app.provisioning.decisions import EVICTED, How, Why, evicted_words, explain, gpu
from app.provisioning.workloads import Reading
from app.teams import repository as teams_repo

RECENT = timedelta(days=7)  # evictions shown on the card
SHOWN = 10


@dataclass(frozen=True)
class WorkloadRow:
    work: Workload
    pool: str  # the pool's name ("": the default pool)
    gpus: str
    why: list[Why]


@dataclass(frozen=True)
class EvictionRow:
    row: WorkloadEvent
    pool: str
    by: str | None  # the team the GPUs went to
    how: How
    gpus: str
    lost: str  # GPU-hours of work thrown away ("" where not known)


@dataclass(frozen=True)
class WorkloadsCard:
    reading: Reading[Workload] | None
    rows: list[WorkloadRow] = field(default_factory=list)
    evictions: list[EvictionRow] = field(default_factory=list)
    evictions_total: int = 0
    waiting: int = 0


def pool_names(session: Session, team: Team) -> dict[str, str]:
    """Each pool's label value -> its name, the default pool as ""."""
    pools = teams_repo.get_pools(session, team.org_id)
    return {p.label_value: ("" if p.is_default else p.name) for p in pools if p.label_value}


def workload_rows(reading: Reading[Workload] | None, names: dict[str, str]) -> list[WorkloadRow]:
    if reading is None:
        return []
    return [
        WorkloadRow(w, names.get(w.pool, w.pool), gpu(w.gpus), explain(w)) for w in reading.pods
    ]


def eviction_rows(
    session: Session, rows: list[WorkloadEvent], names: dict[str, str]
) -> list[EvictionRow]:
    by_names = provisioning_repo.team_names(
        session, {r.by_team_id for r in rows if r.by_team_id is not None}
    )
    found = []
    for row in rows:
        by = by_names.get(row.by_team_id) if row.by_team_id is not None else None
        lost = row.lost_gpu_hours
        found.append(
            EvictionRow(
                row=row,
                pool=names.get(row.pool, row.pool),
                by=by,
                how=evicted_words(row, by),
                gpus=gpu(row.gpu_centi / 100) if row.gpu_centi is not None else "",
                lost=gpu(lost) if lost is not None else "",
            )
        )
    return found


def workloads_card(
    session: Session, team: Team, reading: Reading[Workload] | None, now: datetime | None = None
) -> WorkloadsCard:
    names = pool_names(session, team)
    rows = workload_rows(reading, names)
    kept, total = provisioning_repo.workload_events(
        session, team_id=team.id, kind=EVICTED, since=(now or utcnow()) - RECENT, limit=SHOWN
    )
    return WorkloadsCard(
        reading=reading,
        rows=rows,
        evictions=eviction_rows(session, kept, names),
        evictions_total=total,
        waiting=sum(1 for r in rows if not r.work.running),
    )


@dataclass(frozen=True)
class ReclaimPair:
    by: str  # the team that got the GPUs ("" where KAI named none)
    team: str  # whose work was evicted
    count: int
    gpus: str


def reclaim_pairs(session: Session, since: datetime) -> list[ReclaimPair]:
    """Who reclaimed from whom since ``since``: per pair of teams, the evictions and
    their GPUs (where known), the most first."""
    rows, _ = provisioning_repo.workload_events(session, kind=EVICTED, since=since)
    ids = {r.team_id for r in rows} | {r.by_team_id for r in rows if r.by_team_id is not None}
    names = provisioning_repo.team_names(session, ids)
    counts: dict[tuple[str, str], list[int]] = {}
    for row in rows:
        by = names.get(row.by_team_id, "") if row.by_team_id is not None else ""
        held = counts.setdefault((by, names.get(row.team_id, "")), [0, 0])
        held[0] += 1
        held[1] += row.gpu_centi or 0
    pairs = [ReclaimPair(by, team, n, gpu(c / 100)) for (by, team), (n, c) in counts.items()]
    return sorted(pairs, key=lambda p: (-p.count, p.by, p.team))
