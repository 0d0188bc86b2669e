"""The audit trail page."""

from __future__ import annotations

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse, Response

from app.audit import repository as audit
from app.teams import repository as repo
from app.web.deps import CurrentPrincipal, OptionalIdQuery, SessionDep
from app.web.templating import render

router = APIRouter(include_in_schema=False)


@router.get("/audit", response_class=HTMLResponse)
def audit_page(
    request: Request,
    session: SessionDep,
    principal: CurrentPrincipal,
    team_id: OptionalIdQuery = None,
    action: str = "",
    before: OptionalIdQuery = None,
) -> Response:
    allowed = principal.visible_team_ids
    events = audit.get_all(
        session,
        team_ids=allowed,
        team_id=team_id,
        action_prefix=action or None,
        before_id=before,
        limit=100,
    )
    teams = {t.id: t for t in repo.get_teams(session, team_ids=allowed)}
    return render(
        request,
        "audit/list.html",
        {
            "principal": principal,
            "events": events,
            "teams": teams,
            "team_id": team_id,
            "action": action,
            "next_before": events[-1].id if len(events) == 100 else None,
        },
    )
