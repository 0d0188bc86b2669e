"""Admin pages: the pool, pending requests and their decisions, every team at a glance."""

from __future__ import annotations

import csv
import heapq
import io
import itertools
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse, Response
from sqlalchemy.orm import Session
from starlette.concurrency import run_in_threadpool

from app.audit import service as audit
from app.auth.principal import Principal
from app.catalog import service as catalog
from app.catalog.service import Chosen
from app.core import labels
from app.core.db import discard_changes
from app.core.errors import Conflict, DomainError, InvalidInput, NotFound
from app.core.events import Event
from app.core.models import (
    COMMITTED_STATUSES,
    LIVE_STATUSES,
    ClusterRequest,
    Org,
    RequestStatus,
    RightsizingSuggestion,
    Step,
    TeamStatus,
    utcnow,
)
from app.core.quantities import format_hundredths, parse_hundredths
from app.core.quota import GPU
from app.core.text import is_number
from app.core.together import Read
from app.provisioning import repairs
from app.provisioning import repository as provisioning
from app.reads.org import org_view, pool_views
from app.reads.overview import OverviewFigures, overview_figures_read
from app.runtime import Portal
from app.teams import grants, service
from app.teams import repository as repo
from app.teams.rules import parse_pool_fields, parse_quota_fields
from app.teams.service import KEEP, Keep
from app.usage import budgets, history, rightsizing
from app.usage.service import OrgView, UsageCache
from app.web.deps import (
    AdminPrincipal,
    BackendDep,
    FormDep,
    Id,
    PortalDep,
    SessionDep,
    SettingsDep,
    UsageDep,
    admin_reading,
    page_number,
)
from app.web.templating import flash, is_htmx, redirect, render
from app.web.views.impact import grant_reviews, org_impact, review, review_account, what_if
from app.web.views.overview import (
    GrantTimeline,
    PoolSummary,
    grant_timeline,
    repair_groups,
    rollout_title,
)
from app.web.views.teams import cards_from
from app.web.views.workloads import reclaim_pairs

router = APIRouter(prefix="/admin", include_in_schema=False)

PAGE_SIZE = 50
SORTS: dict[str, Callable[[repo.TeamRow], tuple[Any, ...]]] = {
    "status": lambda r: (r.status, r.name),
    "guarantee": lambda r: (-r.quota_centi, r.name),
}


def _allocated(view: OrgView, team_id: int) -> float:
    share = view.shares.get(team_id)
    return share.allocated or 0.0 if share is not None else 0.0


def _page_by_usage(
    session: Session,
    view: OrgView,
    statuses: list[str] | None,
    q: str,
    status: str,
    sort: str,
    page: int,
) -> tuple[int, int, list[repo.TeamRow]]:
    """Filters and orders that need live usage, from the ready view's orderings (the
    refresher keeps them with the shares): the borrowing or waiting teams, or every team
    by GPUs in use; only the page's rows are loaded. (total, page, rows)."""
    needle = q.lower()

    def named(team_id: int) -> bool:
        return needle in view.names.get(team_id, "").lower()

    if status in ("borrowing", "waiting"):
        by_name = sort not in SORTS and sort != "usage"  # both orders are ready in the view
        if status == "borrowing":
            found = view.borrowing_by_name if by_name else view.borrowing_by_usage
        else:
            found = view.waiting_by_name if by_name else view.waiting_by_usage
        ids = [i for i in found if named(i)] if needle else list(found)
        if sort in SORTS:  # status or guarantee of the (few) borrowing or waiting teams
            ids = [r.id for r in sorted(repo.get_team_rows(session, ids=ids), key=SORTS[sort])]
        return _window(session, ids, page)
    if statuses is None or set(COMMITTED_STATUSES) <= set(statuses):
        # Every team the view holds, by usage; the others (not holding a guarantee: none
        # of their pods run) use nothing and join the idle ones by name. Only as far as
        # the page reaches is merged.
        others = repo.get_team_keys(
            session,
            statuses=[s for s in (statuses or list(TeamStatus)) if s not in COMMITTED_STATUSES],
            name_contains=q,
        )
        if needle:
            ordered: Sequence[int] = [i for i in view.by_usage if named(i)]
            busy = sum(1 for i in ordered if _allocated(view, i) > 0)
        else:
            ordered, busy = view.by_usage, view.busy_count
        total = len(ordered) + len(others)
        page = min(page, max(1, -(-total // PAGE_SIZE)))
        start = (page - 1) * PAGE_SIZE
        idle = ((view.names[i], i) for i in itertools.islice(ordered, busy, None))
        merged = (i for _, i in heapq.merge(idle, sorted((n, i) for i, n in others)))
        reach = itertools.chain(itertools.islice(ordered, 0, busy), merged)
        shown_ids = list(itertools.islice(reach, start, start + PAGE_SIZE))
        by_id = {r.id: r for r in repo.get_team_rows(session, ids=shown_ids)}
        return total, page, [by_id[i] for i in shown_ids if i in by_id]
    # A status the view does not tell apart: its (few) teams, ordered here.
    keys = repo.get_team_keys(session, statuses=statuses, name_contains=q)
    keys.sort(key=lambda k: (-_allocated(view, k[0]), k[1]))
    return _window(session, [k[0] for k in keys], page)


def _window(session: Session, ids: list[int], page: int) -> tuple[int, int, list[repo.TeamRow]]:
    """(total, page, the page's rows) of teams already in order."""
    page = min(page, max(1, -(-len(ids) // PAGE_SIZE)))
    shown_ids = ids[(page - 1) * PAGE_SIZE : page * PAGE_SIZE]
    by_id = {r.id: r for r in repo.get_team_rows(session, ids=shown_ids)}
    return len(ids), page, [by_id[i] for i in shown_ids if i in by_id]


@router.get("", response_class=HTMLResponse)
async def overview(
    request: Request,
    session: SessionDep,
    portal: PortalDep,
    status: str = "live",
    sort: str = "name",
    q: str = "",
    page: int = 1,
) -> Response:
    """The admins' overview: a coroutine that reads the caller and the page on one
    thread (``admin_reading``), one thread hop a view instead of two."""
    return await run_in_threadpool(
        _overview, request, session, portal, status=status, sort=sort, q=q, page=page
    )


def _statuses_of(status: str) -> list[str] | None:
    """The statuses a filter shows (None: every team)."""
    if status in ("live", "borrowing", "waiting"):
        return [s.value for s in LIVE_STATUSES]
    if status in {s.value for s in TeamStatus}:
        return [status]
    return None


@dataclass(frozen=True)
class _Query:
    statuses: list[str] | None
    q: str
    sort: str
    counted_apart: list[str]


def _sql_page(
    session: Session,
    query: _Query,
    found: tuple[int, list[repo.TeamRow]] | None,
    page: int,
    view_counted: int,
) -> tuple[int, int, list[repo.TeamRow]]:
    """A page ordered by the database: (how many teams match, the page, its rows).
    ``found``: the page read with the caller (None: none on this page, counted on its
    own); past the end (the list shrank), the last page."""

    def page_of(number: int) -> tuple[int, list[repo.TeamRow]]:
        return repo.get_team_page(
            session,
            statuses=query.statuses,
            name_contains=query.q,
            sort=query.sort,
            offset=(number - 1) * PAGE_SIZE,
            limit=PAGE_SIZE,
            counted_apart=query.counted_apart,
        )

    counted, rows = found or page_of(page)
    total = counted + view_counted
    pages = max(1, -(-total // PAGE_SIZE))
    if page > pages:
        page = pages
        counted, rows = page_of(page)
        total = counted + view_counted
    return total, page, rows


def _overview(
    request: Request,
    session: Session,
    portal: Portal,
    *,
    status: str,
    sort: str,
    q: str,
    page: int,
) -> Response:
    usage, settings = portal.usage_cache, portal.settings
    statuses = _statuses_of(status)
    page = page_number(page)
    by_usage = status in ("borrowing", "waiting") or sort == "usage"
    # The caller, the org-wide figures and (ordered by the database) the page's teams:
    # one statement on PostgreSQL.
    reads: list[Read[Any]] = [overview_figures_read(settings.chart_version)]
    # Every live team (the default list): the teams holding a guarantee are counted from
    # the ready view, as the summary's live teams are, and only the others (a few
    # submitted ones, along the status index) by the statement; counting every live team
    # per view was a scan of the teams table.
    apart = [s.value for s in COMMITTED_STATUSES] if status == "live" and not q else []
    if not by_usage:
        offset = (page - 1) * PAGE_SIZE
        reads.append(repo.team_page(statuses, q, sort, offset, PAGE_SIZE, apart))
    principal, (figures, *found) = admin_reading(request, session, settings, reads)
    org = figures.org
    view = org_view(session, usage, org)
    if by_usage:
        total, page, rows = _page_by_usage(session, view, statuses, q, status, sort, page)
        pages = max(1, -(-total // PAGE_SIZE))
    else:
        query = _Query(statuses, q, sort, apart)
        total, page, rows = _sql_page(
            session, query, found[0], page, len(view.rows) if apart else 0
        )
        pages = max(1, -(-total // PAGE_SIZE))
    listing = {"cards": cards_from(session, rows, view, org), "total": total, "page": page}
    listing |= {"pages": pages, "filter_status": status, "sort": sort, "q": q}
    return _render_overview(request, session, portal, principal, figures, view, listing)


def _render_overview(
    request: Request,
    session: Session,
    portal: Portal,
    principal: Principal,
    figures: OverviewFigures,
    view: OrgView,
    listing: dict[str, Any],
) -> Response:
    usage, org = portal.usage_cache, figures.org
    # What a rollout moves and which teams: read only when its card is shown.
    detail = (
        provisioning.rollout_detail(session, figures.rollout.version)
        if figures.rollout is not None
        else None
    )
    # The repairs an admin has not acknowledged yet (read only when there are some).
    unseen = tuple(i for i in figures.repair_ids if i > org.repairs_seen_id)
    # Org-wide figures from the ready view (a decision refreshes it at once): no scan of
    # every team per view.
    summary = PoolSummary(
        org=org,
        committed_centi=view.committed_centi,
        allocated=view.allocated,
        live_teams=len(view.rows),
        cluster_gpus=usage.model.cluster_gpus,
        cluster_idle=view.division.idle_elsewhere if view.division is not None else None,
    )
    return render(
        request,
        "admin/overview.html",
        {
            "principal": principal,
            "summary": summary,
            **listing,
            "statuses": [s.value for s in TeamStatus],
            "pending_count": figures.pending_count,
            "usage_error": usage.error,
            "repairs": repair_groups(portal.drift_lines.get(session, unseen), org.repairs_seen_id),
            "repairs_upto": max(unseen, default=0),
            "steps": [s.value for s in Step],
            "rollout": figures.rollout,
            "rollout_detail": detail,
            "rollout_title": rollout_title(figures.rollout.version, detail)
            if figures.rollout is not None and detail is not None
            else "",
            "rightsizing": figures.rightsizing,
            "pools": pool_views(session, usage, org, view),
            "asleep": figures.asleep,
            "slept_gib_hours": figures.org.slept_seconds
            * portal.settings.vcluster_memory_mib
            / 1024
            / 3600,
            "vcluster_gib": portal.settings.vcluster_memory_mib / 1024,
            "grants": _grant_timeline(session, org),
            **_budgets(session),
            "reclaims": reclaim_pairs(session, utcnow() - timedelta(days=1)),
        },
        partial="admin/partials/teams_table.html",
    )


def _budgets(session: Session) -> dict[str, Any]:
    """This month's GPU-hour budgets with their burn, and their teams' names."""
    found = budgets.of_org(session, utcnow())
    names = repo.get_team_names(session, [b.budget.team_id for b in found]) if found else {}
    return {"budgets": found, "budget_names": names}


def _grant_timeline(session: Session, org: Org) -> GrantTimeline | None:
    """The temporary grants waiting, running or to come, beside the default pool's base
    guarantees and the most the approved ones add at once."""
    found = repo.open_grants_of_org(session)
    if not found:
        return None
    now = utcnow()
    org = repo.get_org(session)  # the page's is read apart, without its pools
    pool = org.default_pool
    approved = [g for g in found if g.status == "approved" and g.pool_id == pool.id]
    last = max((g.end for g in approved), default=now)
    return grant_timeline(
        found,
        repo.get_team_names(session, [g.team_id for g in found]),
        now=now,
        base_centi=grants.base_committed(session, org, pool, exclude_team_id=None),
        budget_centi=org.gpus_centi,
        peak=grants.peak(approved, now, last) if approved and last > now else None,
    )


@router.post("/repairs/acknowledge")
def acknowledge_repairs(
    request: Request, session: SessionDep, principal: AdminPrincipal, data: FormDep
) -> Response:
    """The repairs listed on the overview are seen: it lists only later ones."""
    upto = data.get("upto", "")
    if not upto.isdigit():
        flash(request, "Nothing acknowledged: reload the overview and try again.", "error")
        return redirect(request, "/admin")
    repairs.acknowledge(session, repo.get_org(session), actor=principal.user, upto=int(upto))
    flash(request, "Acknowledged: the overview lists repairs made from now on.")
    return redirect(request, "/admin")


@router.get("/rightsizing", response_class=HTMLResponse)
def rightsizing_page(
    request: Request, session: SessionDep, principal: AdminPrincipal, settings: SettingsDep
) -> Response:
    found = rightsizing.for_org(session)
    return render(
        request,
        "admin/rightsizing.html",
        {
            "principal": principal,
            "found": found,
            "room": _raise_room(session, found.rows),
            "settings": settings,
            "pending_teams": {
                r.team_id for r in repo.get_requests(session, status=RequestStatus.SUBMITTED)
            },
        },
    )


def _raise_room(
    session: Session, rows: Sequence[tuple[str, RightsizingSuggestion]]
) -> dict[tuple[int, str], int]:
    """For each suggested raise, the most its team could be guaranteed in that pool today
    (the pool's budget less the other teams' guarantees there), by (team id, pool)."""
    raises = [s for _, s in rows if s.direction == "raise"]
    if not raises:
        return {}
    org = repo.get_org(session)
    pools = {("" if p.is_default else p.name): p for p in repo.get_pools(session, org.id)}
    committed = repo.committed_by_pool(session, org.id)
    room = {}
    for s in raises:
        pool = pools.get(s.pool)
        if pool is None:
            continue
        budget = org.gpus_centi if pool.is_default else pool.capacity.get(GPU.key, 0)
        room[(s.team_id, s.pool)] = budget - committed.get(pool.id, 0) + s.guarantee_centi
    return room


@router.post("/pool")
def update_pool(
    request: Request, session: SessionDep, principal: AdminPrincipal, usage: UsageDep, data: FormDep
) -> Response:
    confirmed = data.get("below_committed") == "confirm"
    try:
        org = service.update_pool(
            session, actor=principal.user, data=data, below_committed=confirmed
        )
    except InvalidInput as exc:
        discard_changes(session)
        # The form again, with what was typed, the reason and the preview: nothing lost.
        error = "Pool not changed: " + "; ".join(exc.errors.values())
        return _pool_preview(request, session, principal, usage, data, error, status_code=422)
    flash(request, f"Pool is now {format_hundredths(org.gpus_centi)} GPU.")
    return redirect(request, "/admin")


@router.post("/rollout/pause")
def pause_rollout(
    request: Request, session: SessionDep, principal: AdminPrincipal, settings: SettingsDep
) -> Response:
    """Hold the rollout: the team moving now finishes its own move, no other starts."""
    version = settings.chart_version
    why = f"paused by {principal.user.email}"
    if provisioning.pause_rollout(session, version=version, why=why, now=utcnow()):
        audit.record(
            session,
            actor=principal.user,
            event=Event.ROLLOUT_STOPPED,
            summary=f"rollout to chart {version} {why}",
            details={"version": version, "paused": True},
        )
        flash(request, "The rollout is paused: no other team starts until it is resumed.")
    else:
        flash(request, "The rollout is stopped already.", "error")
    return redirect(request, "/admin")


@router.post("/rollout/resume")
def resume_rollout(
    request: Request, session: SessionDep, principal: AdminPrincipal, settings: SettingsDep
) -> Response:
    version = settings.chart_version
    if provisioning.resume_rollout(session, version=version, now=utcnow()):
        audit.record(
            session,
            actor=principal.user,
            event=Event.ROLLOUT_RESUMED,
            summary=f"upgrade to chart {version} resumed",
            details={"version": version},
        )
        provisioning.nudge_outdated(session, version=version, now=utcnow())
        flash(request, f"The upgrade to vCluster chart {version} goes on.")
    else:
        flash(request, f"The upgrade to vCluster chart {version} is not stopped.", "error")
    return redirect(request, "/admin")


@router.post("/pool/impact", response_class=HTMLResponse)
def pool_impact(
    request: Request, session: SessionDep, principal: AdminPrincipal, usage: UsageDep, data: FormDep
) -> Response:
    """What a new pool would do to every team (nothing is saved)."""
    return _pool_preview(request, session, principal, usage, data, None)


def _pool_preview(
    request: Request,
    session: Session,
    principal: Any,
    usage: UsageCache,
    data: Mapping[str, str],
    error: str | None,
    status_code: int = 200,
) -> Response:
    org = repo.get_org(session)
    values = {key: data.get(key, "") for key in ("gpus", "cpu_cores", "memory_gb")}
    imp = None
    new_pool = org.gpus_centi
    try:
        new_pool = parse_hundredths(values["gpus"], what="the pool's GPUs")
    except ValueError as exc:
        error = error or str(exc)
    else:
        imp = org_impact(session, usage, org, new_pool_centi=new_pool)
    return render(
        request,
        "admin/pool_impact.html",
        {
            "principal": principal,
            "imp": imp,
            "values": values,
            "error": error,
            "impact_title": "With this pool",
            "new_pool": new_pool / 100,
            "cluster_gpus": usage.model.cluster_gpus,
            "committed": repo.committed_gpu_centi(session, org.id) / 100,
            "confirmed": data.get("below_committed") == "confirm",
        },
        partial="admin/partials/pool_impact.html",
        status_code=status_code,
    )


@router.get("/what-if", response_class=HTMLResponse)
def what_if_page(
    request: Request,
    session: SessionDep,
    principal: AdminPrincipal,
    usage: UsageDep,
    in_pool: str = "",
) -> Response:
    """Try pool and quota changes and see every team's shares; nothing is saved.
    ``in_pool``: another node pool to try instead of the default one."""
    org = repo.get_org(session)
    scenario = what_if(session, usage, org, {"in_pool": in_pool} if in_pool else None)
    return render(request, "admin/what_if.html", {"principal": principal, "w": scenario})


@router.post("/what-if", response_class=HTMLResponse)
def what_if_recompute(
    request: Request, session: SessionDep, principal: AdminPrincipal, usage: UsageDep, data: FormDep
) -> Response:
    """The same page with the shares for what was typed (HTMX: only the results)."""
    org = repo.get_org(session)
    scenario = what_if(session, usage, org, data, explain_for=_explained(data))
    return render(
        request,
        "admin/what_if.html",
        {"principal": principal, "w": scenario},
        partial="admin/partials/what_if_results.html",
    )


def _explained(data: Mapping[str, str]) -> int | None:
    """The team whose division the what-if tells step by step: the one whose "why?" was
    pressed, else the one told before (kept across keystrokes)."""
    for key in ("explain_now", "explain"):
        value = data.get(key, "")
        if is_number(value) and len(value) < 12:
            return int(value)
    return None


@router.post("/what-if/requests")
def what_if_to_requests(
    request: Request, session: SessionDep, principal: AdminPrincipal, usage: UsageDep, data: FormDep
) -> Response:
    """Turn the changed quotas into quota-change requests: they go through approval."""
    org = repo.get_org(session)
    scenario = what_if(session, usage, org, data)
    if scenario.errors:
        flash(request, "Nothing sent: fix the highlighted values first.", "error")
        return render(
            request,
            "admin/what_if.html",
            {"principal": principal, "w": scenario},
            status_code=422,
        )
    sent, skipped = [], []
    for row in scenario.changes:
        assert row.values is not None
        team = repo.get_team(session, row.team.id)
        current = grants.base(session, team, repo.get_org(session).default_pool)
        # Only the GPU line is edited on the page: the team keeps its other resources
        # and, where another pool was tried, its default pool and other pools.
        values = row.values.keep_others(current, "gpu")
        pools = None
        if scenario.in_pool:
            held = grants.base_pools(session, team)  # its own, without running grants
            pools = {**{p.name: q for p, q in held.items()}, scenario.in_pool: row.values}
            values = current
        try:
            service.submit_quota_change(
                session,
                actor=principal.user,
                team=team,
                values=values,
                pools=pools,
                purpose="from the what-if page",
            )
        except DomainError as exc:
            skipped.append(f"{row.team.name}: {labels.said(exc)}")
        else:
            sent.append(row.team.name)
    if sent:
        flash(request, f"Quota changes for {', '.join(sent)} are waiting for approval.")
    for reason in skipped:
        flash(request, f"Not sent for {reason}", "error")
    if not sent and not skipped:
        flash(request, "No team's quota was changed: nothing to send.", "error")
    back = f"/admin/what-if?in_pool={scenario.in_pool}" if scenario.in_pool else "/admin/what-if"
    return redirect(request, "/admin/requests" if sent else back)


@dataclass(frozen=True)
class Refused:
    """An approval the service refused: its card is shown open again, with the values
    and the note as they were sent and the reason inline."""

    id: int
    mode: str
    error: str
    reason: str


REQUESTS_PAGE = 20


def _requests_page(
    request: Request,
    session: Session,
    principal: Any,
    usage: UsageCache,
    *,
    typed: tuple[int, Mapping[str, str]] | None = None,
    failed: Refused | None = None,
    status_code: int = 200,
    page: int = 1,
) -> Response:
    """The pending requests, oldest first, a page of review cards at a time (each card's
    impact computed once per decision input and ready view, whoever looks)."""
    org = repo.get_org(session)
    count = repo.count_requests(session, status=RequestStatus.SUBMITTED)
    pages = max(1, -(-count // REQUESTS_PAGE))
    page = min(page_number(page), pages)
    pending = repo.get_requests(
        session,
        status=RequestStatus.SUBMITTED,
        limit=REQUESTS_PAGE,
        offset=(page - 1) * REQUESTS_PAGE,
    )
    # The card being decided stays on screen, whichever page it was on.
    kept = typed[0] if typed else failed.id if failed else None
    if kept is not None and all(item.id != kept for item in pending):
        pending.insert(0, _pending(session, kept))
    rows = [
        review(session, usage, org, item, typed[1] if typed and typed[0] == item.id else None)
        for item in pending
    ]
    view = org_view(session, usage, org)
    return render(
        request,
        "admin/requests.html",
        {
            "principal": principal,
            "org": org,
            "rows": rows,
            "pool_asks": repo.other_pool_asks(session, [rv.request.id for rv in rows]),
            "other_pools": [p for p in repo.get_pools(session, org.id) if not p.is_default]
            if rows
            else [],
            "committed_centi": view.committed_centi,
            "pending_count": count,
            "grant_reviews": grant_reviews(session, usage, org),
            "failed": failed,
            "page": page,
            "pages": pages,
            "offered": catalog.offered(session) if rows else [],
            "describe": catalog.describe,
            "typed_template": typed[1].get("template_choice", "") if typed else "",
            "typed_data": dict(typed[1]) if typed else {},
        },
        status_code=status_code,
    )


@router.get("/requests", response_class=HTMLResponse)
def pending_requests(
    request: Request,
    session: SessionDep,
    principal: AdminPrincipal,
    usage: UsageDep,
    page: int = 1,
) -> Response:
    return _requests_page(request, session, principal, usage, page=page)


def _pending(session: Session, request_id: int) -> ClusterRequest:
    found = repo.get_request(session, request_id)
    if found.status != RequestStatus.SUBMITTED:
        raise Conflict(f"request #{request_id} is {found.status}: it was already decided")
    return found


@router.post("/requests/{request_id}/preview", response_class=HTMLResponse)
def preview_decision(
    request: Request,
    request_id: Id,
    session: SessionDep,
    principal: AdminPrincipal,
    usage: UsageDep,
    data: FormDep,
) -> Response:
    """The card's preview for the values typed in "approve with changes" (HTMX: as the
    admin types; without JavaScript: the whole page with that card open)."""
    found = _pending(session, request_id)
    if not is_htmx(request):
        return _requests_page(request, session, principal, usage, typed=(request_id, data))
    rv = review(session, usage, repo.get_org(session), found, data)
    return render(
        request,
        "admin/requests.html",
        {"principal": principal, "rv": rv},
        partial="admin/partials/review_preview.html",
    )


@router.get("/requests/{request_id}/why", response_class=HTMLResponse)
def decision_why(
    request: Request,
    request_id: Id,
    session: SessionDep,
    principal: AdminPrincipal,
    usage: UsageDep,
) -> Response:
    """KAI's division for the requesting team after the decision, step by step (the
    asked values, the largest guarantee that fits, or the typed ones in the query)."""
    found = _pending(session, request_id)
    typed = dict(request.query_params) if request.query_params else None
    rv, account = review_account(session, usage, repo.get_org(session), found, typed)
    return render(
        request,
        "admin/request_why.html",
        {"principal": principal, "rv": rv, "account": account},
        partial="admin/partials/review_why.html",
    )


@router.post("/requests/{request_id}/approve")
def approve(
    request: Request,
    request_id: Id,
    session: SessionDep,
    principal: AdminPrincipal,
    usage: UsageDep,
    data: FormDep,
) -> Response:
    mode = "adjusted" if data.get("mode") == "adjusted" else "as_asked"
    try:
        # The admin's values, parsed once here; the service checks them against the pool.
        adjusted = parse_quota_fields(data) if mode == "adjusted" else None
        template = _template_choice(session, request_id, data) if mode == "adjusted" else KEEP
        decision = service.approve(
            session,
            actor=principal.user,
            request_id=request_id,
            adjusted=adjusted,
            reason=data.get("reason", ""),
            template=template,
            # The other pools as the card's fields send them (none sent: as asked).
            adjusted_pools=parse_pool_fields(data) if mode == "adjusted" else None,
        )
    except DomainError as exc:
        discard_changes(session)
        try:
            still_open = repo.get_request(session, request_id, fresh=True).status
        except NotFound:
            still_open = None
        if still_open != RequestStatus.SUBMITTED:
            flash(request, f"Request #{request_id} not approved: {labels.said(exc)}", "error")
            return redirect(request, "/admin/requests")
        # Keep the card open with what was sent: nothing the admin typed is lost.
        refused = Refused(request_id, mode, labels.said(exc), data.get("reason", ""))
        return _requests_page(
            request,
            session,
            principal,
            usage,
            typed=(request_id, data) if mode == "adjusted" else None,
            failed=refused,
            status_code=exc.status_code if exc.status_code >= 400 else 400,
        )
    team = repo.get_request(session, request_id).team
    flash(
        request,
        f"Approved {team.name}" + (" with adjusted values." if decision.changes else " as asked."),
    )
    return redirect(request, "/admin/requests")


def _template_choice(
    session: Session, request_id: int, data: Mapping[str, str]
) -> Chosen | Keep | None:
    """The review card's template fields: empty keeps what was asked (unless its
    parameters were changed), 0 is a plain vCluster, an id another template at its newest
    version, with the parameters the card sends for it (``param-<id>-<name>``)."""
    raw = data.get("template_choice", "").strip()
    asked = repo.get_request(session, request_id)
    asked_id = asked.template_version.template_id if asked.template_version else None
    if not raw:
        typed = catalog.form_parameters(data, asked_id) if asked_id is not None else {}
        if not typed or typed == (asked.template_parameters or {}):
            return KEEP
        raw = str(asked_id)
    if raw == "0":
        return None
    return catalog.choose_from_form(
        session, {**data, "template": raw}, org=repo.get_org(session), admin=True
    )


@router.post("/requests/{request_id}/reject")
def reject(
    request: Request, request_id: Id, session: SessionDep, principal: AdminPrincipal, data: FormDep
) -> Response:
    try:
        service.reject(
            session, actor=principal.user, request_id=request_id, reason=data.get("reason", "")
        )
    except DomainError as exc:
        discard_changes(session)
        flash(request, f"Request #{request_id} not rejected: {labels.said(exc)}", "error")
        return redirect(request, "/admin/requests")
    flash(request, f"Rejected request #{request_id}.")
    return redirect(request, "/admin/requests")


@router.post("/simulate/failure")
def inject_failure(
    request: Request, principal: AdminPrincipal, backend: BackendDep, data: FormDep
) -> Response:
    """Simulated backend only: make the next apply of a step fail, to see retries."""
    inject = getattr(backend, "inject_failure", None)
    if not backend.simulated or inject is None:
        flash(request, "Failures can only be injected into the simulated backend.", "error")
        return redirect(request, "/admin")
    try:
        step = Step(data.get("step", ""))
        times = int(data.get("times", "1"))
        if not 1 <= times <= 20:
            raise ValueError
    except ValueError:
        flash(request, "Choose a step and a number of failures from 1 to 20.", "error")
        return redirect(request, "/admin")
    inject(step, team=data.get("team") or None, times=times)
    flash(request, f"The next {times} attempt(s) at {step.value} will fail.")
    return redirect(request, "/admin")


@router.post("/simulate/usage")
def pin_usage(
    request: Request,
    principal: AdminPrincipal,
    backend: BackendDep,
    usage: UsageDep,
    data: FormDep,
) -> Response:
    """Simulated backend only: hold a team's usage at chosen figures, to see the gauges."""
    pin = getattr(backend, "pin_usage", None)
    if not backend.simulated or pin is None:
        flash(request, "Usage can only be pinned on the simulated backend.", "error")
        return redirect(request, "/admin")
    team = data.get("team", "").strip()
    try:
        allocated = parse_hundredths(data.get("allocated"), what="GPUs in use") / 100
        requested = parse_hundredths(data.get("requested"), what="GPUs requested") / 100
    except ValueError as exc:
        flash(request, f"Usage not pinned: {exc}", "error")
        return redirect(request, "/admin")
    if not team:
        flash(request, "Usage not pinned: name the team.", "error")
        return redirect(request, "/admin")
    pin(team, allocated=allocated, requested=requested)
    usage.forget()
    flash(request, f"{team} now shows {allocated:g} GPU in use and {requested:g} requested.")
    return redirect(request, "/admin")


@router.get("/showback.csv")
def showback_csv(session: SessionDep, principal: AdminPrincipal, month: str = "") -> Response:
    """GPU-hours per team, month and node pool, within the guarantee and borrowed, with
    the pool's GPU type and cost, as CSV."""
    rows = history.showback(session, month=month)
    out = io.StringIO()
    writer = csv.writer(out)
    # The pool's columns follow the original five: a script reading those by position
    # reads the same.
    writer.writerow(
        [
            "team",
            "month",
            "guaranteed_gpu_hours",
            "borrowed_gpu_hours",
            "total_gpu_hours",
            "pool",
            "gpu_type",
            "price_per_gpu_hour",
            "cost",
            "budget_gpu_hours",
            "budget_used_percent",
        ]
    )
    for row in rows:
        writer.writerow(
            [
                row.team,
                row.month,
                f"{row.guaranteed_gpu_hours:.3f}",
                f"{row.borrowed_gpu_hours:.3f}",
                f"{row.total:.3f}",
                row.pool,
                row.gpu_type,
                format_hundredths(row.price_centi) if row.price_centi is not None else "",
                f"{row.cost:.2f}" if row.cost is not None else "",
                format_hundredths(row.budget_centi) if row.budget_centi else "",
                f"{row.budget_used:.1f}" if row.budget_used is not None else "",
            ]
        )
    name = f"gpu-showback-{month or 'all'}.csv"
    return Response(
        out.getvalue(),
        media_type="text/csv",
        headers={"Content-Disposition": f'attachment; filename="{name}"'},
    )
