"""Usage over time on pages: a team's GPUs in use over the last 24 hours, 7 days or 30
days (each node pool it holds GPUs in), and the org's, with showback by month: what
each team used, within its guarantee and borrowed above it, at each pool's price."""

from __future__ import annotations

from datetime import UTC, datetime

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse, Response

from app.core.errors import InvalidInput
from app.core.models import Pool
from app.core.quantities import format_figure
from app.provisioning import repository as provisioning_repo
from app.teams import repository as repo
from app.usage import history
from app.usage import repository as usage_repo
from app.usage.chart import RANGES, parse_range, usage_chart
from app.usage.repository import DEFAULT_POOL
from app.web.deps import AdminPrincipal, CurrentPrincipal, SessionDep, TeamForViewer
from app.web.templating import render

router = APIRouter(include_in_schema=False)


def _pool(pools: list[Pool], name: str) -> Pool:
    """The org's pool named ``name`` (empty: the default)."""
    for pool in pools:
        if (pool.is_default and not name) or (not pool.is_default and pool.name == name):
            return pool
    known = ", ".join(p.name for p in pools if not p.is_default)
    raise InvalidInput({"pool": f"no node pool {name!r} here; the others are: {known}"})


@router.get("/teams/{team_id}/usage", response_class=HTMLResponse)
def team_usage(
    request: Request,
    team: TeamForViewer,
    session: SessionDep,
    principal: CurrentPrincipal,
    range: str = "",
    pool: str = "",
) -> Response:
    """A team's GPUs in use, asked for and guaranteed over a period, in one pool."""
    what = parse_range(range)
    pools = repo.get_pools(session, team.org_id)
    chosen = _pool(pools, pool)
    held = (team.quota if chosen.is_default else team.quota_in(chosen)).gpu.limit
    limit = held / 100 if held is not None else None
    chart = usage_chart(
        session,
        what,
        team_id=team.id,
        limit=limit,
        pool=DEFAULT_POOL if chosen.is_default else chosen.name,
    )
    evicted = usage_repo.evictions_since(
        session,
        datetime.now(UTC) - what.span,
        team_id=team.id,
        pool="" if chosen.is_default else chosen.label_value,
    )
    by_ids = sorted({r.by_team_id for r in evicted if r.by_team_id is not None})
    return render(
        request,
        "teams/usage.html",
        {
            "evicted": len(evicted),
            "lost": format_figure(sum(r.lost_gpu_hours or 0.0 for r in evicted)),
            "evicted_by": sorted(provisioning_repo.team_names(session, by_ids).values()),
            "principal": principal,
            "team": team,
            "chart": chart,
            "what": what,
            "ranges": RANGES,
            "pools": pools,
            "pool": chosen,
        },
    )


@router.get("/admin/usage", response_class=HTMLResponse)
def org_usage(
    request: Request,
    session: SessionDep,
    principal: AdminPrincipal,
    range: str = "",
    month: str = "",
) -> Response:
    """The org's GPUs over a period (its default pool), and showback for a month."""
    what = parse_range(range)
    month = history.parse_month(month) or datetime.now(UTC).strftime("%Y-%m")
    org = repo.get_org(session)
    rows = history.showback(session, month=month)
    return render(
        request,
        "admin/usage.html",
        {
            "principal": principal,
            "org": org,
            "chart": usage_chart(session, what, org_id=org.id),
            "what": what,
            "ranges": RANGES,
            "month": month,
            "rows": rows,
            "hours": round(sum(r.total for r in rows), 3),
            "costs": [r.cost for r in rows if r.cost is not None],
        },
    )
