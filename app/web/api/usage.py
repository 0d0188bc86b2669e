"""API: usage history and showback."""

from __future__ import annotations

from fastapi import APIRouter

from app.usage import history
from app.web.deps import AdminPrincipal, SessionDep, TeamForViewer
from app.web.schemas import PROBLEMS, ShowbackOut, UsagePointOut

router = APIRouter(prefix="/api/v1", responses=PROBLEMS, tags=["usage"])


@router.get("/teams/{team_id}/history", response_model=list[UsagePointOut])
def team_history(team: TeamForViewer, session: SessionDep, days: int = 7) -> list[UsagePointOut]:
    """Hourly GPU use of the team over the last `days` days (at most 400)."""
    points = history.last_days(session, team.id, days=max(1, min(days, 400)))
    return [
        UsagePointOut(at=p.at, allocated=p.allocated, requested=p.requested, quota=p.quota)
        for p in points
    ]


@router.get("/showback", response_model=list[ShowbackOut])
def get_showback(
    session: SessionDep, principal: AdminPrincipal, month: str | None = None
) -> list[ShowbackOut]:
    """GPU-hours per team and month, within the guarantee and borrowed (admin)."""
    return [
        ShowbackOut(
            team=r.team,
            month=r.month,
            guaranteed_gpu_hours=r.guaranteed_gpu_hours,
            borrowed_gpu_hours=r.borrowed_gpu_hours,
        )
        for r in history.showback(session, month=month)
    ]
