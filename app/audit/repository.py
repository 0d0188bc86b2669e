"""Every query of the audit trail."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

from sqlalchemy import ScalarSelect, bindparam, select
from sqlalchemy.orm import Session

from app.core.db import constant
from app.core.models import AuditEvent, Team
from app.core.together import Read, Rows


def get(session: Session, event_id: int) -> AuditEvent | None:
    return session.get(AuditEvent, event_id)


# The team page's activity: built once, the team and the count as parameters.
_TEAM_EVENTS = (
    select(AuditEvent)
    .where(AuditEvent.team_id == bindparam("team_id"))
    .order_by(AuditEvent.id.desc())
    .limit(bindparam("limit"))
)


def team_events(team_id: int, limit: int) -> Read[list[AuditEvent]]:
    """The team's newest ``limit`` events, newest first."""
    return Read(_TEAM_EVENTS, {"team_id": team_id, "limit": limit}, _events)


def _events(rows: Rows) -> list[AuditEvent]:
    return [event for (event,) in rows]


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


def newest_ids_columns(action: str, count: int) -> tuple[ScalarSelect[int | None], ...]:
    """The ids of the newest ``count`` events of ``action`` (NULL past the last), as columns
    of a larger query: each a step backwards through the (action, id) index. Events are
    never changed or deleted, so equal ids mean equal events.

    ``action`` is the code's own event name, written into the statement (``constant``):
    as a parameter, PostgreSQL's generic plan would expect an average action's share of
    the events (thousands) where the plan for the name finds a handful, and would plan
    the whole overview statement anew on every view."""
    newest = (
        select(AuditEvent.id)
        .where(AuditEvent.action == constant(action))
        .order_by(AuditEvent.id.desc())
    )
    return tuple(newest.offset(k).limit(1).scalar_subquery() for k in range(count))


Line = tuple[int, datetime, str, str | None, dict[str, Any]]


def get_lines(session: Session, event_ids: Sequence[int]) -> list[Line]:
    """(id, at, summary, the team's name, facts) of these events, newest first."""
    rows = session.execute(
        select(AuditEvent.id, AuditEvent.at, AuditEvent.summary, Team.name, AuditEvent.details)
        .outerjoin(Team, Team.id == AuditEvent.team_id)
        .where(AuditEvent.id.in_(event_ids))
        .order_by(AuditEvent.id.desc())
    )
    return [
        (event_id, at, summary, team, details if isinstance(details, dict) else {})
        for event_id, at, summary, team, details in rows
    ]


def newest_details(session: Session, action: str, count: int) -> list[dict[str, Any]]:
    """The facts of the newest ``count`` events of ``action``, newest first (a step
    backwards through the (action, id) index)."""
    details = session.scalars(
        select(AuditEvent.details)
        .where(AuditEvent.action == action)
        .order_by(AuditEvent.id.desc())
        .limit(count)
    )
    return [facts for facts in details if isinstance(facts, dict)]


def newest_id(session: Session, action: str) -> int | None:
    """The id of the newest event of ``action`` (None: there is none)."""
    return session.scalar(
        select(AuditEvent.id)
        .where(AuditEvent.action == action)
        .order_by(AuditEvent.id.desc())
        .limit(1)
    )
