"""Quota over time through the API: temporary grants (a lead asks, an admin decides,
either ends it) and GPU-hour budgets (an admin sets them, the team reads their burn)."""

from __future__ import annotations

from fastapi import APIRouter, Request, Response

from app.core.errors import NotFound
from app.core.models import GrantStatus, QuotaGrant, utcnow
from app.core.quantities import format_hundredths
from app.teams import grants
from app.usage import budgets
from app.web.deps import (
    AdminPrincipal,
    CurrentPrincipal,
    Id,
    SessionDep,
    SettingsDep,
    TeamForLead,
    TeamForViewer,
)
from app.web.paging import PAGED, WindowDep, announce
from app.web.schemas import PROBLEMS, BudgetIn, BudgetOut, GrantDecisionIn, GrantIn, GrantOut

router = APIRouter(prefix="/api/v1", responses=PROBLEMS, tags=["grants"])


def grant_out(grant: QuotaGrant) -> GrantOut:
    if grant.status in (GrantStatus.REJECTED, GrantStatus.WITHDRAWN):
        state = "not granted"
    elif grant.status == GrantStatus.SUBMITTED:
        state = "waiting"
    elif grant.released_at is not None:
        state = "ended"
    elif grant.applied_at is not None:
        state = "running"
    else:
        state = "to come"
    return GrantOut(
        id=grant.id,
        team_id=grant.team_id,
        pool="" if grant.pool.is_default else grant.pool.name,
        gpus=format_hundredths(grant.gpu_centi),
        limit=format_hundredths(grant.limit_centi),
        starts_at=grant.starts_at,
        ends_at=grant.end,
        reason=grant.reason,
        status=grant.status,
        state=state,
        decision_reason=grant.decision_reason or "",
    )


@router.get("/teams/{team_id}/grants", response_model=list[GrantOut], responses=PAGED)
def team_grants(
    request: Request,
    response: Response,
    team: TeamForViewer,
    session: SessionDep,
    window: WindowDep,
) -> list[GrantOut]:
    """The team's grants, the latest window first (anyone of the team, or an admin);
    paged (`limit`, `offset`)."""
    found = grants.of_team(session, team.id, since=utcnow() - grants.RECENT)
    shown = window.of(found)
    announce(request, response, window, returned=len(shown), total=len(found))
    return [grant_out(g) for g in shown]


@router.post("/teams/{team_id}/grants", response_model=GrantOut, status_code=201)
def ask_grant(
    team: TeamForLead,
    session: SessionDep,
    principal: CurrentPrincipal,
    settings: SettingsDep,
    body: GrantIn,
) -> GrantOut:
    """Ask for a temporary grant (a lead); it waits for an admin's decision."""
    now = utcnow()
    asked = grants.parse_ask(body.model_dump(), now=now, max_days=settings.grant_max_days)
    return grant_out(grants.ask(session, actor=principal.user, team=team, asked=asked, now=now))


@router.get("/grants", response_model=list[GrantOut], responses=PAGED)
def org_grants(
    request: Request,
    response: Response,
    session: SessionDep,
    principal: AdminPrincipal,
    window: WindowDep,
) -> list[GrantOut]:
    """Every grant waiting, running or to come, and those ended in the last week (admin);
    paged (`limit`, `offset`)."""
    found = grants.of_org(session, since=utcnow() - grants.RECENT)
    shown = window.of(found)
    announce(request, response, window, returned=len(shown), total=len(found))
    return [grant_out(g) for g in shown]


@router.post("/grants/{grant_id}/approve", response_model=GrantOut)
def approve_grant(grant_id: Id, session: SessionDep, principal: AdminPrincipal) -> GrantOut:
    """Approve a waiting grant (admin): refused, with the moment and what is free then,
    if the pool cannot hold it at some moment of its window."""
    return grant_out(grants.approve(session, actor=principal.user, grant_id=grant_id, now=utcnow()))


@router.post("/grants/{grant_id}/reject", response_model=GrantOut)
def reject_grant(
    grant_id: Id, session: SessionDep, principal: AdminPrincipal, body: GrantDecisionIn
) -> GrantOut:
    grants.reject(
        session, actor=principal.user, grant_id=grant_id, reason=body.reason, now=utcnow()
    )
    return grant_out(grants.get_grant(session, grant_id))


@router.post("/grants/{grant_id}/end", response_model=GrantOut)
def end_grant(grant_id: Id, session: SessionDep, principal: CurrentPrincipal) -> GrantOut:
    """End a grant now (a lead of its team, or an admin): a waiting one is withdrawn."""
    grant = grants.get_grant(session, grant_id)
    team = grants.team_of(session, grant)
    if not principal.can_view(team):
        raise NotFound(f"no grant #{grant_id}")
    principal.require_lead(team)
    grants.end(session, actor=principal.user, grant=grant, now=utcnow())
    return grant_out(grant)


def budget_out(burn: budgets.Burn) -> BudgetOut:
    b = burn.budget
    return BudgetOut(
        team_id=b.team_id,
        pool="" if b.pool.is_default else b.pool.name,
        month=b.month,
        gpu_hours=format_hundredths(b.gpu_hours_centi),
        used_gpu_hours=burn.used_hours,
        percent=round(burn.percent, 1),
        reaches_100_at=burn.reaches_at,
        at_limit="stop_borrowing" if b.stop_borrowing else "alert",
        borrowing_stopped=b.limited_at is not None and b.restored_at is None,
    )


@router.get("/teams/{team_id}/budgets", response_model=list[BudgetOut], responses=PAGED)
def team_budgets(
    request: Request,
    response: Response,
    team: TeamForViewer,
    session: SessionDep,
    window: WindowDep,
) -> list[BudgetOut]:
    """The team's GPU-hour budgets this month, with their burn; paged."""
    found = budgets.of_team(session, team.id, utcnow())
    shown = window.of(found)
    announce(request, response, window, returned=len(shown), total=len(found))
    return [budget_out(b) for b in shown]


@router.put("/teams/{team_id}/budget", response_model=BudgetOut)
def put_budget(
    team: TeamForViewer, session: SessionDep, principal: AdminPrincipal, body: BudgetIn
) -> BudgetOut:
    """Set the team's GPU-hour budget for a month (admin)."""
    now = utcnow()
    asked = budgets.parse_budget(body.model_dump(), now=now)
    budget = budgets.set_budget(session, actor=principal.user, team=team, asked=asked, now=now)
    return budget_out(budgets.burns(session, [budget], now)[0])


@router.get("/budgets", response_model=list[BudgetOut], responses=PAGED)
def org_budgets(
    request: Request,
    response: Response,
    session: SessionDep,
    principal: AdminPrincipal,
    window: WindowDep,
) -> list[BudgetOut]:
    """Every GPU-hour budget this month, with its burn (admin); paged."""
    found = budgets.of_org(session, utcnow())
    shown = window.of(found)
    announce(request, response, window, returned=len(shown), total=len(found))
    return [budget_out(b) for b in shown]
