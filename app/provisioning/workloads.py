"""Pods the host refused, per team: read from the team's vCluster at most once per
``ttl`` seconds whatever the number of viewers, so a page that shows them costs one read
per team and interval, never one per view. A failed read is kept and shown, not hidden
behind an empty list."""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field

from app.provisioning.backend import RefusedPod, TeamSpec, WorkloadReader


@dataclass(frozen=True)
class Reading:
    pods: list[RefusedPod] = field(default_factory=list)
    error: str | None = None
    read_at: float = 0.0  # time.time() of the read


class RefusedPods:
    def __init__(self, reader: WorkloadReader, *, ttl: float = 15.0) -> None:
        self.reader = reader
        self.ttl = ttl
        self._lock = threading.Lock()
        self._readings: dict[str, tuple[float, Reading]] = {}
        self._reading: dict[str, threading.Lock] = {}

    def get(self, spec: TeamSpec) -> Reading:
        with self._lock:
            known = self._readings.get(spec.team)
            if known is not None and time.monotonic() - known[0] < self.ttl:
                return known[1]
            one = self._reading.setdefault(spec.team, threading.Lock())
        with one:  # one read per team at a time; the others wait for its answer
            with self._lock:
                known = self._readings.get(spec.team)
                if known is not None and time.monotonic() - known[0] < self.ttl:
                    return known[1]
            try:
                reading = Reading(self.reader.refused_pods(spec), read_at=time.time())
            except Exception as exc:  # shown on the page: the cluster could not say
                reading = Reading(error=f"could not be read from the vCluster: {exc}")
            with self._lock:
                self._readings[spec.team] = (time.monotonic(), reading)
            return reading
