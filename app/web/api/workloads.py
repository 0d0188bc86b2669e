"""API: a team's workloads as KAI sees them, and what KAI did to them (evictions, long
waits), for the teams' own tooling; the org's reclaims for admins."""

from __future__ import annotations

from datetime import timedelta

from fastapi import APIRouter, Request, Response

from app.core.errors import Conflict, InvalidInput, Unavailable
from app.core.models import Sleep, TeamStatus, WorkloadEvent, WorkloadEventKind, utcnow
from app.provisioning import repository as provisioning_repo
from app.provisioning.backend import QueueFigures
from app.provisioning.decisions import EVICTED, WAITED, gpu
from app.provisioning.specs import spec_of
from app.web.deps import AdminPrincipal, PortalDep, SessionDep, TeamForViewer
from app.web.paging import PAGED, WindowDep, announce
from app.web.schemas import (
    PROBLEMS,
    QueueFiguresOut,
    ReclaimPairOut,
    WaitReasonOut,
    WorkloadEventOut,
    WorkloadOut,
)
from app.web.views.workloads import eviction_rows, pool_names, reclaim_pairs, workload_rows

router = APIRouter(prefix="/api/v1", responses=PROBLEMS, tags=["workloads"])
READ_WAIT_SECONDS = 10.0


def _figure(value: float | None) -> str | None:
    return None if value is None else gpu(value)


@router.get("/teams/{team_id}/workloads", response_model=list[WorkloadOut], responses=PAGED)
def team_workloads(
    request: Request,
    response: Response,
    team: TeamForViewer,
    session: SessionDep,
    portal: PortalDep,
    window: WindowDep,
) -> list[WorkloadOut]:
    """The team's pods on the host as KAI sees them, waiting ones first (anyone of the
    team, or an admin): why each waits, in words and with KAI's figures. Read from the
    host at most every `PORTAL_WORKLOADS_SECONDS`. 409 while the team's cluster is not
    ready and awake (nothing of it runs); 502 when the host could not be read."""
    if team.status != TeamStatus.READY or team.sleep != Sleep.AWAKE:
        raise Conflict(
            f"team {team.name}'s cluster is not ready and awake: none of its work runs; "
            "ask again once it is (wake it from the team page)"
        )
    spec = spec_of(session, team, portal.settings)
    reading = portal.workloads.get(spec)
    if reading.reading:
        portal.workloads.wait(READ_WAIT_SECONDS)
        reading = portal.workloads.get(spec)
    if reading.reading or reading.error:
        raise Unavailable(f"team {team.name}'s workloads {reading.error or 'are being read'}")
    rows = workload_rows(reading, pool_names(session, team))
    shown = window.of(rows)
    announce(request, response, window, returned=len(shown), total=len(rows))
    return [
        WorkloadOut(
            namespace=r.work.namespace,
            name=r.work.name,
            pool=r.pool,
            queue=r.work.queue,
            gpus=r.gpus,
            state="running" if r.work.running else "waiting",
            since=r.work.since,
            preemptible=r.work.preemptible,
            reasons=[
                WaitReasonOut(
                    kai_reason=why.kai,
                    said=why.said,
                    remedy=why.remedy,
                    message=why.message,
                    node_pool=why.pool,
                    figures=_figures_of(r.work.reasons[i].figures if r.work.reasons else None),
                )
                for i, why in enumerate(r.why)
            ],
        )
        for r in shown
    ]


def _figures_of(found: QueueFigures | None) -> QueueFiguresOut | None:
    if found is None:
        return None
    return QueueFiguresOut(
        queue=found.queue,
        guarantee=_figure(found.deserved),
        allocated=_figure(found.allocated),
        allocated_non_preemptible=_figure(found.allocated_non_preemptible),
        limit=_figure(found.limit),
        asked=_figure(found.asked),
    )


@router.get(
    "/teams/{team_id}/workload-events", response_model=list[WorkloadEventOut], responses=PAGED
)
def team_workload_events(
    request: Request,
    response: Response,
    team: TeamForViewer,
    session: SessionDep,
    window: WindowDep,
    kind: str = "",
    days: int = 30,
) -> list[WorkloadEventOut]:
    """What KAI did to the team's work over the last `days` days (at most 400), newest
    first: `kind` evicted or waited (empty: both); paged (`limit`, `offset`)."""
    if kind not in ("", EVICTED.value, WAITED.value):
        raise InvalidInput({"kind": f"must be evicted, waited or empty, not {kind!r}"})
    since = utcnow() - timedelta(days=max(1, min(days, 400)))
    rows, total = provisioning_repo.workload_events(
        session,
        team_id=team.id,
        kind=WorkloadEventKind(kind) if kind else None,
        since=since,
        offset=window.offset,
        limit=window.limit,
    )
    announce(request, response, window, returned=len(rows), total=total)
    return _events_out(session, rows, {team.id: team.name}, pool_names(session, team))


def _events_out(
    session: SessionDep, rows: list[WorkloadEvent], names: dict[int, str], pools: dict[str, str]
) -> list[WorkloadEventOut]:
    shown = eviction_rows(session, rows, pools)
    return [
        WorkloadEventOut(
            id=e.row.id,
            team_id=e.row.team_id,
            team=names.get(e.row.team_id, ""),
            kind=e.row.kind,
            at=e.row.at,
            workload=e.row.workload,
            pool=e.pool,
            action=e.row.action,
            pods=e.row.pods,
            gpus=e.gpus or None,
            by_team=e.by,
            lost_gpu_hours=e.lost or None,
            said=e.how.action if e.row.kind == EVICTED else str(e.row.details.get("said", "")),
            why=e.how.why if e.row.kind == EVICTED else "",
        )
        for e in shown
    ]


@router.get("/evictions", response_model=list[ReclaimPairOut], responses=PAGED)
def org_reclaims(
    request: Request,
    response: Response,
    principal: AdminPrincipal,
    session: SessionDep,
    window: WindowDep,
    hours: int = 24,
) -> list[ReclaimPairOut]:
    """Who reclaimed from whom over the last `hours` hours (at most 720; admins): per pair
    of teams, the evictions and their GPUs, the most first; paged (`limit`, `offset`)."""
    pairs = reclaim_pairs(session, utcnow() - timedelta(hours=max(1, min(hours, 720))))
    shown = window.of(pairs)
    announce(request, response, window, returned=len(shown), total=len(pairs))
    return [
        ReclaimPairOut(by_team=p.by, from_team=p.team, evictions=p.count, gpus=p.gpus)
        for p in shown
    ]
