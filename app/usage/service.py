"""GPU share per team: one cluster read per interval, shared by every viewer."""

from __future__ import annotations

import math
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Hashable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Protocol, TypeVar, cast

import numpy as np

from app.core import metrics
from app.core.models import QuotaOwner
from app.core.quantities import gpus
from app.core.quota import GPU
from app.usage.division import Division, OrgInputs, divide_org
from app.usage.fairshare import Trace

# Re-exported: the pages and adapters read them from here.
from app.usage.model import NO_MODEL as NO_MODEL
from app.usage.model import TEAM_QUEUE_PREFIX as TEAM_QUEUE_PREFIX
from app.usage.model import Model as Model
from app.usage.model import ShareKey
from app.usage.model import TeamQuota as TeamQuota
from app.usage.sources import (
    ClusterTop,
    KaiMetricsSource,
    MetricsError,
    QueueUsage,
    UsageReader,
)


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
    # If every team of the org were busy and the rest of the cluster too: its share of
    # the pool's GPUs alone (``if_all_busy`` where the cluster has none beyond the pool).
    within_pool: float | None = None
    # GPUs of the cluster nobody holds or asks for now, beyond the org's (None: unknown).
    idle_elsewhere: float | None = None
    # KAI's time-based fairshare: the fair share now without past usage, where usage
    # moved it (the team page says by how much).
    fair_without_history: float | None = None
    smallest_waiting: float | None = None  # GPUs of the smallest waiting pod, if known
    # The cluster has the queue but reports no usage for it (KAI releases before the queue
    # controller wrote status.allocated): shown as "not reported", never as 0.
    unreported: bool = False
    # Not approved yet: guarantee and limit are what the team asked for.
    asked: bool = False
    unit: str = "GPU"  # what the figures count (a share of another resource: "cores")

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


def display_name_of(queue: str) -> str:
    """The displayName the portal writes on a team's queue: the team's name."""
    return queue.removeprefix(TEAM_QUEUE_PREFIX)


class TeamRowLike(Protocol):
    @property
    def quota_centi(self) -> int: ...

    @property
    def limit_centi(self) -> int: ...


@dataclass(frozen=True)
class OrgView:
    """Everything pages need that depends on every team, computed once per refresh."""

    rows: list[TeamQuota]
    shares: Mapping[int, GpuShare]
    names: dict[int, str]
    borrowers: list[tuple[str, float]]  # (team, GPUs above its guarantee), most first
    allocated: float | None  # GPUs in use across the org, when reported
    committed_centi: int = 0  # guarantees held in the pool (every row is a committed team)
    division: Division | None = None  # the division the shares come from (for previews)
    # Ready orderings for the overview: every team of the view by GPUs in use (most
    # first, then by name), and the borrowing and waiting teams.
    by_usage: tuple[int, ...] = ()
    borrowing: frozenset[int] = frozenset()
    waiting: frozenset[int] = frozenset()
    by_id: dict[int, TeamQuota] = field(default_factory=dict)
    busy_count: int = 0  # the first of ``by_usage`` that hold GPUs (the rest, by name)
    borrowing_by_usage: tuple[int, ...] = ()  # the borrowing teams, by usage
    waiting_by_usage: tuple[int, ...] = ()
    borrowing_by_name: tuple[int, ...] = ()  # the same teams by name (the default order)
    waiting_by_name: tuple[int, ...] = ()

    @classmethod
    def of(cls, rows: list[TeamQuota], shares: Shares) -> OrgView:
        """The view of ``rows`` (the rows ``shares`` were divided over), read from the
        division's columns: the figures are those of each team's ``GpuShare`` (its
        ``allocated``, ``borrowed`` and ``pending``), without building one per team (in a
        large org that was most of every refresh)."""
        division = shares.division
        inputs = division.inputs
        shown, quota = inputs.shown, inputs.quota
        allocated, requested = inputs.allocated, inputs.requested
        in_use = np.where(shown, allocated, 0.0)  # ``allocated or 0.0``
        borrowed = np.where(shown, np.maximum(0.0, allocated - quota), 0.0)
        pending = np.where(shown, np.maximum(0.0, requested - allocated), 0.0)
        ids = np.array(inputs.ids, dtype=np.int64)
        teams = inputs.teams
        names = dict(zip(inputs.ids, teams, strict=True))
        lending = np.flatnonzero(borrowed > 0.005).tolist()
        borrowers = sorted(((teams[i], float(borrowed[i])) for i in lending), key=lambda b: -b[1])
        used = allocated[shown].tolist()
        by_name = np.array(sorted(range(len(teams)), key=teams.__getitem__), dtype=np.intp)
        rank = np.empty(len(teams), dtype=np.intp)
        rank[by_name] = np.arange(len(teams))
        by_usage = np.lexsort((rank, -in_use))  # most in use first, then by name
        is_borrowing, is_waiting = borrowed > 0, pending > 0.005
        return cls(
            rows,
            shares,
            names,
            borrowers,
            round(sum(used), 2) if used else None,
            sum(row.quota_centi for row in rows),
            division,
            tuple(ids[by_usage].tolist()),
            frozenset(ids[is_borrowing].tolist()),
            frozenset(ids[is_waiting].tolist()),
            {row.id: row for row in rows},
            int(np.count_nonzero(in_use > 0)),
            tuple(ids[by_usage[is_borrowing[by_usage]]].tolist()),
            tuple(ids[by_usage[is_waiting[by_usage]]].tolist()),
            tuple(ids[by_name[is_borrowing[by_name]]].tolist()),
            tuple(ids[by_name[is_waiting[by_name]]].tolist()),
        )


class Shares(Mapping[int, GpuShare]):
    """Every team's share from one division, as the gauges draw it, by team id: each
    built when it is asked for. A page shows a few; the refresher no longer builds all of
    them at every refresh (in a large org a long hold of the interpreter's lock each
    time, and megabytes held per view)."""

    __slots__ = ("_built", "_index", "division", "unit")

    def __init__(self, division: Division, unit: str = "GPU") -> None:
        self.division = division
        self.unit = unit
        self._index = division.inputs.index
        # The shares built so far, kept as long as the division: the pages ask for the
        # same few again and again (the overview's first page, 50 of them). Two threads
        # building the same share store equal values.
        self._built: dict[int, GpuShare] = {}

    def __getitem__(self, team_id: int) -> GpuShare:
        built = self._built.get(team_id)
        if built is not None:
            return built
        share = self._built[team_id] = self._build(team_id)
        return share

    def _build(self, team_id: int) -> GpuShare:
        i = self._index[team_id]
        division, inputs = self.division, self.division.inputs
        seen = bool(inputs.shown[i])
        without = float(division.without_history[i])
        return GpuShare(
            guaranteed=float(inputs.quota[i]),
            limit=float(inputs.limit[i]),
            allocated=float(inputs.allocated[i]) if seen else None,
            requested=float(inputs.requested[i]) if seen else None,
            pool=division.pool,
            unreported=bool(inputs.unreported[i]),
            fair_now=round(float(division.fair_now[i]), 2) if seen else None,
            usable_now=round(float(division.usable_now[i]), 2) if seen else None,
            if_all_busy=round(float(division.if_all_busy[i]), 2),
            within_pool=round(float(division.within_pool[i]), 2),
            idle_elsewhere=division.idle_elsewhere,
            fair_without_history=None if math.isnan(without) else round(without, 2),
            smallest_waiting=inputs.smallest_waiting[i] if seen else None,
            unit=self.unit,
        )

    def __iter__(self) -> Iterator[int]:
        return iter(self.division.inputs.ids)

    def __len__(self) -> int:
        return len(self.division.inputs.ids)

    def __contains__(self, team_id: object) -> bool:
        return team_id in self._index


T = TypeVar("T")
MEMO_SIZE = 256


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
        self._lock = threading.Lock()  # held for moments: every page view takes it
        self._reading = threading.Lock()  # one cluster read at a time
        self._generation = 0  # moved by ``forget``
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
        self._built: tuple[Shares, OrgView] | None = None  # view per shares
        self._compute = threading.Lock()  # one org-wide computation at a time
        self.refresher_running = False
        self._shares: Shares | None = None
        self._division: Division | None = None
        self._memo: OrderedDict[Hashable, object] = OrderedDict()
        self._memo_view: object = None
        # The other pools' shards: the label values asked for (read from then on with
        # the default shard's top level) and the last top level read of each.
        self._pools: frozenset[str] = frozenset()
        self._pool_tops: dict[str, ClusterTop | None] = {}
        # The other keys' queues last asked for (per key): every read includes them, so
        # that a page dividing another pool finds its readings in the refresher's read
        # instead of reading the cluster itself each time the refresher's read replaced
        # the one that held them.
        self._key_queues: dict[ShareKey, frozenset[str]] = {}

    @property
    def ready_for(self) -> float:
        """How old a view or reading pages still take while the refresher runs (it is
        about to replace it; past this, a page computes its own)."""
        return 3 * self.ttl + 1

    def get(self, queue_names: list[str], *, latest: bool = False) -> dict[str, QueueUsage]:
        """Usage of ``queue_names``, read from the cluster at most once per ``ttl``. A
        page (``latest`` false) takes the reading the ready view was built from while the
        refresher runs, as it takes the view (up to 3 ttl + 1 s old): at 10,000 teams the
        refresher reads every 7 to 8 s, and a page that read the cluster itself between
        two of its reads held its viewer (and the pages waiting for it) for a whole read
        of every queue. The refresher and the collector ask for the ``latest``.

        The read happens outside the lock every page takes for the ready view: at 10,000
        teams it takes a tenth of a second or more (a real cluster's list of queues
        longer), and the pages that overlapped it waited for it (28 of the 33 slowest team
        page views at 10,000 teams did). One read at a time; a caller that waited for
        another's read takes its result when it covers the queues it wants."""
        wanted = frozenset(queue_names)
        if not wanted:
            return {}  # nothing to read (a preview whose readings are in the ready view)
        data = self._fresh_data(wanted, latest=latest)
        if data is None:
            with self._reading:
                data = self._fresh_data(wanted, latest=latest)
                if data is None:
                    data = self._read(wanted)
                else:
                    metrics.CLUSTER_READS.labels("hit").inc()
        else:
            metrics.CLUSTER_READS.labels("hit").inc()
        return {name: data[name] for name in wanted if name in data}

    def _fresh_data(self, wanted: frozenset[str], *, latest: bool) -> dict[str, QueueUsage] | None:
        """The last read, if it covers ``wanted`` and is fresh enough (a published read's
        dict is never changed afterwards)."""
        with self._lock:
            if not wanted <= self._queues:
                return None
            age = time.monotonic() - self._at
            if age < self.ttl or (not latest and self.refresher_running and age < self.ready_for):
                return self._data
        return None

    def _read(self, wanted: frozenset[str]) -> dict[str, QueueUsage]:
        """Read the cluster (the caller holds ``_reading``, not ``_lock``) and publish."""
        with self._lock:
            fresh = time.monotonic() - self._at < self.ttl
            also = frozenset().union(*self._key_queues.values())
            names = sorted(wanted | also | self._queues) if fresh else sorted(wanted | also)
            generation = self._generation
        error: str | None = None
        try:
            data = self.backend.usage(names)
        except Exception as exc:  # shown on the page, not hidden behind zeros
            error = f"usage could not be read from the cluster: {exc}"
            data = {}
        top = None
        try:
            top = self.backend.cluster_top()
        except Exception as exc:  # the pool alone is divided meanwhile; shown
            error = error or f"the cluster's GPUs could not be read: {exc}"
        pool_tops = self._read_pool_tops()
        past: dict[str, float] = {}
        fair: dict[str, float] | None = None
        if self.prometheus is not None:
            data = dict(data)  # KAI's own allocations replace the cluster's in it
            past, fair, metrics_error = self._read_prometheus(names, data)
            error = metrics_error or error
        model = self._model(top, past)
        with self._lock:
            self._data, self.error, self.model = data, error, model
            self._pool_tops = pool_tops
            if self.prometheus is not None:
                self.fair_override = fair
            self._queues = frozenset(names)
            # Forgotten meanwhile (``forget``): this read may predate the change, so the
            # next caller reads again.
            self._at = time.monotonic() if generation == self._generation else float("-inf")
            self.reads += 1
        metrics.CLUSTER_READS.labels("miss").inc()
        return data

    def _read_pool_tops(self) -> dict[str, ClusterTop | None]:
        """The top level of each other pool's shard asked for so far (one that cannot be
        read is None: that pool alone is divided, as before its first read)."""
        with self._lock:
            pools = self._pools
        tops: dict[str, ClusterTop | None] = {}
        for value in sorted(pools):
            try:
                tops[value] = self.backend.cluster_top(value)
            except Exception:  # the default shard's error is the one shown
                tops[value] = None
        return tops

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

    def _read_prometheus(
        self, names: list[str], data: dict[str, QueueUsage]
    ) -> tuple[dict[str, float], dict[str, float] | None, str | None]:
        """KAI's own allocation and fair share, when Prometheus is configured: the past
        usage per queue, KAI's fair shares (None: not read) and the error, if any; its
        allocations replace those in ``data``. Series are matched on the queue's
        metadata.name where KAI exports it (queue_metadata_name); an older KAI labels
        them with the displayName when one is set (the portal sets it to the team's
        name), else with the queue's name: both are looked up."""
        assert self.prometheus is not None
        try:
            kai = self.prometheus.read()
        except MetricsError as exc:
            return {}, None, str(exc)

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
                known = data.get(name)
                requested = known.requested_gpu if known else allocated
                created = known.created if known else None
                data[name] = QueueUsage(
                    allocated_gpu=allocated, requested_gpu=requested, created=created
                )
        # Time-based fairshare: the usage KAI's scheduler used, per queue: every queue
        # it exports where series carry the metadata name (the top level's too), else
        # the portal's queues found as above.
        past = dict(kai.usage) if kai.by_metadata_name else {}
        for name in names:
            used = find(kai.usage, name)
            if used is not None:
                past[name] = used
        return past, fair, None

    def shares(self, teams: list[TeamQuota], *, pool_centi: int, parent: str) -> Shares:
        """Shares of all teams, computed again only when what they depend on changed: the
        quotas, the usage read, the pool, KAI's own fair shares. Comparing those costs a
        few milliseconds at 10,000 teams; the computation, a few hundred (the refresher
        re-reads both every interval and most intervals nothing moved)."""
        usage = self.get([t.queue_name for t in teams], latest=True)
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
            last is not None
            and last_key == key
            and last_inputs == (usage, fair, model)
            and (teams is last_rows or teams == last_rows)
        ):
            return last
        division = divide_org(
            OrgInputs.of(teams, usage),
            pool_centi=pool_centi,
            parent=parent,
            model=model,
            fair_override=fair,
        )
        computed = shares_of(division)
        with self._lock:
            self._shares_key, self._shares_rows, self._shares = key, teams, computed
            self._shares_inputs = (usage, fair, model)
            self._division = division
        return computed

    def key_shares(
        self,
        rows: list[TeamQuota],
        key: ShareKey,
        *,
        capacity_centi: int,
        parent: str,
        latest: bool = False,
    ) -> Shares:
        """The shares of ``rows`` (``key``'s rows) in the division of ``key``, with the
        refresher's readings (``latest``: a fresh one): the default key's as ``shares``
        computes them; another pool's GPUs through the top level of that pool's shard
        (its nodes' GPUs among its top-level queues, the org's queue of the pool among
        them: read from the first time a pool is asked for; till then, and for other
        resources, the pool alone), with time-based fairshare's kValue and no past
        usage."""
        if key.is_default:
            return self.shares(rows, pool_centi=capacity_centi, parent=parent)
        names = [row.queue_name for row in rows]
        with self._lock:
            self._key_queues[key] = frozenset(names)
        # A page takes the refresher's reading (``latest``: the collector, a fresh one).
        usage = self.get(names, latest=latest)
        top = self.pool_top(key)
        division = divide_org(
            OrgInputs.of(rows, usage, key.resource.key),
            pool_centi=capacity_centi,
            parent=key.parent_queue(parent),
            model=Model(top=top, k_value=self.model.k_value),
        )
        return Shares(division, key.resource.unit)

    def pool_top(self, key: ShareKey) -> ClusterTop | None:
        """The last top level read of ``key``'s pool's shard (GPUs only; None: not read
        yet or unreadable). The first ask adds the pool to what every refresh reads."""
        if key.resource is not GPU or key.pool_id is None or not key.pool_label:
            return None
        with self._lock:
            if key.pool_label not in self._pools:
                self._pools = self._pools | {key.pool_label}  # read at the next reading
            return self._pool_tops.get(key.pool_label)

    def division(self) -> Division | None:
        """The division behind the last shares (the ready view's)."""
        with self._lock:
            return self._division

    def remembered(self, view: object, key: Hashable, compute: Callable[[], T]) -> T:
        """What a decision input gives over ``view`` (the ready org view), computed once
        and kept for the next views and viewers, the newest few hundred. Only the current
        view's are kept: a new view drops the older ones (and never keeps them alive)."""
        with self._lock:
            if self._memo_view is not view:
                self._memo.clear()
                self._memo_view = view
            if key in self._memo:
                self._memo.move_to_end(key)
                return cast(T, self._memo[key])
        value = compute()
        with self._lock:
            if self._memo_view is view:
                self._memo[key] = value
                while len(self._memo) > MEMO_SIZE:
                    self._memo.popitem(last=False)
        return value

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
            if age < self.ttl or (self.refresher_running and age < self.ready_for):
                return cached[2]
        return None

    def forget(self) -> None:
        """Read usage and quotas afresh at the next view."""
        with self._lock:
            self._rows = None
            self._view = None
            self._at = float("-inf")
            self._generation += 1
            self._memo.clear()
            self._memo_view = None

    def forget_quotas(self) -> None:
        """Called after a decision, so the next view reads the new quotas (and nothing
        remembered over the last one is kept: the view may come back the same object
        when the default pool's rows did not move, another pool's did)."""
        with self._lock:
            self._rows = None
            self._view = None
            self._memo.clear()
            self._memo_view = None


@dataclass(frozen=True)
class GpuLine:
    """A team's or request's GPU guarantee and limit in the default pool, as a share
    reads them."""

    quota_centi: int
    limit_centi: int

    @classmethod
    def of(cls, owner: QuotaOwner) -> GpuLine:
        line = owner.quota.gpu
        return cls(line.guarantee or 0, line.limit or 0)


def share_of(team: TeamQuota | TeamRowLike, usage: QueueUsage | None, pool_centi: int) -> GpuShare:
    reported = usage is not None and usage.reported
    return GpuShare(
        guaranteed=gpus(team.quota_centi),
        limit=gpus(team.limit_centi),
        allocated=usage.allocated_gpu if usage is not None and reported else None,
        requested=usage.requested_gpu if usage is not None and reported else None,
        pool=gpus(pool_centi),
        unreported=usage is not None and not usage.reported,
    )


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
) -> Shares:
    """Every team's share with KAI's fair share now and if every team were busy
    (``trace``, ``busy_trace``: where the division of "now" and of "if every team were
    busy" record their steps, for the explanation).

    ``teams`` are all the teams holding a queue under the org's parent queue: fair share
    depends on everyone, so it is computed over all of them, never one team alone. Where
    the cluster is known (``model.top``) the division starts where KAI's does: every
    schedulable GPU of the cluster among every top-level queue, the org's among them
    (its pool is its guarantee there; with an unlimited limit it may grow past it).
    """
    division = divide_org(
        OrgInputs.of(teams, usage),
        pool_centi=pool_centi,
        parent=parent,
        model=model,
        fair_override=fair_override,
        trace=trace,
        busy_trace=busy_trace,
    )
    return shares_of(division)


def shares_of(division: Division) -> Shares:
    """Every team's share as the gauges draw it, from one division."""
    return Shares(division)
