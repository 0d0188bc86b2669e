"""Periodic jobs: one loop type for every background job of the portal, and the
declaration a domain writes beside its code to have a job run.

A domain declares ``Job(name=..., roles=..., build=...)`` in its ``jobs.py``; the
process (``app.runtime``) builds the jobs of the roles it plays, starts their loops and
stops them. A loop runs ``run`` once per ``period`` (or sooner when ``run`` asks for it,
or when something wakes it), keeps the last error for readiness and logs each failure.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Generic, TypeVar

from app.core.config import Settings
from app.core.db import Effect

log = logging.getLogger(__name__)


class Role(StrEnum):
    """What a process does. ``gpu-portal serve`` plays ``web`` and, unless turned off,
    ``work`` and ``deliver``; ``gpu-portal work`` plays ``work``; ``gpu-portal deliver``
    plays ``deliver``."""

    WEB = "web"  # keeps the org view and the usage history of the pages it serves
    WORK = "work"  # provisions teams and keeps each vCluster's accounts right
    DELIVER = "deliver"  # sends notifications and writes the notices due by the clock


@dataclass
class Loop:
    """One background thread running ``run`` until stopped.

    ``run`` returns how long to wait before the next pass (``None``: ``period``).
    ``wake`` cuts the wait short (a commit that gave the job work sets it).
    ``on_start`` runs first in the thread; ``on_stop`` runs once the thread has ended
    (or given up waiting for it), e.g. to hand leases back."""

    name: str
    run: Callable[[], float | None]
    period: float
    wake: threading.Event = field(default_factory=threading.Event)
    on_start: Callable[[], object] | None = None
    on_stop: Callable[[], object] | None = None
    before_stop: Callable[[], object] | None = None
    failure: str = "failed; trying again"
    last_error: str | None = None
    runs: int = 0
    last_run_at: float | None = None  # monotonic
    _stop: threading.Event = field(default_factory=threading.Event, repr=False)
    _thread: threading.Thread | None = field(default=None, repr=False)

    def start(self) -> None:
        self._thread = threading.Thread(target=self._main, name=self.name, daemon=True)
        self._thread.start()

    def alive(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    def stop(self, timeout: float = 10.0) -> None:
        self._stop.set()
        if self.before_stop is not None:
            self.before_stop()
        self.wake.set()
        if self._thread is not None:
            self._thread.join(timeout)
            if self._thread.is_alive():
                log.warning("%s is still busy after %.0f s", self.name, timeout)
        if self.on_stop is not None:
            try:
                self.on_stop()
            except Exception:
                log.exception("%s: stopping failed", self.name)

    def run_once(self) -> float | None:
        """One pass, with its failure kept and logged instead of raised."""
        try:
            wait = self.run()
        except Exception as exc:
            self.last_error = f"{type(exc).__name__}: {exc}"[:300]
            log.exception("%s %s", self.name, self.failure)
            wait = None
        else:
            self.last_error = None
        self.runs += 1
        self.last_run_at = time.monotonic()
        return wait

    def _main(self) -> None:
        if self.on_start is not None:
            try:
                self.on_start()
            except Exception:
                log.exception("%s: starting failed", self.name)
        while not self._stop.is_set():
            wait = self.run_once()
            if self._stop.is_set():
                break
            self.wake.wait(self.period if wait is None else wait)
            self.wake.clear()


P = TypeVar("P", contravariant=True)


@dataclass(frozen=True)
class Job(Generic[P]):
    """A periodic job as a domain declares it: its name (the thread's and readiness's),
    the process roles that run it, when the settings turn it on, the effects that wake it,
    and how its loop is built from the process's parts (``P``: a protocol of what the job
    needs, which the process's container satisfies)."""

    name: str
    roles: frozenset[Role]
    build: Callable[[P], Loop]
    enabled: Callable[[Settings], bool] = lambda _settings: True
    wakes_on: tuple[Effect, ...] = ()
