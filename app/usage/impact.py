"""What a decision would do to every team's share, before it is made.

The same calculator as the gauges, over the whole org and through the parent queue:
once with the quotas as they are, once as they would be after the decision (a new team,
a quota change, a new pool, or several changes at once on the what-if page).
"""

from __future__ import annotations

import functools
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import cast

import numpy as np
import numpy.typing as npt

from app.core.quantities import gpus
from app.usage.division import Division, OrgInputs, divide_org
from app.usage.fairshare import Trace
from app.usage.model import NO_MODEL, Model, TeamQuota
from app.usage.sources import QueueUsage

CHANGE = 0.005  # below half a hundredth of a GPU nobody would notice a difference
RECLAIMS_BUILT = 24  # the pages name at most 6 teams whose running work KAI may take back


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
    # What it gets if every team were busy and the rest of the cluster too (the pool's
    # GPUs alone divided); the busy figures where the cluster has none beyond the pool.
    within_before: float | None = None
    within_after: float | None = None

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
    def within_delta(self) -> float:
        return _delta(self.within_before, self.within_after)

    @property
    def changed(self) -> bool:
        return (
            self.is_subject
            or abs(self.guarantee_after - self.guarantee_before) >= CHANGE
            or abs(self.busy_delta) >= CHANGE
            or abs(self.within_delta) >= CHANGE
            or abs(self.now_delta) >= CHANGE
        )

    @property
    def loss(self) -> float:
        """The most it would lose in any world (negative: a loss)."""
        return min(self.busy_delta, self.within_delta)


@dataclass(frozen=True)
class Impact:
    """A decision's effect. ``teams``: the teams whose numbers could move, the subjects
    and those running above what they keep (every team only where asked for, as the
    API's list): the rest keep their numbers and are only counted (``total``)."""

    pool_before: float
    pool_after: float
    teams: list[TeamImpact]
    total: int = 0  # teams in the org after the decision
    # The cluster has GPUs beyond the pool: "busy" lends them, "within" does not.
    beyond_pool: bool = False

    @functools.cached_property
    def changed(self) -> list[TeamImpact]:
        """Teams whose numbers move, the subject first, then the biggest losers (kept:
        a page asks for them, their count and the losers among them)."""
        moved = [t for t in self.teams if t.changed]
        return sorted(moved, key=lambda t: (not t.is_subject, min(t.loss, t.now_delta)))

    @property
    def unchanged(self) -> int:
        return self.total - len(self.changed)

    @property
    def reclaims(self) -> list[TeamImpact]:
        """Teams running more now than the decision leaves them, most first."""
        found = [t for t in self.teams if t.reclaimable >= CHANGE]
        return sorted(found, key=lambda t: -t.reclaimable)

    @property
    def losers(self) -> list[TeamImpact]:
        return [t for t in self.changed if not t.is_subject and t.loss <= -CHANGE]


def impact(
    rows: list[TeamQuota],
    usage: Mapping[str, QueueUsage],
    *,
    pool_centi: int,
    parent: str,
    new_pool_centi: int | None = None,
    changes: Mapping[int, TeamQuota] | None = None,
    before: Division | None = None,
    model: Model = NO_MODEL,
    after_model: Model | None = None,
    also_changed: Collection[int] = (),
    trace: Trace | None = None,
    busy_trace: Trace | None = None,
    every_team: bool = False,
    fill: int = 0,
) -> Impact:
    """Every team's share now and after ``changes`` (quota rows by team id; an id not in
    ``rows`` is a new team), the pool becoming ``new_pool_centi`` and the model becoming
    ``after_model`` (past usage to try; ``also_changed``: the teams it is about).
    ``before``, when given, is the division already computed for ``rows`` (the ready
    view's): the decision's changes are patched into its columns, one division is
    computed after them, and only the teams whose numbers may move are built (all of
    them with ``every_team``; ``fill``: and the first teams that keep their numbers, up to
    that many in all, to show beside them). ``trace``/``busy_trace`` record the steps."""
    if before is None:
        inputs = OrgInputs.of(rows, usage)
        before = divide_org(inputs, pool_centi=pool_centi, parent=parent, model=model)
    inputs = before.inputs
    after_inputs, touched = inputs.changed(dict(changes or {}), usage)
    after_pool = pool_centi if new_pool_centi is None else new_pool_centi
    same = not changes and after_pool == pool_centi and after_model is None
    if same and trace is None and busy_trace is None:
        after = replace(before, inputs=after_inputs)  # nothing to divide again
    else:
        after = divide_org(
            after_inputs,
            pool_centi=after_pool,
            parent=parent,
            model=after_model or model,
            trace=trace,
            busy_trace=busy_trace,
        )
    existing = len(inputs)
    also = set(also_changed)
    subjects = set(touched) | {inputs.index[t] for t in also if t in inputs.index}
    if every_team:
        built = list(range(len(after_inputs)))
    else:
        chosen = subjects | set(_may_move(before, after, existing, touched).tolist())
        for i in range(existing):  # the first teams in row order, to fill the list shown
            if len(chosen) >= fill:
                break
            chosen.add(i)
        built = sorted(chosen)
    result = [_team(i, before, after, existing, i in subjects) for i in built]
    return Impact(
        pool_before=gpus(pool_centi),
        pool_after=gpus(after_pool),
        teams=result,
        total=len(after_inputs),
        beyond_pool=after.within_pool is not after.if_all_busy
        or before.within_pool is not before.if_all_busy,
    )


def _may_move(
    before: Division, after: Division, existing: int, touched: Sequence[int]
) -> npt.NDArray[np.intp]:
    """The existing teams whose shown figures may differ (a superset: each is then judged
    exactly, as the page rounds), and those that may run above what they keep. Only the
    rows whose doubles differ from ``before`` are judged; the others' reclaims are the
    ready division's, found once for it. ``touched``: the rows whose quotas changed."""
    moves = np.zeros(existing, dtype=np.bool_)
    for figure in ("if_all_busy", "within_pool"):
        was, will = getattr(before, figure), getattr(after, figure)[:existing]
        moves[_rounded_may_differ(was, will, _differ(was, will))] = True
    now_before, now_after = before.fair_now, after.fair_now[:existing]
    now_rows = _differ(now_before, now_after)
    moves[_rounded_may_differ(now_before, now_after, now_rows)] = True
    above, reclaims = _reclaims(before)
    # (A row twice is the same values written twice.)
    patched = np.concatenate((now_rows, np.array([i for i in touched if i < existing], np.intp)))
    if len(patched):
        above, reclaims = above.copy(), reclaims.copy()
        above[patched], reclaims[patched] = _reclaims_of(after, patched)
    found = np.flatnonzero(reclaims)
    # The pages name the teams KAI may take the most from: the largest, with a margin
    # for the exact rounding (``Impact.reclaims`` sorts what is built). Those below the
    # last one's value are left out before the sort (ties kept: the earlier rows win).
    if len(found) > RECLAIMS_BUILT:
        values = above[found]
        cut = len(values) - RECLAIMS_BUILT
        found = found[values >= np.partition(values, cut)[cut]]
    moves[found[np.argsort(-above[found], kind="stable")[:RECLAIMS_BUILT]]] = True
    return np.flatnonzero(moves)  # in row order, each once


def _reclaims(division: Division) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.bool_]]:
    """Every team's GPUs in use above what it keeps, and whether it may run above it,
    found once per division (a keystroke patches the rows it moves)."""
    found = division.derived.get("reclaims")
    if found is None:
        found = _reclaims_of(division, np.arange(len(division.inputs)))
        division.derived["reclaims"] = found
    return cast(tuple[npt.NDArray[np.float64], npt.NDArray[np.bool_]], found)


def _reclaims_of(
    division: Division, rows: npt.NDArray[np.intp]
) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.bool_]]:
    """``_reclaims`` of ``rows`` (a superset of those KAI may take from, judged exactly
    when built)."""
    inputs = division.inputs
    fair = np.nan_to_num(division.fair_now[rows])
    kept = np.maximum(np.round(fair, 2), inputs.quota[rows])
    above = inputs.allocated[rows] - kept
    reclaims = (np.round(above, 2) >= CHANGE) | _near_half(fair) | _near_half(above)
    return above, inputs.shown[rows] & reclaims


def _differ(a: npt.NDArray[np.float64], b: npt.NDArray[np.float64]) -> npt.NDArray[np.intp]:
    """The rows whose doubles differ bit for bit (a superset of those that differ as
    numbers, a missing one as 0: each is judged after)."""
    return np.flatnonzero(a.view(np.int64) != b.view(np.int64))


def _near_half(x: npt.NDArray[np.float64]) -> npt.NDArray[np.bool_]:
    """Where numpy's rounding to two decimals may differ from Python's: within a hair
    of a half hundredth (elsewhere the two agree)."""
    scaled = np.abs(x * 100)
    near: npt.NDArray[np.bool_] = np.abs(scaled - np.floor(scaled) - 0.5) < 1e-6
    return near


def _rounded_may_differ(
    a: npt.NDArray[np.float64], b: npt.NDArray[np.float64], rows: npt.NDArray[np.intp]
) -> npt.NDArray[np.intp]:
    """Of ``rows`` (those whose doubles differ: equal doubles never show differently),
    those where two figures may show differently to two decimals (a missing one shows
    as 0)."""
    x, y = np.nan_to_num(a[rows]), np.nan_to_num(b[rows])
    differ = (np.round(x, 2) != np.round(y, 2)) | _near_half(x) | _near_half(y)
    moved: npt.NDArray[np.intp] = rows[(x != y) & differ]
    return moved


def _team(i: int, before: Division, after: Division, existing: int, subject: bool) -> TeamImpact:
    inputs, old = after.inputs, before.inputs
    shown = bool(inputs.shown[i])
    known = i < existing
    return TeamImpact(
        team_id=inputs.ids[i],
        name=inputs.teams[i],
        guarantee_before=float(old.quota[i]) if known else 0.0,
        guarantee_after=float(inputs.quota[i]),
        busy_before=round(float(before.if_all_busy[i]), 2) if known else None,
        busy_after=round(float(after.if_all_busy[i]), 2),
        now_before=round(float(before.fair_now[i]), 2) if known and shown else None,
        now_after=round(float(after.fair_now[i]), 2) if shown else None,
        is_subject=subject,
        in_use=float(inputs.allocated[i]) if shown else None,
        limit_after=float(inputs.limit[i]),
        within_before=round(float(before.within_pool[i]), 2) if known else None,
        within_after=round(float(after.within_pool[i]), 2),
    )


def _delta(before: float | None, after: float | None) -> float:
    return round((after or 0.0) - (before or 0.0), 2)
