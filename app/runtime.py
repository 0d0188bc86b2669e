"""The process model: one typed container of the portal's parts, built from settings,
and the periodic jobs of the roles a process plays.

``gpu-portal serve``, ``work`` and ``deliver`` each make a ``Portal`` for their roles,
``start()`` it (its jobs' loops) and ``stop()`` it. A part is built the first time it is
used, once: a ``deliver`` process never makes a cluster client. Every job is declared
beside its domain's code (``app/<domain>/jobs.py``) and listed once in ``JOBS``.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from functools import cached_property

from prometheus_client import CollectorRegistry
from sqlalchemy.engine import Engine
from sqlalchemy.exc import SQLAlchemyError
from sqlalchemy.orm import Session, sessionmaker
from starlette.applications import Starlette

from app.access import jobs as access_jobs
from app.access.sweeper import Sweeper
from app.adapters.factory import Cluster, make_backend
from app.adapters.oidc import OidcClient
from app.adapters.prometheus import PrometheusSource
from app.adapters.simulated import SimulatedBackend
from app.audit.lines import EventLines
from app.core import metrics
from app.core.config import PROJECT_ROOT, Settings
from app.core.db import (
    Effect,
    make_engine,
    make_session_factory,
    migrations_behind,
    ping,
    read_engine,
    reads_of,
)
from app.core.jobs import Job, Loop, Role
from app.core.models import Org, TeamStatus
from app.notifications import jobs as notification_jobs
from app.notifications.delivery import Deliverer
from app.provisioning import jobs as provisioning_jobs
from app.provisioning import repository as provisioning_repo
from app.provisioning.reconciler import Reconciler
from app.provisioning.restore import restore_from_database
from app.provisioning.workloads import RefusedPods, Workloads
from app.reads.org import pool_views
from app.teams import jobs as team_jobs
from app.teams import repository as teams_repo
from app.teams.pools import NodePools
from app.usage import jobs as usage_jobs
from app.usage.history import Collector, RecentHistory
from app.usage.service import OrgView, UsageCache

log = logging.getLogger(__name__)

# Every periodic job of the portal, in start order (stopped in reverse: the provisioning
# worker last, so the others never wait on a lease it still holds).
JOBS: tuple[Job[Portal], ...] = (
    *provisioning_jobs.JOBS,
    *team_jobs.JOBS,
    *access_jobs.JOBS,
    *notification_jobs.JOBS,
    *usage_jobs.JOBS,
)


# The parts every page-serving process uses, made at start rather than by a first request.
WEB_PARTS = (
    "engine",
    "session_factory",
    "read_engine",
    "read_session_factory",
    "backend",
    "usage_cache",
    "refused_pods",
    "workloads",
    "recent_history",
    "drift_lines",
    "oidc",
    "metrics_registry",
)


def serve_roles(settings: Settings) -> frozenset[Role]:
    """What a web process plays: the pages' own jobs, and the worker's and the delivery's
    unless they run in processes of their own (``PORTAL_WORKER_ENABLED``,
    ``PORTAL_DELIVERY_ENABLED``)."""
    roles = {Role.WEB}
    if settings.worker_enabled:
        roles.add(Role.WORK)
    if settings.delivery_enabled:
        roles.add(Role.DELIVER)
    return frozenset(roles)


@dataclass(frozen=True)
class Readiness:
    """What /readyz answers: the problems that keep the process from serving, and the
    jobs whose last pass failed (shown by name only: /readyz is anonymous)."""

    failed: dict[str, str]
    degraded: tuple[str, ...]


class Portal:
    """The portal's parts for one process. Each is made on first use from ``settings``."""

    def __init__(self, settings: Settings, *, roles: Iterable[Role]) -> None:
        self.settings = settings
        self.roles = frozenset(roles)
        # What a commit's effects do here: filled as the jobs that answer them are built.
        self.effects: dict[Effect, Callable[[], None]] = {
            Effect.QUOTAS_CHANGED: self._forget_quotas
        }
        self.loops: dict[str, Loop] = {}
        self.stopping = False
        self._at_head = False

    # --- parts --------------------------------------------------------------------

    @cached_property
    def engine(self) -> Engine:
        return make_engine(self.settings.database_url)

    @cached_property
    def session_factory(self) -> sessionmaker[Session]:
        """Sessions whose commits run this process's effects, and whose notices go to the
        configured personal channels (e-mail when an SMTP server is set)."""
        return make_session_factory(
            self.engine, effects=self.effects, channels=self.settings.personal_channels
        )

    @cached_property
    def read_engine(self) -> Engine:
        """Safe requests' connections: on PostgreSQL a pool of their own, in autocommit."""
        return read_engine(self.engine)

    @cached_property
    def read_session_factory(self) -> sessionmaker[Session]:
        return reads_of(self.session_factory, self.read_engine)

    @cached_property
    def backend(self) -> Cluster:
        backend = make_backend(self.settings)
        if isinstance(backend, SimulatedBackend):
            # Its cluster lives in this process's memory: what earlier processes created
            # is restored from the database, so a restart is not every object "deleted".
            try:
                restored = restore_from_database(self.session_factory, backend, self.settings)
            except SQLAlchemyError as exc:  # not migrated yet: nothing to restore
                log.warning("simulated cluster not restored from the database: %s", exc)
            else:
                if restored:
                    log.info("simulated cluster: restored %d teams from the database", restored)
        return backend

    @cached_property
    def node_pools(self) -> NodePools:
        return NodePools(self.backend, self.settings.node_pool_label_key)

    @cached_property
    def usage_cache(self) -> UsageCache:
        settings = self.settings
        prometheus = (
            PrometheusSource(settings.prometheus_url, prefix=settings.kai_metrics_prefix)
            if settings.prometheus_url
            else None
        )
        return UsageCache(
            self.backend,
            ttl=settings.usage_cache_seconds,
            prometheus=prometheus,
            k_value=settings.kai_k_value,
        )

    @cached_property
    def refused_pods(self) -> RefusedPods:
        return RefusedPods(self.backend, ttl=self.settings.refused_pods_seconds)

    @cached_property
    def workloads(self) -> Workloads:
        return Workloads(self.backend, ttl=self.settings.workloads_seconds)

    @cached_property
    def collector(self) -> Collector:
        return Collector(
            self.session_factory, self.usage_cache, interval=self.settings.usage_sample_seconds
        )

    def warm_views(self, session: Session, org: Org, view: OrgView) -> None:
        """Divide the org's other node pools over a new ready view before a page asks
        (the refresher's call): the first page after a refresh no longer pays for it."""
        pool_views(session, self.usage_cache, org, view)

    @cached_property
    def recent_history(self) -> RecentHistory:
        return RecentHistory(ttl=min(30.0, self.settings.usage_sample_seconds))

    @cached_property
    def drift_lines(self) -> EventLines:
        """The overview's newest drift repairs, kept by their ids."""
        return EventLines()

    @cached_property
    def oidc(self) -> OidcClient | None:
        return OidcClient(self.settings.oidc) if self.settings.oidc_enabled else None

    @cached_property
    def reconciler(self) -> Reconciler:
        return Reconciler(self.session_factory, self.backend, self.settings)

    @cached_property
    def sweeper(self) -> Sweeper:
        return Sweeper(self.session_factory, self.backend, self.settings)

    @cached_property
    def deliverer(self) -> Deliverer:
        return Deliverer(self.session_factory, self.settings)

    @cached_property
    def metrics_registry(self) -> CollectorRegistry:
        def count_teams() -> dict[str, int]:
            with self.session_factory() as session:
                counts = teams_repo.count_by_status(session)
                counts["asleep"] = provisioning_repo.count_asleep(session)
                return counts

        return metrics.app_registry(
            metrics.TeamsByStatus(count_teams, [s.value for s in TeamStatus]),
            metrics.Asleep(count_teams),
        )

    def built(self, name: str) -> bool:
        """Whether the part ``name`` has been made (nothing is made to answer)."""
        return name in self.__dict__

    def smtp_problem(self) -> str | None:
        """What the delivery found wrong with the SMTP server (it checks at its start);
        None where this process delivers nothing."""
        return self.deliverer.smtp_problem if self.built("deliverer") else None

    def _forget_quotas(self) -> None:
        if self.built("usage_cache"):
            self.usage_cache.forget_quotas()

    # --- jobs ---------------------------------------------------------------------

    def jobs(self) -> list[Job[Portal]]:
        """The jobs this process runs: those of its roles that its settings turn on."""
        return [job for job in JOBS if job.roles & self.roles and job.enabled(self.settings)]

    def start(self) -> None:
        """Build the jobs' loops, route the effects that wake them, start them. (An app's
        lifespan may run more than once, e.g. under a test client: each start is afresh.)"""
        self.stopping = False
        self.loops = {}
        if Role.WEB in self.roles:
            # What requests share, made before the first one (requests run on many threads).
            for part in WEB_PARTS:
                getattr(self, part)
        for job in self.jobs():
            loop = job.build(self)
            self.loops[job.name] = loop
            for effect in job.wakes_on:
                self.effects[effect] = loop.wake.set
        for loop in self.loops.values():
            loop.start()
        log.info("running: %s", ", ".join(self.loops) or "no jobs")

    def alive(self) -> bool:
        return all(loop.alive() for loop in self.loops.values())

    def stop(self) -> None:
        """Not ready any more; every loop ends (the worker finishes its team and hands its
        leases back), then the database connections close."""
        self.stopping = True
        for loop in reversed(self.loops.values()):
            loop.stop()
        if self.built("deliverer") and "notification_delivery" not in self.loops:
            try:
                self.deliverer.close()
            except Exception:
                log.exception("could not hand the delivery leases back; they expire on their own")
        if self.built("refused_pods"):
            self.refused_pods.close()
        if self.built("workloads"):
            self.workloads.close()
        if self.built("read_engine") and self.read_engine is not self.engine:
            self.read_engine.dispose()
        if self.built("engine"):
            self.engine.dispose()

    # --- readiness ------------------------------------------------------------------

    def readiness(self) -> Readiness:
        failed: dict[str, str] = {}
        try:
            ping(self.engine)
        except Exception as exc:
            failed["database"] = f"unreachable: {type(exc).__name__}"
        if not self._at_head:  # once at the head, a running process stays there
            try:
                behind = migrations_behind(self.engine, str(PROJECT_ROOT / "migrations"))
            except Exception as exc:
                failed["migrations"] = f"cannot be read: {type(exc).__name__}"
            else:
                if behind is None:
                    self._at_head = True
                else:
                    failed["migrations"] = behind
        for name, loop in self.loops.items():
            if not loop.alive():
                failed[name] = "not running"
        degraded = tuple(name for name, loop in self.loops.items() if loop.last_error)
        return Readiness(failed=failed, degraded=degraded)


def portal_of(app: Starlette) -> Portal:
    """The container an application serves with (made by ``app.main.create_app``)."""
    portal = app.state.portal
    assert isinstance(portal, Portal), "the app was not made by app.main.create_app"
    return portal
