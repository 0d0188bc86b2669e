"""The append-only audit trail."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from app.models import AuditEvent, User

SYSTEM_ACTOR = "portal"


def record(
    session: Session,
    *,
    actor: User | None,
    action: str,
    summary: str,
    team_id: int | None = None,
    details: dict[str, Any] | None = None,
) -> AuditEvent:
    """Append one event; the caller's unit of work commits it with the change it describes."""
    event = AuditEvent(
        actor_id=actor.id if actor else None,
        actor=actor.email if actor else SYSTEM_ACTOR,
        action=action,
        summary=summary,
        team_id=team_id,
        details=details or {},
    )
    session.add(event)
    return event


def get_all(
    session: Session,
    *,
    team_ids: Sequence[int] | None = None,
    team_id: int | None = None,
    action_prefix: str | None = None,
    before_id: int | None = None,
    limit: int = 100,
) -> list[AuditEvent]:
    """Newest first; ``team_ids`` restricts to those teams (None means all)."""
    query = select(AuditEvent).order_by(AuditEvent.id.desc()).limit(limit)
    if team_ids is not None:
        query = query.where(AuditEvent.team_id.in_(team_ids))
    if team_id is not None:
        query = query.where(AuditEvent.team_id == team_id)
    if action_prefix:
        query = query.where(AuditEvent.action.startswith(action_prefix))
    if before_id is not None:
        query = query.where(AuditEvent.id < before_id)
    return list(session.scalars(query))
