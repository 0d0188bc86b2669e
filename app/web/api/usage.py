"""API: usage history and showback."""

from __future__ import annotations

from fastapi import APIRouter, Request, Response

from app.core.quantities import format_hundredths, gpus
from app.usage import history, rightsizing
from app.web.deps import AdminPrincipal, CurrentPrincipal, SessionDep, TeamForLead, TeamForViewer
from app.web.paging import PAGED, WindowDep, announce
from app.web.schemas import (
    PROBLEMS,
    RequestOut,
    RightsizingOut,
    ShowbackOut,
    SuggestionOut,
    UsagePointOut,
)
from app.web.views.api import request_out

router = APIRouter(prefix="/api/v1", responses=PROBLEMS, tags=["usage"])


@router.get("/teams/{team_id}/history", response_model=list[UsagePointOut], responses=PAGED)
def team_history(
    request: Request,
    response: Response,
    team: TeamForViewer,
    session: SessionDep,
    window: WindowDep,
    days: int = 7,
    pool: str = "",
) -> list[UsagePointOut]:
    """Hourly GPU use of the team over the last `days` days (at most 400), oldest first,
    in the default node pool or the one named by `pool`; paged (`limit`, `offset`)."""
    wanted = "" if pool in ("", "default") else pool
    points = history.last_days(session, team.id, days=max(1, min(days, 400)), pool=wanted)
    shown = window.of(points)
    announce(request, response, window, returned=len(shown), total=len(points))
    return [
        UsagePointOut(at=p.at, allocated=p.allocated, requested=p.requested, quota=p.quota)
        for p in shown
    ]


@router.get("/showback", response_model=list[ShowbackOut], responses=PAGED)
def get_showback(
    request: Request,
    response: Response,
    session: SessionDep,
    principal: AdminPrincipal,
    window: WindowDep,
    month: str | None = None,
) -> list[ShowbackOut]:
    """GPU-hours per team, month and node pool, within the guarantee and borrowed, with
    the pool's GPU type and the cost where the pool has a price (admin), by month, team
    and pool; paged (`limit`, `offset`)."""
    rows = history.showback(session, month=month)
    shown = window.of(rows)
    announce(request, response, window, returned=len(shown), total=len(rows))
    return [
        ShowbackOut(
            team=r.team,
            month=r.month,
            guaranteed_gpu_hours=r.guaranteed_gpu_hours,
            borrowed_gpu_hours=r.borrowed_gpu_hours,
            pool=r.pool,
            gpu_type=r.gpu_type,
            price_per_gpu_hour=format_hundredths(r.price_centi)
            if r.price_centi is not None
            else None,
            cost=f"{r.cost:.2f}" if r.cost is not None else None,
            budget_gpu_hours=format_hundredths(r.budget_centi) if r.budget_centi else None,
            budget_used_percent=r.budget_used,
        )
        for r in shown
    ]


@router.get("/rightsizing", response_model=RightsizingOut)
def get_rightsizing(session: SessionDep, principal: AdminPrincipal) -> RightsizingOut:
    """Teams whose guarantee their usage history says is too large (idle) or too small
    (their work waited), with the numbers and the suggested guarantee (admin)."""
    found = rightsizing.for_org(session)
    return RightsizingOut(
        idle_gpu=gpus(found.idle_centi),
        wanted_gpu=gpus(found.wanted_centi),
        suggestions=[
            SuggestionOut(
                team_id=s.team_id,
                team=name,
                pool=s.pool or "default",
                direction=s.direction,
                days=s.days,
                guarantee_gpu=gpus(s.guarantee_centi),
                average_gpu=gpus(s.average_centi),
                p95_gpu=gpus(s.p95_centi),
                demand_p95_gpu=gpus(s.demand_p95_centi),
                waiting_share=s.waiting_share,
                suggested_gpu=gpus(s.suggested_centi),
                computed_at=s.computed_at,
            )
            for name, s in found.rows
        ],
    )


@router.post("/teams/{team_id}/rightsizing", response_model=RequestOut, status_code=201)
def propose_rightsizing(
    team: TeamForLead, session: SessionDep, principal: CurrentPrincipal, pool: str = ""
) -> RequestOut:
    """Turn the team's right-sizing suggestion (in the default pool, or in the node pool
    `pool` names) into a quota-change request (409 when it has none for its current
    guarantee there, or a request already waits)."""
    wanted = "" if pool == "default" else pool
    return request_out(rightsizing.propose(session, actor=principal.user, team=team, pool=wanted))
