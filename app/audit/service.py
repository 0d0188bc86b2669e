"""The append-only audit trail."""

from __future__ import annotations

from typing import Any

from sqlalchemy.orm import Session

from app.core.events import Event
from app.core.models import AuditEvent, User

SYSTEM_ACTOR = "portal"


def record(
    session: Session,
    *,
    actor: User | None,
    event: Event,
    summary: str,
    team_id: int | None = None,
    details: dict[str, Any] | None = None,
) -> AuditEvent:
    """Append one event; the caller's unit of work commits it with the change it describes.
    (Above the notifications domain, ``app.notifications.events.record`` writes it, and
    the notices of the events people hear of.)"""
    row = AuditEvent(
        actor_id=actor.id if actor else None,
        actor=actor.email if actor else SYSTEM_ACTOR,
        action=event.value,
        summary=summary,
        team_id=team_id,
        details=details or {},
    )
    session.add(row)
    return row
