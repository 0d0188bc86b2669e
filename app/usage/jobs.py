"""The usage domain's periodic jobs: sampling every team's GPU use, the right-sizing
pass over its history, the org view kept ready for the pages, and the weekly digest."""

from __future__ import annotations

import time
from typing import Protocol

from sqlalchemy.orm import Session, sessionmaker

from app.core.config import Settings
from app.core.db import Effect, request_effect, unit_of_work
from app.core.jobs import Job, Loop, Role
from app.core.models import Org, utcnow
from app.usage import budgets, digest
from app.usage.history import Collector, RightsizingRun, ViewRefresher
from app.usage.service import OrgView, UsageCache

DIGEST_CHECK_SECONDS = 60.0

# The org view's refresher takes at most a twentieth of a core: after a pass that took
# ``t`` seconds of its thread's CPU it waits at least 19 t. In a small org a pass is
# short and this changes nothing (every ttl / 2); in a large one the view is rebuilt a
# little less often: figures up to a few seconds older, the rebuilds' hold on the
# interpreter lock bounded (bench/README.md has the figures).
REFRESH_CPU_SHARE = 0.05


class Parts(Protocol):
    @property
    def settings(self) -> Settings: ...
    @property
    def session_factory(self) -> sessionmaker[Session]: ...
    @property
    def usage_cache(self) -> UsageCache: ...
    @property
    def collector(self) -> Collector: ...
    def warm_views(self, session: Session, org: Org, view: OrgView) -> None: ...


def collector_loop(parts: Parts) -> Loop:
    collector = parts.collector

    def run() -> None:
        collector.collect_once()

    return Loop(
        name="usage_collector",
        run=run,
        period=collector.interval,
        failure="collection failed; trying again next interval",
    )


RIGHTSIZING_LOOK_SECONDS = 30.0


def rightsizing_loop(parts: Parts) -> Loop:
    """Hourly history moves once an hour: the suggestions are computed again as often,
    and as soon as a team became ready (looked at every ``RIGHTSIZING_LOOK_SECONDS``: a
    count of the ready teams), so a new portal's teams get theirs in the first minute."""
    rightsizing = RightsizingRun(parts.session_factory, parts.settings)

    def run() -> None:
        rightsizing.maybe_run()

    return Loop(
        name="rightsizing", run=run, period=min(rightsizing.every, RIGHTSIZING_LOOK_SECONDS)
    )


def view_refresher_loop(parts: Parts) -> Loop:
    """While it runs, pages read the org view it keeps instead of computing one."""
    refresher = ViewRefresher(parts.session_factory, parts.usage_cache, then=parts.warm_views)
    cache = parts.usage_cache
    period = max(0.2, cache.ttl / 2)

    def running() -> None:
        cache.refresher_running = True

    def stopped() -> None:
        cache.refresher_running = False

    def run() -> float:
        started = time.thread_time()
        refresher.refresh_once()
        return refresh_wait(time.thread_time() - started, period=period, ttl=cache.ttl)

    return Loop(
        name="view_refresher",
        run=run,
        period=period,
        on_start=running,
        before_stop=stopped,
        failure="failed; pages compute the org view meanwhile",
    )


def refresh_wait(spent: float, *, period: float, ttl: float) -> float:
    """How long the refresher waits after a pass that took ``spent`` seconds of CPU: its
    period, or longer to keep within ``REFRESH_CPU_SHARE`` of a core, but never so long
    that pages stop taking its view (they take one up to 3 ttl + 1 s old while it runs,
    then compute their own)."""
    budget = spent * (1 - REFRESH_CPU_SHARE) / REFRESH_CPU_SHARE
    return min(max(period, budget), max(period, 2 * ttl))


def digest_loop(parts: Parts) -> Loop:
    """Writes the weekly digest on its day (once: the week is its key)."""
    factory, settings = parts.session_factory, parts.settings

    def run() -> None:
        with unit_of_work(factory) as session:
            digest.write_weekly(session, settings)

    return Loop(name="weekly_digest", run=run, period=DIGEST_CHECK_SECONDS)


def _collecting(settings: Settings) -> bool:
    return settings.usage_collector_enabled


def budgets_loop(parts: Parts) -> Loop:
    """GPU-hour budgets: each threshold crossed told once, borrowing stopped at 100 %
    where chosen, limits put back once their month is over."""
    settings, factory = parts.settings, parts.session_factory
    alerts = budgets.thresholds(settings.budget_alerts)

    def run() -> None:
        with unit_of_work(factory) as session:
            if budgets.check(session, utcnow(), alerts=alerts):
                request_effect(session, Effect.PROVISIONING_DUE)

    return Loop(name="gpu_budgets", run=run, period=settings.budget_seconds)


JOBS: tuple[Job[Parts], ...] = (
    Job(
        name="usage_collector",
        roles=frozenset({Role.WEB}),
        build=collector_loop,
        enabled=_collecting,
    ),
    Job(
        name="rightsizing", roles=frozenset({Role.WEB}), build=rightsizing_loop, enabled=_collecting
    ),
    Job(
        name="view_refresher",
        roles=frozenset({Role.WEB}),
        build=view_refresher_loop,
        enabled=_collecting,
    ),
    Job(name="weekly_digest", roles=frozenset({Role.DELIVER}), build=digest_loop),
    Job(
        name="gpu_budgets",
        roles=frozenset({Role.WORK}),
        build=budgets_loop,
        enabled=lambda settings: settings.worker_enabled,
    ),
)
