"""Every query of the audit trail."""

from __future__ import annotations

from collections.abc import Sequence

from sqlalchemy import select
from sqlalchemy.orm import Session

from app.core.models import AuditEvent


def get(session: Session, event_id: int) -> AuditEvent | None:
    return session.get(AuditEvent, event_id)


def get_all(
    session: Session,
    *,
    team_ids: Sequence[int] | None = None,
    team_id: int | None = None,
    action_prefix: str | None = None,
    action: str | None = None,
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
    if action:  # an exact action: the (action, id) index serves it newest first
        query = query.where(AuditEvent.action == action)
    if before_id is not None:
        query = query.where(AuditEvent.id < before_id)
    return list(session.scalars(query))
