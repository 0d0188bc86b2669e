"""Pods the host refused, per team: read from the team's vCluster at most once per
``ttl`` seconds whatever the number of viewers, so a page that shows them costs one read
per team and interval, never one per view. The read runs on a small pool of its own, never
on a page's thread: a page gets the last reading at once (or "being read" the first time)
and the partial asks again shortly. A failed read is kept and shown, not hidden behind an
empty list."""

from __future__ import annotations

import logging
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

from app.provisioning.backend import RefusedPod, TeamSpec, WorkloadReader

log = logging.getLogger(__name__)
READERS = 2  # vClusters read at once


@dataclass(frozen=True)
class Reading:
    pods: list[RefusedPod] = field(default_factory=list)
    error: str | None = None
    read_at: float = 0.0  # time.time() of the read
    reading: bool = False  # no reading yet: one is under way


class RefusedPods:
    def __init__(self, reader: WorkloadReader, *, ttl: float = 15.0) -> None:
        self.reader = reader
        self.ttl = ttl
        self._lock = threading.Lock()
        self._readings: dict[str, tuple[float, Reading]] = {}
        self._busy: set[str] = set()  # teams being read now
        self._pool = ThreadPoolExecutor(READERS, thread_name_prefix="refused-pods")

    def get(self, spec: TeamSpec) -> Reading:
        """The team's last reading, a new one started when it is older than ``ttl``."""
        with self._lock:
            known = self._readings.get(spec.team)
            fresh = known is not None and time.monotonic() - known[0] < self.ttl
            if not fresh and spec.team not in self._busy:
                self._busy.add(spec.team)
                self._pool.submit(self._read, spec)
        return known[1] if known is not None else Reading(reading=True)

    def _read(self, spec: TeamSpec) -> None:
        try:
            reading = Reading(self.reader.refused_pods(spec), read_at=time.time())
        except Exception as exc:  # shown on the page: the cluster could not say
            log.warning("reading refused pods of %s failed: %s", spec.team, exc)
            reading = Reading(error=f"could not be read from the vCluster: {exc}")
        with self._lock:
            self._readings[spec.team] = (time.monotonic(), reading)
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
