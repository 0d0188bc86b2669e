"""API: the audit trail."""

from __future__ import annotations

from fastapi import APIRouter

from app.audit import repository as audit
from app.core.errors import NotFound
from app.web.deps import CurrentPrincipal, Id, OptionalIdQuery, SessionDep
from app.web.schemas import PROBLEMS, AuditEventOut
from app.web.views.api import event_out

router = APIRouter(prefix="/api/v1", responses=PROBLEMS, tags=["audit"])


@router.get("/audit", response_model=list[AuditEventOut])
def list_audit(
    session: SessionDep,
    principal: CurrentPrincipal,
    team_id: OptionalIdQuery = None,
    before_id: OptionalIdQuery = None,
    limit: int = 100,
) -> list[AuditEventOut]:
    """Audit events, newest first (team leads: their teams' events only)."""
    events = audit.get_all(
        session,
        team_ids=principal.visible_team_ids,
        team_id=team_id,
        before_id=before_id,
        limit=max(1, min(limit, 500)),
    )
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
