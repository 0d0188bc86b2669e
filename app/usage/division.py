"""KAI's division of an org's GPUs over its teams, as columns: the org's teams read once
per view (``OrgInputs``), every team's fair share now, if every team were busy and
without past usage computed with array arithmetic (``divide_org``), and a decision's
changes patched into the same columns (``OrgInputs.changed``), so that what a decision
does is computed from the ready view, not rebuilt from every team.

The figures are bit for bit those of ``fairshare.fair_shares`` over the queue tree (its
loop is what records the steps a page explains; this is what the pages and previews
read): ``tests/usage/test_fairshare_columns.py`` and ``test_division.py`` hold them to it.
"""

from __future__ import annotations

import bisect
import dataclasses
import functools
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt

from app.usage.fairshare import (
    UNLIMITED,
    Columns,
    QueueInput,
    Trace,
    can_use_columns,
    divide,
    divide_columns,
    fair_shares,
)
from app.usage.model import Model, TeamQuota
from app.usage.sources import ClusterTop, QueueUsage, TopQueue

Floats = npt.NDArray[np.float64]
Flags = npt.NDArray[np.bool_]

NO_USAGE = QueueUsage(0, 0)
# One division over columns at a time in a process. Each of its array operations hands
# the interpreter's lock over (numpy releases it over large arrays): what-if keystrokes
# dividing at once passed it back and forth hundreds of times each, every handover a
# wait. Serialised they cost less CPU, and one division is short (bench/README.md).
DIVIDING = threading.Lock()


@dataclass(frozen=True)
class OrgInputs:
    """The org's teams as KAI's division reads them, one entry per row in row order
    (the GPU fields in GPUs), with the readings of their queues; ``perm``: the rows in
    KAI's order (creation time, then uid or name, then name), ``keys`` those keys sorted."""

    ids: list[int]
    names: list[str]  # queue names
    teams: list[str]  # team names
    quota: Floats
    limit: Floats
    weight: Floats
    priority: npt.NDArray[np.int64]
    ready: Flags
    shown: Flags  # ready, and its queue reports usage
    unreported: Flags  # ready, the queue exists, but it carries no status
    allocated: Floats  # 0 where not shown
    requested: Floats  # 0 where not shown: the demand "now"
    smallest_waiting: list[float | None]
    perm: npt.NDArray[np.intp]
    keys: list[tuple[int, str, str]]

    @classmethod
    def of(
        cls, rows: Sequence[TeamQuota], usage: Mapping[str, QueueUsage], resource: str = "gpu"
    ) -> OrgInputs:
        """The inputs of ``rows`` (one key's) with the readings of ``resource``."""
        if resource != "gpu":  # each reading as the GPU's fields carry it
            usage = {name: _as_gpu(u, resource) for name, u in usage.items()}
        names = [row.queue_name for row in rows]
        found = [usage.get(name) for name in names]
        raws = [u if row.ready else None for row, u in zip(rows, found, strict=True)]
        shown = [u is not None and u.reported for u in raws]
        seen = [u if s else None for u, s in zip(raws, shown, strict=True)]
        keys = [_key(row, name, u) for row, name, u in zip(rows, names, found, strict=True)]
        perm = sorted(range(len(rows)), key=keys.__getitem__)
        return cls(
            ids=[row.id for row in rows],
            names=names,
            teams=[row.name for row in rows],
            quota=np.array([row.quota_centi for row in rows], dtype=np.float64) / 100,
            limit=np.array([row.limit_centi for row in rows], dtype=np.float64) / 100,
            weight=np.array([row.weight_centi for row in rows], dtype=np.float64) / 100,
            priority=np.array([row.priority for row in rows], dtype=np.int64),
            ready=np.array([row.ready for row in rows], dtype=np.bool_),
            shown=np.array(shown, dtype=np.bool_),
            unreported=np.array(
                [u is not None and not s for u, s in zip(raws, shown, strict=True)], dtype=np.bool_
            ),
            allocated=np.array(
                [0.0 if u is None else u.allocated_gpu for u in seen],
                dtype=np.float64,
            ),
            requested=np.array(
                [0.0 if u is None else u.requested_gpu for u in seen],
                dtype=np.float64,
            ),
            smallest_waiting=[None if u is None else u.smallest_waiting for u in seen],
            perm=np.array(perm, dtype=np.intp),
            keys=[keys[i] for i in perm],
        )

    def __len__(self) -> int:
        return len(self.ids)

    @functools.cached_property
    def in_order(self) -> bool:
        """Whether the rows are already in KAI's order (teams created one after another,
        as most are): the division then reads the columns as they are, not reordered."""
        return bool(np.array_equal(self.perm, np.arange(len(self.perm))))

    @functools.cached_property
    def index(self) -> dict[int, int]:
        """Team id -> row, built once per inputs (a decision touches a few rows)."""
        return {team_id: i for i, team_id in enumerate(self.ids)}

    def changed(
        self, changes: Mapping[int, TeamQuota], usage: Mapping[str, QueueUsage]
    ) -> tuple[OrgInputs, list[int]]:
        """These inputs with ``changes`` (quota rows by team id; an id not among them is a
        new team, appended: it has no queue yet, so nothing runs in it). Returns the new
        inputs and the rows that changed."""
        at = self.index if changes else {}
        quota, limit = self.quota.copy(), self.limit.copy()
        weight, priority = self.weight.copy(), self.priority.copy()
        touched: list[int] = []
        new: list[TeamQuota] = []
        for team_id, row in changes.items():
            i = at.get(team_id)
            if i is None:
                new.append(row)
                continue
            quota[i], limit[i] = row.quota_centi / 100, row.limit_centi / 100
            weight[i], priority[i] = row.weight_centi / 100, row.priority
            touched.append(i)
        if not new:
            return (
                _replace(self, quota=quota, limit=limit, weight=weight, priority=priority),
                touched,
            )
        perm, keys = list(self.perm), list(self.keys)
        for offset, row in enumerate(new):
            key = _key(row, row.queue_name, usage.get(row.queue_name))
            place = bisect.bisect_right(keys, key)
            keys.insert(place, key)
            perm.insert(place, len(self) + offset)
            touched.append(len(self) + offset)
        n = len(new)
        zeros, no = np.zeros(n), np.zeros(n, dtype=np.bool_)
        return (
            OrgInputs(
                ids=self.ids + [row.id for row in new],
                names=self.names + [row.queue_name for row in new],
                teams=self.teams + [row.name for row in new],
                quota=np.concatenate((quota, [row.quota_centi / 100 for row in new])),
                limit=np.concatenate((limit, [row.limit_centi / 100 for row in new])),
                weight=np.concatenate((weight, [row.weight_centi / 100 for row in new])),
                priority=np.concatenate(
                    (priority, np.array([row.priority for row in new], dtype=np.int64))
                ),
                ready=np.concatenate((self.ready, no)),
                shown=np.concatenate((self.shown, no)),
                unreported=np.concatenate((self.unreported, no)),
                allocated=np.concatenate((self.allocated, zeros)),
                requested=np.concatenate((self.requested, zeros)),
                smallest_waiting=self.smallest_waiting + [None] * n,
                perm=np.array(perm, dtype=np.intp),
                keys=keys,
            ),
            touched,
        )


def _as_gpu(found: QueueUsage, resource: str) -> QueueUsage:
    allocated, requested = found.amounts(resource)
    return dataclasses.replace(
        found, allocated_gpu=allocated, requested_gpu=requested, smallest_waiting=None
    )


def _key(row: TeamQuota, name: str, found: QueueUsage | None) -> tuple[int, str, str]:
    """KAI's order of queues: creation time (the cluster's where known), uid or name."""
    created = row.created if found is None or found.created is None else found.created
    uid = (found or NO_USAGE).uid
    return (created, uid or name, name)


def _replace(
    inputs: OrgInputs, **arrays: npt.NDArray[np.float64] | npt.NDArray[np.int64]
) -> OrgInputs:
    fields = {name: getattr(inputs, name) for name in OrgInputs.__dataclass_fields__}
    return OrgInputs(**{**fields, **arrays})


@dataclass(frozen=True)
class Division:
    """Every team's figures of one division, in the inputs' row order: KAI's fair share
    now (NaN where the team shows no usage), what it can use if every team of the org
    were busy and the rest of the cluster idle, what it can use now, its fair share
    without past usage (NaN unless moved), and what it can use if every team of the org
    were busy and the rest of the cluster too: the pool's GPUs alone divided, the floor
    KAI reclaims for whatever the rest of the cluster does (``if_all_busy`` itself where
    the cluster has no GPUs beyond the pool). ``idle_elsewhere``: GPUs of the cluster
    no queue holds or asks for now, beyond the org's own (None: the pool alone is known)."""

    inputs: OrgInputs
    pool: float
    fair_now: Floats
    if_all_busy: Floats
    usable_now: Floats
    without_history: Floats
    within_pool: Floats
    idle_elsewhere: float | None = None
    # What readers derive once from this division (a ready view's serves every preview
    # over it until the next view); never compared or shown.
    derived: dict[str, object] = field(default_factory=dict, init=False, compare=False, repr=False)


def divide_org(
    inputs: OrgInputs,
    *,
    pool_centi: int,
    parent: str,
    model: Model,
    fair_override: Mapping[str, float] | None = None,
    trace: Trace | None = None,
    busy_trace: Trace | None = None,
) -> Division:
    """Every team's fair share with today's demand and if every team were busy, over the
    whole org and through KAI's top level (``model.top``: every schedulable GPU of the
    cluster among every top-level queue, the org's among them), as ``shares_for`` shows
    them. "Busy": every team of the org asks for its limit (at least the pool) while the
    rest of the cluster asks for nothing; "within the pool": the same teams with the
    org's pool alone. ``trace``/``busy_trace``: record the steps (the queue-by-queue
    division)."""
    pool = pool_centi / 100
    n = len(inputs)
    past = _past(inputs, model.usage)
    top = model.top if model.cluster_gpus is not None else None
    total = top.gpus if top is not None else pool
    busy_demand = np.maximum(inputs.limit, pool)
    level = _Level(inputs, pool, parent, top, past, model.usage)
    nan = np.full(n, np.nan)
    if n == 0:
        return Division(inputs, pool, nan, nan, nan, nan, nan)
    fair_now = level.fair(total, inputs.requested, model.k_value, trace)
    if fair_override is not None:
        at = {name: i for i, name in enumerate(inputs.names)}
        for name, value in fair_override.items():
            if name in at:
                fair_now[at[name]] = value
    fair_busy = level.fair(total, busy_demand, model.k_value, busy_trace, rest_idle=True)
    if_all_busy = _usable(fair_busy, inputs.limit, busy_demand)
    within = _within(level, total if top is not None else pool, busy_demand, model.k_value)
    fair_now = np.where(inputs.shown, fair_now, np.nan)
    held = inputs.allocated
    all_held = float(np.add.accumulate(held)[-1])
    usable = _usable(fair_now, inputs.limit, inputs.requested)
    if top is not None:
        usable = np.maximum(0.0, np.minimum(usable, top.gpus - (all_held - held)))
    without = nan
    if model.weighs_history:
        plain = level.fair(total, inputs.requested, 0.0, None)
        moved = inputs.shown & (np.abs(plain - fair_now) >= 0.005)
        without = np.where(moved, plain, np.nan)
    return Division(
        inputs=inputs,
        pool=pool,
        fair_now=fair_now,
        if_all_busy=if_all_busy,
        usable_now=usable,
        without_history=without,
        within_pool=if_all_busy if within is None else within,
        idle_elsewhere=_idle(top, all_held, level.others),
    )


def _within(level: _Level, total: float, demand: Floats, k_value: float) -> Floats | None:
    """Every team's usable share if every team of the org were busy and the rest of the
    cluster too: the pool alone divided. None where that is the busy figure itself (a
    cluster no larger than the pool, or an org queue capped at it)."""
    pool = level.pool
    if total <= pool + 0.005 or 0 <= level.own_limit <= pool + 0.005:
        return None
    return _usable(level.within(pool, demand, k_value), level.inputs.limit, demand)


def _idle(top: ClusterTop | None, held: float, others: Sequence[QueueInput]) -> float | None:
    """GPUs of the cluster neither the org's teams hold (``held``) nor another top-level
    queue asks for (None: the cluster unknown)."""
    if top is None:
        return None
    return max(0.0, round(top.gpus - held - sum(q.demand for q in others), 2))


def _past(inputs: OrgInputs, usage: Mapping[str, float]) -> Floats:
    if not usage:
        return np.zeros(len(inputs))
    return np.array([usage.get(name, 0.0) for name in inputs.names], dtype=np.float64)


def _usable(fair: Floats, limit: Floats, demand: Floats) -> Floats:
    """What a queue can use of its fair share: never above its limit or its demand."""
    return np.maximum(0.0, np.minimum(fair, can_use_columns(limit, demand)))


class _Level:
    """The org's queue among KAI's top level, and its teams as the level below it."""

    def __init__(
        self,
        inputs: OrgInputs,
        pool: float,
        parent: str,
        top: ClusterTop | None,
        past: Floats,
        usage: Mapping[str, float],
    ) -> None:
        self.inputs, self.pool, self.parent, self.past = inputs, pool, parent, past
        own = next((q for q in top.queues if q.name == parent), None) if top is not None else None
        self.own: TopQueue | None = own
        # The portal writes the org's queue: its limit is unlimited or its pool
        # (PORTAL_ORG_QUEUE_GPU_LIMIT). Capped at the pool, it follows a pool being tried.
        self.own_limit = UNLIMITED if own is None else own.limit
        if own is not None and own.limit >= 0 and abs(own.limit - own.quota) < 0.005:
            self.own_limit = pool
        self.own_usage = usage.get(parent, 0.0)
        self.others = [
            QueueInput(
                q.name,
                q.quota,
                q.limit,
                q.weight,
                q.priority,
                q.requested,
                order=q.created or 0,
                usage=usage.get(q.name, 0.0),
                uid=q.uid,
            )
            for q in (top.queues if top is not None else ())
            if q.name != parent
        ]
        columns = (inputs.quota, inputs.limit, inputs.weight, inputs.priority, past)
        if inputs.in_order:  # read, never written, by the division
            self.sorted = columns
        else:
            perm = inputs.perm
            self.sorted = (
                inputs.quota[perm],
                inputs.limit[perm],
                inputs.weight[perm],
                inputs.priority[perm],
                past[perm],
            )

    def _org(self, demand: float, children: tuple[QueueInput, ...] = ()) -> QueueInput:
        own = self.own
        return QueueInput(
            self.parent,
            self.pool,
            self.own_limit,
            own.weight if own is not None else 1.0,
            own.priority if own is not None else 100,
            demand=demand,
            order=(own.created or 0) if own is not None else 0,
            uid=own.uid if own is not None else "",
            usage=self.own_usage,
            children=children,
        )

    def fair(
        self,
        total: float,
        demand: Floats,
        k_value: float,
        trace: Trace | None,
        *,
        rest_idle: bool = False,
    ) -> Floats:
        """Every team's fair share (row order) for ``demand``; ``rest_idle``: the other
        top-level queues asking for nothing."""
        others = [dataclasses.replace(q, demand=0.0) for q in self.others] if rest_idle else None
        if trace is not None:
            return self._traced(total, demand, k_value, trace, others)
        with DIVIDING:
            # A parent's request is the sum of its children's, one after another in row
            # order.
            org = self._org(float(np.add.accumulate(demand)[-1]))
            org_fair = divide(total, [org, *(others or self.others)], k_value)[self.parent]
            return self._teams(org_fair, demand, k_value)

    def within(self, org_fair: float, demand: Floats, k_value: float) -> Floats:
        """Every team's fair share (row order) for ``demand`` of ``org_fair`` GPUs."""
        with DIVIDING:
            return self._teams(org_fair, demand, k_value)

    def _teams(self, org_fair: float, demand: Floats, k_value: float) -> Floats:
        quota, limit, weight, priority, past = self.sorted
        if self.inputs.in_order:
            level = Columns(quota, limit, weight, priority, demand, past)
            return divide_columns(org_fair, level, k_value)
        perm = self.inputs.perm
        level = Columns(quota, limit, weight, priority, demand[perm], past)
        fair = np.empty(len(perm))
        fair[perm] = divide_columns(org_fair, level, k_value)
        return fair

    def _traced(
        self,
        total: float,
        demand: Floats,
        k_value: float,
        trace: Trace,
        others: list[QueueInput] | None,
    ) -> Floats:
        """The queue-by-queue division (the one that records its steps)."""
        inputs, perm = self.inputs, self.inputs.perm
        created = [0] * len(inputs)
        for place, i in enumerate(perm):
            created[i] = place  # KAI's order, as the columns have it
        children = tuple(
            QueueInput(
                name,
                float(inputs.quota[i]),
                float(inputs.limit[i]),
                float(inputs.weight[i]),
                int(inputs.priority[i]),
                float(demand[i]),
                created[i],
                usage=float(self.past[i]),
            )
            for i, name in enumerate(inputs.names)
        )
        top = [self._org(0.0, children), *(self.others if others is None else others)]
        result = fair_shares(total, top, k_value, trace)
        return np.array([result[name] for name in inputs.names], dtype=np.float64)
