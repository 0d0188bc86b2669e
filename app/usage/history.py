"""Usage history: a collector samples every team's GPU use; storage stays bounded.

Raw samples are kept for a day, then rolled up into hourly rows, which are kept for
15 days (the sparkline's seven days, right-sizing's fourteen), then into daily rows kept
for 13 months (showback by month). GPU-seconds within the guarantee and borrowed above it are summed
exactly at every roll-up.
Samples are keyed by (team, resolution, period start), so several portal processes
sampling at once write each period once.
"""

from __future__ import annotations

import logging
import math
import re
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import datetime, timedelta

from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session, sessionmaker

from app.core.config import Settings
from app.core.db import unit_of_work
from app.core.errors import InvalidInput
from app.core.models import Org, utcnow
from app.teams import repository as teams
from app.usage import repository as repo
from app.usage import rightsizing
from app.usage.model import ShareKey
from app.usage.service import OrgView, Shares, TeamQuota, UsageCache

log = logging.getLogger(__name__)

RAW_KEEP = timedelta(days=1)
HOURLY_KEEP = timedelta(days=15)
DAILY_KEEP = timedelta(days=400)


def _period_start(now: datetime, seconds: int) -> datetime:
    epoch = int(now.timestamp())
    return datetime.fromtimestamp(epoch - epoch % seconds, tz=now.tzinfo)


@dataclass
class PassResult:
    sampled: int
    rolled_up: int
    deleted: int
    seconds: float


class Collector:
    def __init__(
        self, session_factory: sessionmaker[Session], usage: UsageCache, *, interval: int
    ) -> None:
        self.session_factory = session_factory
        self.usage = usage
        self.interval = interval

    def collect_once(self, now: datetime | None = None) -> PassResult:
        started = time.perf_counter()
        now = now or utcnow()
        with unit_of_work(self.session_factory) as session:
            org = teams.get_org(session)
            quotas = repo.get_quota_rows(session, org.id)
            shares = self.usage.shares(quotas, pool_centi=org.gpus_centi, parent=org.parent_queue)
            at = _period_start(now, self.interval)
            # Written pool by pool, in batches (``add_samples``): at 10,000 teams in three
            # pools, 30,000 rows held at once were the process's highest memory.
            written = repo.add_samples(
                session, self._samples(quotas, shares, at, repo.DEFAULT_POOL)
            )
            # Each other node pool from its own division (KAI's shard for it).
            for pool in repo.other_pools(session, org.id):
                key = ShareKey.of_pool(pool)
                held = repo.get_quota_rows(session, org.id, key)
                if held:
                    divided = self.usage.key_shares(
                        held,
                        key,
                        capacity_centi=repo.pool_capacity(session, key, org.id),
                        parent=org.parent_queue,
                        latest=True,
                    )
                    written += repo.add_samples(
                        session, self._samples(held, divided, at, pool.name)
                    )
            rolled, deleted = self.downsample(session, now)
        return PassResult(written, rolled, deleted, time.perf_counter() - started)

    def _samples(
        self, quotas: list[TeamQuota], shares: Shares, at: datetime, pool: str
    ) -> Iterator[dict[str, object]]:
        """One raw sample per team whose use in ``pool`` is reported."""
        for team in quotas:
            share = shares.get(team.id)
            if share is None or share.allocated is None:
                continue
            inside = min(share.allocated, share.guaranteed)
            yield (
                {
                    "team_id": team.id,
                    "pool": pool,
                    "resolution": "raw",
                    "at": at,
                    "seconds": self.interval,
                    "allocated_gpu": share.allocated,
                    "requested_gpu": share.requested or 0.0,
                    "quota_gpu": share.guaranteed,
                    "guaranteed_gpu_s": inside * self.interval,
                    "borrowed_gpu_s": (share.allocated - inside) * self.interval,
                }
            )

    def downsample(self, session: Session, now: datetime) -> tuple[int, int]:
        """Raw samples older than a day become hourly rows; hourly rows older than
        15 days become daily rows; daily rows older than 13 months go."""
        rolled, deleted = _roll_up(
            session, source="raw", target="hour", period=3600, before=now - RAW_KEEP
        )
        more, gone = _roll_up(
            session, source="hour", target="day", period=86400, before=now - HOURLY_KEEP
        )
        expired = repo.delete_samples_before(session, resolution="day", before=now - DAILY_KEEP)
        return rolled + more, deleted + gone + expired


def _roll_up(
    session: Session, *, source: str, target: str, period: int, before: datetime
) -> tuple[int, int]:
    """Samples of ``source`` before the ``period`` that holds ``before`` become one row
    of ``target`` per team and period (summed in the database)."""
    cutoff = _period_start(before, period)
    rows = repo.rolled_up_before(session, resolution=source, before=cutoff, period=target)
    if not rows:
        return 0, 0
    repo.add_samples(session, rows)
    return len(rows), repo.delete_samples_before(session, resolution=source, before=cutoff)


class RightsizingRun:
    """Recomputes the right-sizing suggestions once per ``every`` seconds (hourly history
    moves once an hour). Several portal processes may each run it: the result is the same
    and one replacement wins."""

    def __init__(
        self, session_factory: sessionmaker[Session], settings: Settings, *, every: float = 3600
    ) -> None:
        self.session_factory = session_factory
        self.settings = settings
        self.every = every
        self._last = -math.inf
        self._ready: int | None = None  # ready teams at the last run

    def maybe_run(self) -> int | None:
        """Once per ``every`` seconds, and whenever a team became ready or stopped being
        (only ready teams are judged: a new one need not wait an hour)."""
        try:
            with unit_of_work(self.session_factory) as session:
                ready = teams.count_ready(session)
                if time.monotonic() - self._last < self.every and ready == self._ready:
                    return None
                self._last, self._ready = time.monotonic(), ready
                return rightsizing.recompute(session, self.settings)
        except IntegrityError:
            return None  # another process replaced them at the same moment
        except Exception:
            log.exception("right-sizing failed; trying again in an hour")
            return None


class ViewRefresher:
    """Keeps the org-wide view (every team's quota and share) fresh off the request path:
    one computation per ``usage_cache_seconds`` whatever the number of viewers (its loop
    is ``app.usage.jobs.view_refresher_loop``). The quota rows are read again only when
    the database's digest of them moved (on PostgreSQL): most refreshes nothing did."""

    def __init__(
        self,
        session_factory: sessionmaker[Session],
        usage: UsageCache,
        *,
        then: Callable[[Session, Org, OrgView], object] | None = None,
    ) -> None:
        self.session_factory = session_factory
        self.usage = usage
        # What else a new view lets the refresher compute ahead (the other pools').
        self.then = then
        self._kept: repo.QuotaRows | None = None
        self.rows_read = 0  # times the rows were read (the others kept them)

    def refresh_once(self) -> None:
        with self.session_factory() as session:
            org = teams.get_org(session)
            kept = self._kept
            self._kept = repo.quota_rows_since(session, org.id, kept)
            if self._kept is not kept:
                self.rows_read += 1
            # The same list while nothing moved: the view then compares rows by identity.
            rows = self._kept.rows
            view = self.usage.refresh_view(
                lambda: rows, pool_centi=org.gpus_centi, parent=org.parent_queue
            )
            if self.then is not None:
                self.then(session, org, view)


@dataclass(frozen=True)
class Point:
    at: datetime
    allocated: float
    requested: float
    quota: float


def last_days(
    session: Session,
    team_id: int,
    *,
    days: int = 7,
    now: datetime | None = None,
    pool: str = repo.DEFAULT_POOL,
) -> list[Point]:
    """Hourly points for the sparkline (``pool``: another node pool's name); raw samples
    are averaged per hour in SQL."""
    now = now or utcnow()
    since = now - timedelta(days=days)
    return [
        Point(at=at, allocated=allocated, requested=requested, quota=quota)
        for at, allocated, requested, quota in repo.hourly_points(
            session, team_id, since=since, pool=pool
        )
    ]


class RecentHistory:
    """The sparkline's points per team, read at most every ``ttl`` seconds (they move once
    per sample interval), shared by every viewer of this process."""

    def __init__(self, *, ttl: float = 30.0) -> None:
        self.ttl = ttl
        self._lock = threading.Lock()
        self._points: dict[int, tuple[float, list[Point]]] = {}

    def get(self, session: Session, team_id: int) -> list[Point]:
        now = time.monotonic()
        with self._lock:
            cached = self._points.get(team_id)
            if cached is not None and now - cached[0] < self.ttl:
                return cached[1]
        points = last_days(session, team_id)
        with self._lock:
            if len(self._points) > 5000:
                self._points.clear()
            self._points[team_id] = (now, points)
        return points


@dataclass(frozen=True)
class ShowbackRow:
    team: str
    month: str
    guaranteed_gpu_hours: float
    borrowed_gpu_hours: float
    pool: str = "default"  # the node pool's name
    gpu_type: str = ""
    price_centi: int | None = None  # the pool's price a GPU-hour today, in hundredths
    budget_centi: int | None = None  # the team's GPU-hour budget there that month

    @property
    def budget_used(self) -> float | None:
        """The share of the budget used, in percent (None: no budget)."""
        if not self.budget_centi:
            return None
        return round(100 * self.total / (self.budget_centi / 100), 1)

    @property
    def total(self) -> float:
        return self.guaranteed_gpu_hours + self.borrowed_gpu_hours

    @property
    def cost(self) -> float | None:
        """The hours at the pool's price (None: no price set)."""
        if self.price_centi is None:
            return None
        return round(self.total * self.price_centi / 100, 2)


_MONTH = re.compile(r"[0-9]{4}-(?:0[1-9]|1[0-2])", re.ASCII)


def parse_month(raw: str | None) -> str | None:
    """A showback month as YYYY-MM (None or empty: every month)."""
    if not raw:
        return None
    if not _MONTH.fullmatch(raw):
        raise InvalidInput(
            {"month": "use the form YYYY-MM with a month from 01 to 12, e.g. 2026-11"}
        )
    return raw


def showback(session: Session, *, month: str | None = None) -> list[ShowbackRow]:
    """GPU-hours per team, month and node pool, within the guarantee and borrowed above
    it, with the pool's GPU type and, where the pool has a price, the cost."""
    month = parse_month(month)
    pools = {
        (repo.DEFAULT_POOL if pool.is_default else pool.name): pool
        for pool in teams.get_pools(session, teams.get_org(session).id)
    }
    budgets = {
        (b.team_id, b.pool_id, b.month): b.gpu_hours_centi
        for b in repo.all_budgets(session, month=month)
    }
    rows = []
    for name, team_id, m, pool_name, g, b in repo.gpu_seconds_by_team_month(session, month=month):
        pool = pools.get(pool_name)
        rows.append(
            ShowbackRow(
                name,
                m,
                round(g / 3600, 3),
                round(b / 3600, 3),
                pool=pool.name if pool is not None else pool_name or "default",
                gpu_type=pool.gpu_type if pool is not None else "",
                price_centi=pool.price_centi if pool is not None else None,
                budget_centi=budgets.get((team_id, pool.id, m)) if pool is not None else None,
            )
        )
    return rows


@dataclass(frozen=True)
class Sparkline:
    allocated: str  # SVG polyline points
    requested: str
    quota_y: float
    top: float
    width: int
    height: int
    points: int
    peak: float
    average: float
    # The first point's hour, where it is after the seven days' start: a young team's
    # figures cover only that long (None: the whole seven days).
    since: datetime | None = None


def sparkline(
    points: list[Point], *, limit: float, days: int = 7, now: datetime | None = None
) -> Sparkline | None:
    if not points:
        return None
    now = now or utcnow()
    width, height = 300, 48
    start = now - timedelta(days=days)
    span = (now - start).total_seconds()
    top = max([limit, 0.01] + [p.allocated for p in points] + [p.requested for p in points])

    def xy(p: Point, value: float) -> str:
        x = max(0.0, (p.at - start).total_seconds()) / span * width
        y = height - value / top * (height - 2) - 1
        return f"{x:.1f},{y:.1f}"

    return Sparkline(
        allocated=" ".join(xy(p, p.allocated) for p in points),
        requested=" ".join(xy(p, p.requested) for p in points),
        quota_y=round(height - points[-1].quota / top * (height - 2) - 1, 1),
        top=top,
        width=width,
        height=height,
        points=len(points),
        peak=max(p.allocated for p in points),
        average=sum(p.allocated for p in points) / len(points),
        since=points[0].at if points[0].at > start + timedelta(hours=1) else None,
    )
