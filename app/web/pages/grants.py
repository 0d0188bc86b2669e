"""Quota over time on pages: temporary grants (a lead asks for one, or ends it, on the
team page; an admin approves or rejects it on the Requests page) and GPU-hour budgets
(an admin sets one on the team page)."""

from __future__ import annotations

from fastapi import APIRouter, Request
from fastapi.responses import Response

from app.core import labels
from app.core.db import discard_changes
from app.core.errors import DomainError
from app.core.models import utcnow
from app.core.quantities import format_hundredths
from app.teams import grants
from app.usage import budgets
from app.web.deps import (
    AdminPrincipal,
    CurrentPrincipal,
    FormDep,
    Id,
    SessionDep,
    SettingsDep,
    TeamForLead,
    TeamForViewer,
)
from app.web.templating import flash, redirect

router = APIRouter(include_in_schema=False)


@router.post("/teams/{team_id}/grants")
def ask_grant(
    request: Request,
    team: TeamForLead,
    session: SessionDep,
    principal: CurrentPrincipal,
    settings: SettingsDep,
    data: FormDep,
) -> Response:
    """A lead asks for a temporary grant; it waits for an admin."""
    now = utcnow()
    try:
        asked = grants.parse_ask(data, now=now, max_days=settings.grant_max_days)
        grant = grants.ask(session, actor=principal.user, team=team, asked=asked, now=now)
    except DomainError as exc:
        discard_changes(session)
        flash(request, "Grant not asked: " + labels.said(exc), "error")
        return redirect(request, f"/teams/{team.id}#grants")
    flash(request, f"Asked for grant #{grant.id}: {grants.describe(grant, grant.pool)}.")
    return redirect(request, f"/teams/{team.id}#grants")


@router.post("/teams/{team_id}/grants/{grant_id}/end")
def end_grant(
    request: Request,
    team: TeamForLead,
    grant_id: Id,
    session: SessionDep,
    principal: CurrentPrincipal,
) -> Response:
    """A lead (or an admin) ends a grant of the team before its window does."""
    grant = grants.get_grant(session, grant_id)
    if grant.team_id != team.id:
        return redirect(request, f"/teams/{team.id}#grants")
    try:
        grants.end(session, actor=principal.user, grant=grant, now=utcnow())
    except DomainError as exc:
        discard_changes(session)
        flash(request, labels.said(exc), "error")
        return redirect(request, f"/teams/{team.id}#grants")
    flash(request, f"Grant #{grant.id} ended: {team.name}'s quota is back to its own.")
    return redirect(request, f"/teams/{team.id}#grants")


@router.post("/admin/grants/{grant_id}/approve")
def approve_grant(
    request: Request, grant_id: Id, session: SessionDep, principal: AdminPrincipal
) -> Response:
    try:
        grant = grants.approve(session, actor=principal.user, grant_id=grant_id, now=utcnow())
    except DomainError as exc:
        discard_changes(session)
        flash(request, labels.said(exc), "error")
        return redirect(request, "/admin/requests#grants")
    flash(request, f"Approved grant #{grant.id}: {grants.describe(grant, grant.pool)}.")
    return redirect(request, "/admin/requests#grants")


@router.post("/admin/grants/{grant_id}/reject")
def reject_grant(
    request: Request,
    grant_id: Id,
    session: SessionDep,
    principal: AdminPrincipal,
    data: FormDep,
) -> Response:
    try:
        grants.reject(
            session,
            actor=principal.user,
            grant_id=grant_id,
            reason=data.get("reason", ""),
            now=utcnow(),
        )
    except DomainError as exc:
        discard_changes(session)
        flash(request, labels.said(exc), "error")
        return redirect(request, "/admin/requests#grants")
    flash(request, f"Rejected grant #{grant_id}.")
    return redirect(request, "/admin/requests#grants")


@router.post("/teams/{team_id}/budget")
def set_budget(
    request: Request,
    team: TeamForViewer,
    session: SessionDep,
    principal: AdminPrincipal,
    data: FormDep,
) -> Response:
    """An admin sets the team's GPU-hour budget for a month."""
    now = utcnow()
    try:
        asked = budgets.parse_budget(data, now=now)
        budget = budgets.set_budget(session, actor=principal.user, team=team, asked=asked, now=now)
    except DomainError as exc:
        discard_changes(session)
        flash(request, "Budget not set: " + labels.said(exc), "error")
        return redirect(request, f"/teams/{team.id}#budget")
    flash(
        request,
        f"{team.name}'s budget for {budget.month}: {format_hundredths(budget.gpu_hours_centi)} "
        "GPU-hours.",
    )
    return redirect(request, f"/teams/{team.id}#budget")
