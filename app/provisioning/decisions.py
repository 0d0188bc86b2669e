"""KAI's decisions about a team's work, in the team's words, and their history.

``explain`` says why a waiting workload waits, from the reason KAI wrote (its figures,
never the portal's own guess) and what would let it start; ``evicted_words`` says how an
eviction came about. ``record_pass`` keeps what KAI did (each eviction once, each long
wait once), tells the team of evictions at most once per burst, and writes both on the
team's timeline.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from typing import Any, Protocol

from sqlalchemy.orm import Session, sessionmaker

from app.core.config import Settings
from app.core.db import unit_of_work
from app.core.events import Event
from app.core.models import Team, WorkloadEvent, WorkloadEventKind, utcnow
from app.core.quantities import format_figure
from app.notifications import events
from app.provisioning import repository as repo
from app.provisioning.backend import (
    BackendError,
    Eviction,
    KaiReason,
    QueueFigures,
    Workload,
    WorkloadReader,
)
from app.provisioning.specs import spec_of
from app.teams import repository as teams_repo

log = logging.getLogger(__name__)
TEAMS_PER_PASS = 100  # teams read per pass of the decisions job

EVICTED = WorkloadEventKind.EVICTED
WAITED = WorkloadEventKind.WAITED
SHOWN_IN_NOTICE = 3  # workloads named in one notice


def gpu(value: float | None) -> str:
    if value is None:
        return "?"
    if math.isinf(value):
        return "unlimited"
    return format_figure(value)


@dataclass(frozen=True)
class Why:
    """A waiting workload's reason in people's words: ``kai`` is KAI's own reason word
    (shown beside, for who searches KAI's docs), ``message`` KAI's message."""

    kai: str
    said: str
    remedy: str
    message: str
    pool: str = ""


def explain(work: Workload, *, org_queue: str = "") -> list[Why]:
    """Why ``work`` waits, one line per reason KAI wrote; none when it runs. Where KAI
    wrote no reason, that is said (with since when), never a guess."""
    if work.running:
        return []
    if not work.reasons:
        return [
            Why(
                "",
                "KAI has not said why this workload waits (no reason written on its pod "
                "group yet).",
                "If it stays so for more than a few scheduling cycles, an admin can read the "
                "scheduler's log for it.",
                "",
            )
        ]
    return [_why(work, reason, org_queue) for reason in work.reasons]


def _why(work: Workload, reason: KaiReason, org_queue: str) -> Why:
    f = reason.figures or QueueFigures(queue=work.queue)
    asked = f.asked if f.asked is not None else work.gpus
    own = f.queue in ("", work.queue)
    whose = "your queue's" if own else "your org's queue's"
    if reason.reason == "OverLimit":
        after = (f.allocated or 0.0) + asked
        said = (
            f"{whose[0].upper()}{whose[1:]} limit is {gpu(f.limit)} GPU and "
            f"{'your' if own else 'the org'} running work uses {gpu(f.allocated)}: this "
            f"{gpu(asked)}-GPU workload would take it to {gpu(after)}. It waits until some "
            "of it ends."
        )
        remedy = (
            f"Let {gpu(after - (f.limit or 0.0))} GPU of running work end, or ask for a limit "
            f"of at least {gpu(after)} GPU (a quota change)."
            if own
            else "Other teams' work in the org ends, or an admin raises the org's limit."
        )
    elif reason.reason == "NonPreemptibleOverQuota":
        held = f.allocated_non_preemptible or 0.0
        said = (
            f"Your guarantee is {gpu(f.deserved)} GPU and this workload is non-preemptible: "
            f"it can only start within the guarantee ({gpu(held)} GPU of it already held by "
            f"non-preemptible work; it asks {gpu(asked)})."
        )
        remedy = (
            "Run it preemptible (the label kai.scheduler/preemptibility: preemptible) to "
            f"go above the guarantee, or ask for a guarantee of at least {gpu(held + asked)} "
            "GPU."
        )
    elif reason.reason == "PreemptionDelayNotElapsed":
        said = (
            "It is within its preemption delay: KAI may not yet evict other work to make "
            "room for it."
        )
        remedy = "It is considered again when the delay ends."
    elif reason.reason == "QueueDoesNotExist":
        said = f"KAI knows no queue {f.queue or work.queue} for it."
        remedy = "The portal puts the team's queues back; if it stays, tell an admin."
    else:
        said = f"KAI says: {reason.message}" if reason.message else "KAI gave no message."
        remedy = ""
    return Why(reason.reason, said, remedy, reason.message, reason.pool)


@dataclass(frozen=True)
class How:
    """How an eviction came about: the action in words and, for a reclaim, the shares
    that made KAI choose this team's work."""

    action: str
    why: str


def evicted_words(row: WorkloadEvent, by: str | None) -> How:
    """``by``: the team the work went to, as the org sees it (never its pods)."""
    queues = [QueueFigures(**q) for q in row.details.get("queues", [])]
    if row.action == "reclaim":
        action = f"Reclaimed by team {by}" if by else "Reclaimed for another queue"
        why = ""
        if len(queues) >= 2:
            own, other = queues[0], queues[1]
            whose = f"{by}'s queue" if by else f"queue {other.queue}"
            why = (
                f"Your queue used {gpu(own.allocated)} GPU with a guarantee of "
                f"{gpu(own.deserved)} and a fair share of {gpu(own.fair_share)}; {whose} used "
                f"{gpu(other.allocated)} of its fair share of {gpu(other.fair_share)}. KAI takes "
                "back GPUs borrowed above a fair share for a queue below its own."
            )
        return How(action, why)
    if row.action == "preempt":
        return How(
            "Preempted by higher-priority work of your own team",
            "Within one queue KAI makes room for the higher priority class.",
        )
    if row.action == "consolidation":
        return How(
            "Moved to pack the GPUs (consolidation)",
            "KAI stopped it to place it again beside other work, freeing a whole GPU.",
        )
    return How(f"Evicted by KAI ({row.action or 'no action named'})", "")


def _centi(value: float | None) -> int | None:
    return None if value is None else round(value * 100)


def _queues(found: Iterable[QueueFigures]) -> list[dict[str, Any]]:
    return [
        {
            "queue": q.queue,
            "allocated": q.allocated,
            "deserved": q.deserved,
            "fair_share": q.fair_share,
            "priority": q.priority,
        }
        for q in found
    ]


def record_evictions(
    session: Session,
    team: Team,
    found: Sequence[Eviction],
    *,
    team_of_namespace: Mapping[str, int],
) -> list[WorkloadEvent]:
    """Each eviction not yet kept, kept (once: its event's uid is its key)."""
    known = repo.workload_event_keys(session, team.id, [e.uid for e in found])
    added = []
    for eviction in found:
        if not eviction.uid or eviction.uid in known:
            continue
        ran = (
            int((eviction.at - eviction.started).total_seconds())
            if eviction.started is not None and eviction.started <= eviction.at
            else None
        )
        workload = f"{eviction.namespace}/{eviction.name}" if eviction.name else ""
        row = WorkloadEvent(
            team_id=team.id,
            kind=EVICTED,
            key=eviction.uid[:200],
            pool=eviction.pool[:63],
            workload=workload[:320],
            at=eviction.at,
            action=eviction.action[:32],
            pods=max(1, eviction.pods),
            gpu_centi=_centi(eviction.gpus),
            ran_seconds=ran,
            by_team_id=team_of_namespace.get(eviction.by_namespace),
            details={"queues": _queues(eviction.queues)},
        )
        if repo.add_workload_event(session, row):
            added.append(row)
    return added


def record_waits(
    session: Session, team: Team, found: Sequence[Workload], *, longer_than: timedelta
) -> list[WorkloadEvent]:
    """Each workload waiting longer than ``longer_than``, written on the timeline once."""
    now = utcnow()
    long = [w for w in found if not w.running and now - w.since >= longer_than]
    keys = {
        f"wait:{w.group or w.namespace + '/' + w.name}:{w.since.isoformat()}"[:200]: w for w in long
    }
    known = repo.workload_event_keys(session, team.id, list(keys))
    added = []
    for key, work in keys.items():
        if key in known:
            continue
        why = explain(work)
        row = WorkloadEvent(
            team_id=team.id,
            kind=WAITED,
            key=key,
            pool=work.pool,
            workload=f"{work.namespace}/{work.name}"[:320],
            at=work.since,
            action=(work.reasons[0].reason if work.reasons else "")[:32],
            gpu_centi=_centi(work.gpus),
            details={"said": why[0].said if why else ""},
        )
        if repo.add_workload_event(session, row):
            minutes = int((now - work.since).total_seconds() // 60)
            events.record(
                session,
                Event.WORKLOAD_WAITING,
                actor=None,
                team=team,
                summary=(
                    f"{work.namespace}/{work.name} of {team.name} has waited {minutes} min "
                    f"for {gpu(work.gpus)} GPU: {row.details['said']}"
                ),
                facts={"workload": row.workload, "minutes": minutes, "reason": row.action},
            )
            added.append(row)
    return added


def notify_bursts(
    session: Session, team: Team, *, burst: timedelta, names: Mapping[int, str], now: datetime
) -> WorkloadEvent | None:
    """One notice for the team's evictions not yet told, unless it was told within
    ``burst`` (those wait for the next notice, together)."""
    pending = repo.untold_evictions(session, team.id)
    if not pending:
        return None
    last = repo.last_told(session, team.id)
    if last is not None and now - last < burst:
        return None
    by = sorted({names.get(r.by_team_id, "") for r in pending if r.by_team_id} - {""})
    gpus = sum(r.gpu_centi or 0 for r in pending) / 100
    shown = [r.workload for r in pending if r.workload][:SHOWN_IN_NOTICE]
    actions = sorted({r.action for r in pending if r.action})
    for row in pending:
        row.notified_at = now
    events.record(
        session,
        Event.WORKLOAD_EVICTED,
        actor=None,
        team=team,
        summary=(
            f"KAI evicted {len(pending)} workload{'' if len(pending) == 1 else 's'} of "
            f"{team.name}"
            + (f" for team {', '.join(by)}" if by else "")
            + f" ({', '.join(actions) or 'no action named'}) {_between(pending)}"
        ),
        facts={
            "count": len(pending),
            "workloads": shown,
            "more": max(0, len([r for r in pending if r.workload]) - len(shown)),
            "gpus": format_figure(gpus) if gpus else "",
            "by": by,
            "actions": actions,
        },
    )
    return pending[-1]


def _between(rows: Sequence[WorkloadEvent]) -> str:
    """When the evictions happened (the timeline's own time is when they were read)."""
    first, last = rows[0].at, rows[-1].at
    if last - first < timedelta(minutes=1):
        return f"at {first:%Y-%m-%d %H:%M} UTC"
    return f"between {first:%Y-%m-%d %H:%M} and {last:%H:%M} UTC"


class Cache(Protocol):
    def put(self, team: str, items: list[Workload]) -> None: ...

    def last(self, team: str) -> list[Workload]: ...


def as_last_seen(evicted: Sequence[Eviction], seen: Sequence[Workload]) -> list[Eviction]:
    """Evictions whose pod is already gone (KAI deletes it) completed from the last time
    their workload was seen running: its GPUs and since when it ran."""
    by_group = {w.group: w for w in seen if w.group and w.running}
    by_name = {(w.namespace, w.name): w for w in seen if w.running}
    found = []
    for e in evicted:
        was = by_group.get(e.group) or by_name.get((e.namespace, e.name))
        if was is not None and (e.gpus is None or e.started is None):
            e = replace(
                e,
                gpus=e.gpus if e.gpus is not None else was.gpus,
                started=e.started or was.since,
                pool=e.pool or was.pool,
            )
        found.append(e)
    return found


class DecisionsPass:
    """Reads KAI's decisions for up to ``per_pass`` awake ready teams at a time (round
    robin: every team within a few passes, whatever their number), outside any
    transaction; then keeps and tells them, one transaction per team."""

    def __init__(
        self,
        factory: sessionmaker[Session],
        reader: WorkloadReader,
        settings: Settings,
        cache: Cache | None = None,
        *,
        per_pass: int = TEAMS_PER_PASS,
    ) -> None:
        self.factory, self.reader, self.settings, self.cache = factory, reader, settings, cache
        self.per_pass = per_pass
        self.offset = 0

    def run_once(self, now: datetime | None = None) -> int:
        """The evictions kept this pass."""
        with unit_of_work(self.factory) as session:
            ids = repo.awake_ready_team_ids(session)
            if not ids:
                return 0
            start = self.offset % len(ids)
            chosen = (ids[start:] + ids[:start])[: self.per_pass]
            self.offset = start + len(chosen)
            org = teams_repo.get_org(session)
            specs = [
                (t.id, spec_of(session, t, self.settings, org, with_template=False))
                for t in repo.teams_by_ids(session, chosen)
            ]
            untold = repo.teams_with_untold_evictions(session, chosen)
        kept = 0
        longer_than = timedelta(minutes=self.settings.long_wait_minutes)
        for team_id, spec in specs:
            try:
                found = self.reader.workloads(spec)
                evicted = self.reader.evictions(spec)
            except BackendError as exc:
                log.warning("reading KAI's decisions for %s failed: %s", spec.team, exc)
                continue
            if self.cache is not None:
                evicted = as_last_seen(evicted, self.cache.last(spec.team))
                self.cache.put(spec.team, found)
            waits = any(not w.running and utcnow() - w.since >= longer_than for w in found)
            if evicted or waits or team_id in untold:  # else nothing to keep or tell
                kept += self._keep(team_id, found, evicted, now)
        return kept

    def _keep(
        self, team_id: int, found: list[Workload], evicted: list[Eviction], now: datetime | None
    ) -> int:
        with unit_of_work(self.factory) as session:
            team = repo.team_or_none(session, team_id)
            if team is None:
                return 0
            namespaces = {e.by_namespace for e in evicted if e.by_namespace}
            added = record_evictions(
                session,
                team,
                evicted,
                team_of_namespace=repo.teams_of_namespaces(session, namespaces),
            )
            record_waits(
                session,
                team,
                found,
                longer_than=timedelta(minutes=self.settings.long_wait_minutes),
            )
            pending = {r.by_team_id for r in repo.untold_evictions(session, team.id)}
            notify_bursts(
                session,
                team,
                burst=timedelta(minutes=self.settings.eviction_burst_minutes),
                names=repo.team_names(session, {i for i in pending if i is not None}),
                now=now or utcnow(),
            )
            return len(added)
