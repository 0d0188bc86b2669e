"""GPU share per team: one cluster read per interval, shared by every viewer."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Protocol

from app.core import metrics
from app.core.models import Team
from app.core.quantities import gpus
from app.usage.fairshare import UNLIMITED, QueueInput, Trace, fair_shares
from app.usage.sources import (
    ClusterTop,
    KaiMetricsSource,
    MetricsError,
    QueueUsage,
    UsageReader,
)

TEAM_QUEUE_PREFIX = "team-"


@dataclass(frozen=True)
class Model:
    """What KAI's division depends on beyond the org's own rows: its top level (the
    cluster's GPUs and every top-level queue; None: unknown, the pool alone is divided)
    and time-based fairshare (kValue, and each queue's past usage as a fraction of the
    cluster; kValue 0: off). Every figure (gauges, impact, what-if) uses the same one."""

    top: ClusterTop | None = None
    k_value: float = 0.0
    usage: Mapping[str, float] = field(default_factory=dict)
    # Time-based fairshare is on in KAI but the portal cannot read the usage it weighs.
    history_error: str | None = None

    @property
    def weighs_history(self) -> bool:
        return self.k_value > 0 and any(v > 0 for v in self.usage.values())

    @property
    def cluster_gpus(self) -> float | None:
        return self.top.gpus if self.top is not None and self.top.gpus > 0 else None


NO_MODEL = Model()


@dataclass(frozen=True, slots=True)
class GpuShare:
    """A team's GPU share, in GPUs, as the gauge draws it."""

    guaranteed: float
    limit: float
    allocated: float | None
    requested: float | None
    pool: float
    fair_now: float | None = None
    usable_now: float | None = None
    if_all_busy: float | None = None
    # KAI's time-based fairshare: the fair share now without past usage, where usage
    # moved it (the team page says by how much).
    fair_without_history: float | None = None
    smallest_waiting: float | None = None  # GPUs of the smallest waiting pod, if known
    # The cluster has the queue but reports no usage for it (KAI releases before the queue
    # controller wrote status.allocated): shown as "not reported", never as 0.
    unreported: bool = False
    # Not approved yet: guarantee and limit are what the team asked for.
    asked: bool = False

    @property
    def above_fair_share(self) -> bool:
        """Uses more than KAI's fair share right now: borrowing that KAI may reclaim."""
        if self.allocated is None or self.fair_now is None:
            return False
        return self.allocated > self.fair_now + 0.005

    @property
    def pending(self) -> float:
        """Demand not yet running: requested beyond what is allocated."""
        if self.allocated is None or self.requested is None:
            return 0.0
        return max(0.0, self.requested - self.allocated)

    @property
    def reclaim_stops_at(self) -> float | None:
        """Where a waiting pod's start by reclaim stops: KAI reclaims for a team only
        while it stays within its fair share, so the smallest waiting pod must fit in
        what is left of it. None: it fits (or the size is unknown)."""
        if self.smallest_waiting is None or self.fair_now is None or self.allocated is None:
            return None
        if self.allocated + self.smallest_waiting <= self.fair_now + 0.005:
            return None
        return round(max(0.0, self.fair_now - self.allocated), 2)

    @property
    def borrowed(self) -> float:
        if self.allocated is None:
            return 0.0
        return max(0.0, self.allocated - self.guaranteed)

    @property
    def scale(self) -> float:
        """The gauge's full width: the pool, or more if a value exceeds it."""
        values = [self.pool, self.limit, self.allocated or 0.0, self.requested or 0.0]
        return max(max(values), 0.01)


@dataclass(frozen=True, slots=True)
class TeamQuota:
    """The part of a team that fair share depends on."""

    id: int
    name: str
    gpu_quota_centi: int
    gpu_limit_centi: int
    weight_centi: int
    priority: int
    # When the team was created, in whole seconds: KAI breaks ties by its queue's creation
    # time (one-second resolution); the cluster's own timestamp wins where it is known.
    created: int = 0
    # Only a ready team runs work: the others show their quota, not usage.
    ready: bool = True

    @property
    def queue_name(self) -> str:
        return f"{TEAM_QUEUE_PREFIX}{self.name}"


def display_name_of(queue: str) -> str:
    """The displayName the portal writes on a team's queue: the team's name."""
    return queue.removeprefix(TEAM_QUEUE_PREFIX)


class TeamRowLike(Protocol):
    @property
    def gpu_quota_centi(self) -> int: ...

    @property
    def gpu_limit_centi(self) -> int: ...


@dataclass(frozen=True)
class OrgView:
    """Everything pages need that depends on every team, computed once per refresh."""

    rows: list[TeamQuota]
    shares: dict[int, GpuShare]
    names: dict[int, str]
    borrowers: list[tuple[str, float]]  # (team, GPUs above its guarantee), most first
    allocated: float | None  # GPUs in use across the org, when reported
    committed_centi: int = 0  # guarantees held in the pool (every row is a committed team)

    @classmethod
    def of(cls, rows: list[TeamQuota], shares: dict[int, GpuShare]) -> OrgView:
        names = {row.id: row.name for row in rows}
        borrowers = sorted(
            ((names[tid], s.borrowed) for tid, s in shares.items() if s.borrowed > 0.005),
            key=lambda b: -b[1],
        )
        used = [s.allocated for s in shares.values() if s.allocated is not None]
        return cls(
            rows,
            shares,
            names,
            borrowers,
            round(sum(used), 2) if used else None,
            sum(row.gpu_quota_centi for row in rows),
        )


class UsageCache:
    """Reads usage of all queues at most once per ``ttl`` seconds, whoever asks."""

    def __init__(
        self,
        backend: UsageReader,
        *,
        ttl: float = 5.0,
        prometheus: KaiMetricsSource | None = None,
        k_value: float | None = None,
    ) -> None:
        self.backend = backend
        self.prometheus = prometheus
        self.k_value = k_value  # None: the SchedulingShard's, else KAI's default 1.0
        self.model = Model(k_value=k_value or 0.0)
        self.fair_override: dict[str, float] | None = None
        self.ttl = ttl
        self._lock = threading.Lock()
        self._at = float("-inf")
        self._queues: frozenset[str] = frozenset()
        self._data: dict[str, QueueUsage] = {}
        self.reads = 0
        self.error: str | None = None
        self._shares_key: object = None
        self._shares_rows: list[TeamQuota] | None = None
        self._shares_inputs: tuple[dict[str, QueueUsage], dict[str, float] | None, Model] | None = (
            None
        )
        self._rows: tuple[float, tuple[int, str], list[TeamQuota]] | None = None
        self._view: tuple[float, tuple[int, str], OrgView] | None = None
        self._built: tuple[dict[int, GpuShare], OrgView] | None = None  # view per shares
        self._compute = threading.Lock()  # one org-wide computation at a time
        self.refresher_running = False
        self._shares: dict[int, GpuShare] = {}

    def get(self, queue_names: list[str]) -> dict[str, QueueUsage]:
        wanted = frozenset(queue_names)
        with self._lock:
            fresh = time.monotonic() - self._at < self.ttl
            if not fresh or not wanted <= self._queues:
                names = sorted(wanted | self._queues) if fresh else sorted(wanted)
                try:
                    self._data = self.backend.usage(names)
                    self.error = None
                except Exception as exc:  # shown on the page, not hidden behind zeros
                    self.error = f"usage could not be read from the cluster: {exc}"
                    self._data = {}
                top = None
                try:
                    top = self.backend.cluster_top()
                except Exception as exc:  # the pool alone is divided meanwhile; shown
                    self.error = self.error or f"the cluster's GPUs could not be read: {exc}"
                past: dict[str, float] = {}
                if self.prometheus is not None:
                    past = self._read_prometheus(names)
                self.model = self._model(top, past)
                self._queues = frozenset(names)
                self._at = time.monotonic()
                self.reads += 1
                metrics.CLUSTER_READS.labels("miss").inc()
            else:
                metrics.CLUSTER_READS.labels("hit").inc()
            return {name: self._data[name] for name in wanted if name in self._data}

    def _model(self, top: ClusterTop | None, past: dict[str, float]) -> Model:
        """kValue: the setting, else the SchedulingShard's, else KAI's default (1.0)."""
        if self.k_value is not None:
            k_value = self.k_value
        elif top is not None and top.k_value is not None:
            k_value = top.k_value
        else:
            k_value = 1.0
        history_error = None
        if top is not None and top.usage_db and self.prometheus is None:
            history_error = (
                "KAI's time-based fairshare is on (its SchedulingShard sets usageDBConfig), "
                "but the portal cannot read each queue's past usage: set "
                "PORTAL_PROMETHEUS_URL (KAI's kai_queue_gpu_usage). Until then the fair "
                "shares computed here leave past usage out."
            )
        return Model(top=top, k_value=k_value, usage=past, history_error=history_error)

    def _read_prometheus(self, names: list[str]) -> dict[str, float]:
        """KAI's own allocation and fair share, when Prometheus is configured. Series are
        matched on the queue's metadata.name where KAI exports it (queue_metadata_name);
        an older KAI labels them with the displayName when one is set (the portal sets
        it to the team's name), else with the queue's name: both are looked up."""
        assert self.prometheus is not None
        try:
            kai = self.prometheus.read()
        except MetricsError as exc:
            self.error = str(exc)
            self.fair_override = None
            return {}

        def find(series: dict[str, float], queue: str) -> float | None:
            labels = (queue,) if kai.by_metadata_name else (display_name_of(queue), queue)
            for label in labels:
                if label in series:
                    return series[label]
            return None

        fair: dict[str, float] = {}
        for name in names:
            share = find(kai.fair_share, name)
            if share is not None:
                fair[name] = share
            allocated = find(kai.allocated, name)
            if allocated is not None:
                known = self._data.get(name)
                requested = known.requested_gpu if known else allocated
                created = known.created if known else None
                self._data[name] = QueueUsage(
                    allocated_gpu=allocated, requested_gpu=requested, created=created
                )
        self.fair_override = fair
        # Time-based fairshare: the usage KAI's scheduler used, per queue: every queue
        # it exports where series carry the metadata name (the top level's too), else
        # the portal's queues found as above.
        past = dict(kai.usage) if kai.by_metadata_name else {}
        for name in names:
            used = find(kai.usage, name)
            if used is not None:
                past[name] = used
        return past

    def shares(
        self, teams: list[TeamQuota], *, pool_centi: int, parent: str
    ) -> dict[int, GpuShare]:
        """Shares of all teams, computed again only when what they depend on changed: the
        quotas, the usage read, the pool, KAI's own fair shares. Comparing those costs a
        few milliseconds at 10,000 teams; the computation, a few hundred (the refresher
        re-reads both every interval and most intervals nothing moved)."""
        usage = self.get([t.queue_name for t in teams])
        fair, model = self.fair_override, self.model
        key = (pool_centi, parent)
        with self._lock:
            last_key, last_rows, last_inputs, last = (
                self._shares_key,
                self._shares_rows,
                self._shares_inputs,
                self._shares,
            )
        # Compared outside the lock (pages take it); the same list object means the same rows.
        if (
            last_key == key
            and last_inputs == (usage, fair, model)
            and (teams is last_rows or teams == last_rows)
        ):
            return last
        computed = shares_for(
            teams, usage, pool_centi=pool_centi, parent=parent, fair_override=fair, model=model
        )
        with self._lock:
            self._shares_key, self._shares_rows, self._shares = key, teams, computed
            self._shares_inputs = (usage, fair, model)
        return computed

    def org_view(
        self, load: Callable[[], list[TeamQuota]], *, pool_centi: int, parent: str
    ) -> OrgView:
        """The org's quota rows, shares and what pages derive from all of them, computed
        by one thread at a time and at most once per ``ttl``: a page view reads a ready
        result (the refresher keeps it fresh), and when it is stale, one caller computes
        while the others wait for that result instead of each computing it again."""
        wanted = (pool_centi, parent)
        view = self._fresh_view(wanted)
        if view is not None:
            return view
        with self._compute:
            view = self._fresh_view(wanted)  # another caller may have computed it meanwhile
            if view is not None:
                return view
            return self._compute_view(load, wanted)

    def refresh_view(
        self, load: Callable[[], list[TeamQuota]], *, pool_centi: int, parent: str
    ) -> OrgView:
        """Compute the view now (the refresher's call)."""
        with self._compute:
            return self._compute_view(load, (pool_centi, parent))

    def _compute_view(
        self, load: Callable[[], list[TeamQuota]], wanted: tuple[int, str]
    ) -> OrgView:
        """Quotas from the database (another replica may have changed them), usage from
        the cluster at most once per ``ttl``, shares computed over every team."""
        pool_centi, parent = wanted
        rows = load()
        shares = self.shares(rows, pool_centi=pool_centi, parent=parent)
        with self._lock:
            built = self._built
        # Nothing it shows moved (the same shares object means the same rows and usage).
        view = built[1] if built is not None and built[0] is shares else OrgView.of(rows, shares)
        with self._lock:
            self._built = (shares, view)
            self._rows = (time.monotonic(), wanted, rows)
            self._view = (time.monotonic(), wanted, view)
        return view

    def _fresh_view(self, wanted: tuple[int, str]) -> OrgView | None:
        """The ready view, unless invalidated by a decision; one older than ``ttl`` only
        while the refresher runs (it is about to replace it)."""
        with self._lock:
            cached = self._view
            if cached is None or cached[1] != wanted:
                return None
            age = time.monotonic() - cached[0]
            if age < self.ttl or (self.refresher_running and age < 3 * self.ttl + 1):
                return cached[2]
        return None

    def forget(self) -> None:
        """Read usage and quotas afresh at the next view."""
        with self._lock:
            self._rows = None
            self._view = None
            self._at = float("-inf")

    def forget_quotas(self) -> None:
        """Called after a decision, so the next view reads the new quotas."""
        with self._lock:
            self._rows = None
            self._view = None


def share_of(
    team: Team | TeamQuota | TeamRowLike, usage: QueueUsage | None, pool_centi: int
) -> GpuShare:
    reported = usage is not None and usage.reported
    return GpuShare(
        guaranteed=gpus(team.gpu_quota_centi),
        limit=gpus(team.gpu_limit_centi),
        allocated=usage.allocated_gpu if usage is not None and reported else None,
        requested=usage.requested_gpu if usage is not None and reported else None,
        pool=gpus(pool_centi),
        unreported=usage is not None and not usage.reported,
    )


def _usable(fair: float, limit: float, demand: float) -> float:
    """What a queue can use of its fair share: never above its limit or its demand."""
    cap = demand if limit == UNLIMITED else min(limit, demand)
    return max(0.0, min(fair, cap))


def _capped(usable: float, top: ClusterTop | None, others_hold: float) -> float:
    if top is None:
        return usable
    return max(0.0, min(usable, top.gpus - others_hold))


def shares_for(
    teams: list[TeamQuota],
    usage: dict[str, QueueUsage],
    *,
    pool_centi: int,
    parent: str,
    fair_override: dict[str, float] | None = None,
    model: Model = NO_MODEL,
    trace: Trace | None = None,
    busy_trace: Trace | None = None,
) -> dict[int, GpuShare]:
    """Every team's share with KAI's fair share now and if every team were busy
    (``trace``, ``busy_trace``: where the division of "now" and of "if every team were
    busy" record their steps, for the explanation).

    ``teams`` are all the teams holding a queue under the org's parent queue: fair share
    depends on everyone, so it is computed over all of them, never one team alone. Where
    the cluster is known (``model.top``) the division starts where KAI's does: every
    schedulable GPU of the cluster among every top-level queue, the org's among them
    (its pool is its guarantee there; with an unlimited limit it may grow past it).
    """
    pool = gpus(pool_centi)
    names = [t.queue_name for t in teams]
    raws = [usage.get(name) if t.ready else None for t, name in zip(teams, names, strict=True)]
    orders = [
        t.created if u is None or u.created is None else u.created
        for t, u in zip(teams, (usage.get(name) for name in names), strict=True)
    ]
    uids = [(usage.get(name) or QueueUsage(0, 0)).uid for name in names]
    # What each ready team's queue reports; teams still provisioning show no usage.
    now_demand = [u.requested_gpu if u is not None and u.reported else 0.0 for u in raws]
    busy_demand = [max(gpus(t.gpu_limit_centi), pool) for t in teams]
    past = model.usage
    top = model.top if model.cluster_gpus is not None else None
    total = top.gpus if top is not None else pool
    own = next((q for q in top.queues if q.name == parent), None) if top is not None else None
    # The portal writes the org's queue: its limit is unlimited or its pool
    # (PORTAL_ORG_QUEUE_GPU_LIMIT). Capped at the pool, it follows a pool being tried.
    own_limit = UNLIMITED if own is None else own.limit
    if own is not None and own.limit >= 0 and abs(own.limit - own.quota) < 0.005:
        own_limit = pool
    others = [
        QueueInput(
            q.name,
            q.quota,
            q.limit,
            q.weight,
            q.priority,
            q.requested,
            order=q.created or 0,
            usage=past.get(q.name, 0.0),
            uid=q.uid,
        )
        for q in (top.queues if top is not None else ())
        if q.name != parent
    ]

    def tree(demands: list[float]) -> list[QueueInput]:
        children = tuple(
            QueueInput(
                name,
                gpus(t.gpu_quota_centi),
                gpus(t.gpu_limit_centi),
                gpus(t.weight_centi),
                t.priority,
                demand,
                order,
                usage=past.get(name, 0.0),
                uid=uid,
            )
            for t, name, demand, order, uid in zip(teams, names, demands, orders, uids, strict=True)
        )
        org = QueueInput(
            parent,
            pool,
            own_limit,
            own.weight if own is not None else 1.0,
            own.priority if own is not None else 100,
            order=(own.created or 0) if own is not None else 0,
            uid=own.uid if own is not None else "",
            usage=past.get(parent, 0.0),
            children=children,
        )
        return [org, *others]

    k_value = model.k_value
    fair_now = fair_shares(total, tree(now_demand), k_value, trace) if teams else {}
    if fair_override is not None:
        # KAI's own figure from Prometheus, where it has one.
        fair_now = {**fair_now, **fair_override}
    fair_busy = fair_shares(total, tree(busy_demand), k_value, busy_trace) if teams else {}
    # What past usage moved: the same division without it.
    plain = fair_shares(total, tree(now_demand), 0.0) if teams and model.weighs_history else {}
    # KAI's deserved amounts are not capped by what the cluster has (a pool above the
    # cluster's GPUs is a fair share KAI cannot give): what a team can use now is also
    # capped by the GPUs the rest of the org does not hold.
    held = [raw.allocated_gpu if raw is not None and raw.reported else 0.0 for raw in raws]
    all_held = sum(held)
    result = {}
    for i, t in enumerate(teams):
        raw = raws[i]
        shown = raw is not None and raw.reported
        limit = gpus(t.gpu_limit_centi)
        fair = fair_now.get(names[i]) if shown else None
        busy = fair_busy.get(names[i])
        without = plain.get(names[i]) if fair is not None else None
        moved = without is not None and fair is not None and abs(without - fair) >= 0.005
        result[t.id] = GpuShare(
            guaranteed=gpus(t.gpu_quota_centi),
            limit=limit,
            allocated=raw.allocated_gpu if raw is not None and shown else None,
            requested=raw.requested_gpu if raw is not None and shown else None,
            pool=pool,
            unreported=raw is not None and not shown,
            fair_now=None if fair is None else round(fair, 2),
            usable_now=None
            if fair is None
            else round(_capped(_usable(fair, limit, now_demand[i]), top, all_held - held[i]), 2),
            if_all_busy=None if busy is None else round(_usable(busy, limit, busy_demand[i]), 2),
            fair_without_history=round(without, 2) if moved and without is not None else None,
            smallest_waiting=raw.smallest_waiting if raw is not None and shown else None,
        )
    return result
