"""The lines of the few newest audit events a page lists, kept between views."""

from __future__ import annotations

import threading
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy.orm import Session

from app.audit import repository as audit


@dataclass(frozen=True)
class EventLine:
    id: int
    at: datetime
    summary: str
    team: str | None  # the team's name, if the event is a team's
    details: dict[str, Any]


class EventLines:
    """The lines of the few audit events a page lists, kept for the ids it asked last: the
    ids come with the page's figures, so the list costs a query only when it changed
    (events are never edited), and is never shown stale."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._ids: tuple[int, ...] | None = None
        self._lines: list[EventLine] = []

    def get(self, session: Session, ids: tuple[int, ...]) -> list[EventLine]:
        with self._lock:
            if ids == self._ids:
                return self._lines
        lines = [EventLine(*line) for line in audit.get_lines(session, ids)]
        with self._lock:
            self._ids, self._lines = ids, lines
        return lines
