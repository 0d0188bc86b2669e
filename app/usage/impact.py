"""What a decision would do to every team's share, before it is made.

The same calculator as the gauges, over the whole org and through the parent queue:
once with the quotas as they are, once as they would be after the decision (a new team,
a quota change, a new pool, or several changes at once on the what-if page).
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass, replace

from app.core.quantities import gpus
from app.usage.fairshare import Trace
from app.usage.service import NO_MODEL, GpuShare, Model, TeamQuota, shares_for
from app.usage.sources import QueueUsage

CHANGE = 0.005  # below half a hundredth of a GPU nobody would notice a difference


@dataclass(frozen=True)
class TeamImpact:
    """One team's numbers before and after, in GPUs."""

    team_id: int
    name: str
    guarantee_before: float
    guarantee_after: float
    busy_before: float | None  # what it gets if every team were busy
    busy_after: float | None
    now_before: float | None  # KAI's fair share with today's demand
    now_after: float | None
    is_subject: bool = False  # the team the decision is about
    in_use: float | None = None  # GPUs the team's pods hold now, where reported
    limit_after: float | None = None  # the team's limit after the decision

    @property
    def above_limit(self) -> bool:
        """KAI's fair share can exceed a limit (leftovers are not capped by it); the team
        can still use only up to its limit."""
        return (
            self.limit_after is not None
            and self.now_after is not None
            and self.now_after > self.limit_after + 0.005
        )

    @property
    def reclaimable(self) -> float:
        """GPUs in use now above the new fair share (and the new guarantee): what KAI
        may take back when other teams ask for their share."""
        if self.in_use is None or self.now_after is None:
            return 0.0
        return max(0.0, round(self.in_use - max(self.now_after, self.guarantee_after), 2))

    @property
    def busy_delta(self) -> float:
        return _delta(self.busy_before, self.busy_after)

    @property
    def now_delta(self) -> float:
        return _delta(self.now_before, self.now_after)

    @property
    def changed(self) -> bool:
        return (
            self.is_subject
            or abs(self.guarantee_after - self.guarantee_before) >= CHANGE
            or abs(self.busy_delta) >= CHANGE
            or abs(self.now_delta) >= CHANGE
        )


@dataclass(frozen=True)
class Impact:
    pool_before: float
    pool_after: float
    teams: list[TeamImpact]

    @property
    def changed(self) -> list[TeamImpact]:
        """Teams whose numbers move, the subject first, then the biggest losers."""
        moved = [t for t in self.teams if t.changed]
        return sorted(moved, key=lambda t: (not t.is_subject, min(t.busy_delta, t.now_delta)))

    @property
    def reclaims(self) -> list[TeamImpact]:
        """Teams running more now than the decision leaves them, most first."""
        found = [t for t in self.teams if t.reclaimable >= CHANGE]
        return sorted(found, key=lambda t: -t.reclaimable)

    @property
    def losers(self) -> list[TeamImpact]:
        return [t for t in self.changed if not t.is_subject and t.busy_delta <= -CHANGE]


def impact(
    rows: list[TeamQuota],
    usage: Mapping[str, QueueUsage],
    *,
    pool_centi: int,
    parent: str,
    new_pool_centi: int | None = None,
    changes: Mapping[int, TeamQuota] | None = None,
    before: Mapping[int, GpuShare] | None = None,
    model: Model = NO_MODEL,
    after_model: Model | None = None,
    also_changed: Collection[int] = (),
    trace: Trace | None = None,
    busy_trace: Trace | None = None,
) -> Impact:
    """Every team's share now and after ``changes`` (quota rows by team id; an id not in
    ``rows`` is a new team), the pool becoming ``new_pool_centi`` and the model becoming
    ``after_model`` (past usage to try; ``also_changed``: the teams it is about). ``before``, when
    given, are the shares already computed for ``rows`` (the gauges' cached ones);
    ``trace``/``busy_trace`` record the steps of the divisions after the decision."""
    changes = dict(changes or {})
    after_rows = [changes.pop(row.id, row) for row in rows]
    # A new team has no queue yet: nothing runs in it, it competes only when busy.
    after_rows += [replace(row, ready=False) for row in changes.values()]
    after_pool = pool_centi if new_pool_centi is None else new_pool_centi
    data = dict(usage)
    if before is None:
        before = shares_for(rows, data, pool_centi=pool_centi, parent=parent, model=model)
    after = shares_for(
        after_rows,
        data,
        pool_centi=after_pool,
        parent=parent,
        model=after_model or model,
        trace=trace,
        busy_trace=busy_trace,
    )
    subjects = set(changes) | set(also_changed)  # new teams, teams whose inputs changed
    subjects |= {row.id for row, old in zip(after_rows, rows, strict=False) if row != old}
    known = {row.id: row for row in rows}
    result = []
    for row in after_rows:
        old = before.get(row.id)
        new = after[row.id]
        result.append(
            TeamImpact(
                team_id=row.id,
                name=row.name,
                guarantee_before=gpus(known[row.id].gpu_quota_centi) if row.id in known else 0.0,
                guarantee_after=gpus(row.gpu_quota_centi),
                busy_before=old.if_all_busy if old else None,
                busy_after=new.if_all_busy,
                now_before=old.fair_now if old else None,
                now_after=new.fair_now,
                is_subject=row.id in subjects,
                in_use=new.allocated,
                limit_after=new.limit,
            )
        )
    return Impact(pool_before=gpus(pool_centi), pool_after=gpus(after_pool), teams=result)


def _delta(before: float | None, after: float | None) -> float:
    return round((after or 0.0) - (before or 0.0), 2)
