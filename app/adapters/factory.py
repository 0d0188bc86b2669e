"""What the entry points assemble from settings: the cluster backend, and the chores
the notification delivery thread runs besides sending."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Protocol

from sqlalchemy.orm import Session, sessionmaker

from app.access import service as access
from app.adapters.simulated import SimulatedBackend
from app.core.config import ClusterBackendKind, Settings
from app.core.db import unit_of_work
from app.provisioning.backend import ClusterBackend
from app.usage import digest
from app.usage.sources import UsageReader


class Cluster(ClusterBackend, UsageReader, Protocol):
    """A backend provisions teams (the provisioning domain's protocol) and reads their
    queues' usage (the usage domain's)."""


def make_backend(settings: Settings) -> Cluster:
    if settings.cluster_backend == ClusterBackendKind.SIMULATED:
        return SimulatedBackend(
            step_seconds=settings.simulated_step_seconds,
            call_seconds=settings.simulated_call_seconds,
        )
    from app.adapters.k8s.backend import KubernetesBackend

    return KubernetesBackend(settings)


def notification_chores(
    session_factory: sessionmaker[Session], settings: Settings, *, every: float = 60.0
) -> list[Callable[[], object]]:
    """What the delivery thread also does, at most once a minute: tell holders of
    long-lived kubeconfigs that expire within a day; write the weekly digest."""
    last = [-every]

    def chores() -> None:
        if time.monotonic() - last[0] < every:
            return
        last[0] = time.monotonic()
        with unit_of_work(session_factory) as session:
            access.tell_expiring(session)
        with unit_of_work(session_factory) as session:
            digest.write_weekly(session, settings)

    return [chores]
