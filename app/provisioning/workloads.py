"""What a team page shows of a team's pods, per team: the pods the host refused (read from
the team's vCluster) and the team's workloads as KAI sees them (read from the host), each
read at most once per ``ttl`` seconds whatever the number of viewers, so a page that shows
them costs one read per team and interval, never one per view. The read runs on a small
pool of its own, never on a page's thread: a page gets the last reading at once (or "being
read" the first time) and the partial asks again shortly. A failed read is kept and shown,
not hidden behind an empty list."""

from __future__ import annotations

import logging
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from typing import Generic, TypeVar

from app.provisioning.backend import RefusedPod, TeamSpec, Workload, WorkloadReader

log = logging.getLogger(__name__)
READERS = 2  # clusters read at once
KEPT = 2000  # teams whose last reading is kept (the least recently read go first)
T = TypeVar("T")


@dataclass(frozen=True)
class Reading(Generic[T]):
    pods: list[T] = field(default_factory=list)
    error: str | None = None
    read_at: float = 0.0  # time.time() of the read
    reading: bool = False  # no reading yet: one is under way
    refreshing: bool = False  # older than the interval: a new one is under way


class TeamReadings(Generic[T]):
    """One kind of reading per team, kept ``ttl`` seconds."""

    def __init__(
        self, read: Callable[[TeamSpec], list[T]], *, ttl: float = 15.0, where: str = "vCluster"
    ) -> None:
        self.read = read
        self.ttl = ttl
        self.where = where
        self._lock = threading.Lock()
        self._readings: OrderedDict[str, tuple[float, Reading[T]]] = OrderedDict()
        self._busy: set[str] = set()  # teams being read now
        self._pool = ThreadPoolExecutor(READERS, thread_name_prefix="team-reads")

    def put(self, team: str, items: list[T]) -> None:
        """A reading made elsewhere (the workload job's), served as this one's."""
        with self._lock:
            self._keep(team, (time.monotonic(), Reading(items, read_at=time.time())))

    def _keep(self, team: str, entry: tuple[float, Reading[T]]) -> None:
        """Under the lock: the team's reading, newest last; at most ``KEPT`` teams'."""
        self._readings[team] = entry
        self._readings.move_to_end(team)
        while len(self._readings) > KEPT:
            self._readings.popitem(last=False)

    def last(self, team: str) -> list[T]:
        """What the team's last reading found (none read yet: nothing)."""
        with self._lock:
            known = self._readings.get(team)
        return list(known[1].pods) if known is not None else []

    def get(self, spec: TeamSpec) -> Reading[T]:
        """The team's last reading, a new one started when it is older than ``ttl``."""
        with self._lock:
            known = self._readings.get(spec.team)
            fresh = known is not None and time.monotonic() - known[0] < self.ttl
            if not fresh and spec.team not in self._busy:
                self._busy.add(spec.team)
                self._pool.submit(self._read, spec)
        if known is None:
            return Reading(reading=True)
        return known[1] if fresh else replace(known[1], refreshing=True)

    def _read(self, spec: TeamSpec) -> None:
        reading: Reading[T]
        try:
            reading = Reading(self.read(spec), read_at=time.time())
        except Exception as exc:  # shown on the page: the cluster could not say
            log.warning("reading the %s of %s failed: %s", self.where, spec.team, exc)
            reading = Reading(error=f"could not be read from the {self.where}: {exc}")
        with self._lock:
            self._keep(spec.team, (time.monotonic(), reading))
            self._busy.discard(spec.team)

    def wait(self, timeout: float = 10.0) -> None:
        """Until no read is under way (tests, and a clean stop)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            with self._lock:
                if not self._busy:
                    return
            time.sleep(0.01)

    def close(self) -> None:
        self._pool.shutdown(wait=False, cancel_futures=True)


class RefusedPods(TeamReadings[RefusedPod]):
    """The pods the host refused, read from the team's vCluster."""

    def __init__(self, reader: WorkloadReader, *, ttl: float = 15.0) -> None:
        super().__init__(reader.refused_pods, ttl=ttl, where="vCluster")


class Workloads(TeamReadings[Workload]):
    """The team's workloads as KAI sees them, read from the host."""

    def __init__(self, reader: WorkloadReader, *, ttl: float = 30.0) -> None:
        super().__init__(reader.workloads, ttl=ttl, where="host cluster")
        self.reader = reader
