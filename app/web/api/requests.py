"""API: cluster and quota-change requests and their decisions."""

from __future__ import annotations

from fastapi import APIRouter, Request, Response

from app.catalog import service as catalog
from app.catalog.service import Chosen
from app.core.errors import InvalidInput, NotFound
from app.core.models import RequestStatus
from app.teams import repository as repo
from app.teams import service
from app.teams.service import KEEP, Keep
from app.web.deps import AdminPrincipal, CurrentPrincipal, Id, SessionDep, UsageDep
from app.web.paging import PAGED, WindowDep, announce
from app.web.schemas import (
    PROBLEMS,
    ClusterRequestIn,
    DecisionIn,
    ImpactOut,
    RejectIn,
    RequestOut,
)
from app.web.views.api import impact_out, request_out
from app.web.views.impact import request_impact

router = APIRouter(prefix="/api/v1", responses=PROBLEMS, tags=["requests"])


@router.post("/requests", response_model=RequestOut, status_code=201)
def create_request(
    body: ClusterRequestIn, session: SessionDep, principal: CurrentPrincipal
) -> RequestOut:
    """Request a cluster for a new team, optionally of a cluster template with its
    parameters; you become its lead."""
    template = catalog.choose(
        session,
        template_id=body.template_id,
        parameters=body.parameters,
        org=repo.get_org(session),
        admin=principal.is_admin,
    )
    created = service.submit_cluster_request(
        session,
        actor=principal.user,
        name=body.name,
        values=body.values(),
        purpose=body.purpose,
        template=template,
        pools=body.pool_values(),
    )
    return request_out(created)


@router.get("/requests", response_model=list[RequestOut], responses=PAGED)
def list_requests(
    request: Request,
    response: Response,
    session: SessionDep,
    principal: CurrentPrincipal,
    window: WindowDep,
    status: RequestStatus | None = None,
) -> list[RequestOut]:
    """Requests of your teams (admins: all), oldest first; paged (`limit`, `offset`)."""
    visible = principal.visible_team_ids
    rows = repo.get_requests(
        session, status=status, team_ids=visible, limit=window.limit, offset=window.offset
    )
    total = repo.count_requests(session, status=status, team_ids=visible)
    announce(request, response, window, returned=len(rows), total=total)
    decisions = repo.get_decisions(session, [r.id for r in rows])
    return [request_out(r, decisions.get(r.id)) for r in rows]


@router.get("/requests/{request_id}", response_model=RequestOut)
def get_request(request_id: Id, session: SessionDep, principal: CurrentPrincipal) -> RequestOut:
    found = repo.get_request(session, request_id)
    if not principal.can_view(found.team):
        raise NotFound(f"no request with id {request_id}")
    return request_out(found, repo.get_decisions(session, [found.id]).get(found.id))


@router.get("/requests/{request_id}/impact", response_model=ImpactOut)
def get_request_impact(
    request_id: Id, session: SessionDep, principal: AdminPrincipal, usage: UsageDep
) -> ImpactOut:
    """Every team's guarantee and fair share now and if the request is approved as asked
    (admin): the same calculator as the gauges, over the whole org."""
    found = repo.get_request(session, request_id)
    return impact_out(request_impact(session, usage, repo.get_org(session), found, every_team=True))


@router.post("/requests/{request_id}/approve", response_model=RequestOut)
def approve_request(
    request_id: Id, body: DecisionIn, session: SessionDep, principal: AdminPrincipal
) -> RequestOut:
    """Approve as asked, or with `adjusted` values and another `template_id`; refused
    past the pool (409)."""
    template: Chosen | Keep | None = KEEP
    if body.template_id is not None:
        template = catalog.choose(
            session,
            template_id=body.template_id or None,
            parameters=body.parameters,
            org=repo.get_org(session),
            admin=True,
        )
    elif body.parameters:
        raise InvalidInput({"parameters": "parameters need a template_id"})
    decision = service.approve(
        session,
        actor=principal.user,
        request_id=request_id,
        adjusted=body.adjusted.values() if body.adjusted else None,
        reason=body.reason,
        template=template,
        adjusted_pools=body.adjusted.pool_values() if body.adjusted else None,
    )
    return request_out(repo.get_request(session, request_id), decision)


@router.post("/requests/{request_id}/reject", response_model=RequestOut)
def reject_request(
    request_id: Id, body: RejectIn, session: SessionDep, principal: AdminPrincipal
) -> RequestOut:
    decision = service.reject(
        session, actor=principal.user, request_id=request_id, reason=body.reason
    )
    return request_out(repo.get_request(session, request_id), decision)
