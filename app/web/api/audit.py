"""API: the audit trail."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query, Request, Response

from app.audit import repository as audit
from app.core.errors import NotFound
from app.web.deps import CurrentPrincipal, Id, OptionalIdQuery, SessionDep
from app.web.paging import BEFORE_PAGED, LIMIT_DEFAULT, LIMIT_MAX, announce_before
from app.web.schemas import PROBLEMS, AuditEventOut
from app.web.views.api import event_out

router = APIRouter(prefix="/api/v1", responses=PROBLEMS, tags=["audit"])


@router.get("/audit", response_model=list[AuditEventOut], responses=BEFORE_PAGED)
def list_audit(
    request: Request,
    response: Response,
    session: SessionDep,
    principal: CurrentPrincipal,
    team_id: OptionalIdQuery = None,
    before_id: OptionalIdQuery = None,
    limit: Annotated[
        int, Query(ge=1, le=LIMIT_MAX, description=f"At most this many (1 to {LIMIT_MAX}).")
    ] = LIMIT_DEFAULT,
) -> list[AuditEventOut]:
    """Audit events, newest first (team leads: their teams' events only); paged by
    `before_id` (the `Link` header's next window starts below the last id returned)."""
    events = audit.get_all(
        session,
        team_ids=principal.visible_team_ids,
        team_id=team_id,
        before_id=before_id,
        limit=limit,
    )
    announce_before(request, response, last_id=events[-1].id if len(events) == limit else None)
    return [event_out(e) for e in events]


@router.get("/audit/{event_id}", response_model=AuditEventOut)
def get_audit_event(
    event_id: Id, session: SessionDep, principal: CurrentPrincipal
) -> AuditEventOut:
    event = audit.get(session, event_id)
    visible = event is not None and (
        principal.is_admin or (event.team_id is not None and event.team_id in principal.team_ids)
    )
    if event is None or not visible:
        raise NotFound(f"no audit event with id {event_id}")
    return event_out(event)
