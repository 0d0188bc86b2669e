"""GPU share per team: one cluster read per interval, shared by every viewer."""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass

from app.models import Team
from app.provisioning.backend import ClusterBackend, QueueUsage


@dataclass(frozen=True)
class GpuShare:
    """A team's GPU share, in GPUs, as the gauge draws it."""

    guaranteed: float
    limit: float
    allocated: float | None
    requested: float | None
    pool: float

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


class UsageCache:
    """Reads usage of all queues at most once per ``ttl`` seconds, whoever asks."""

    def __init__(self, backend: ClusterBackend, *, ttl: float = 5.0) -> None:
        self.backend = backend
        self.ttl = ttl
        self._lock = threading.Lock()
        self._at = 0.0
        self._queues: frozenset[str] = frozenset()
        self._data: dict[str, QueueUsage] = {}
        self.reads = 0
        self.error: str | None = None

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
                self._queues = frozenset(names)
                self._at = time.monotonic()
                self.reads += 1
            return {name: self._data[name] for name in wanted if name in self._data}


def share_of(team: Team, usage: QueueUsage | None, pool_centi: int) -> GpuShare:
    return GpuShare(
        guaranteed=team.gpu_quota_centi / 100,
        limit=team.gpu_limit_centi / 100,
        allocated=usage.allocated_gpu if usage else None,
        requested=usage.requested_gpu if usage else None,
        pool=pool_centi / 100,
    )
