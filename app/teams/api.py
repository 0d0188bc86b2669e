"""JSON API under /api/v1: the same actions as the pages, for CI and scripts."""

from __future__ import annotations

from fastapi import APIRouter, Request, Response
from fastapi.responses import PlainTextResponse

from app.audit import service as audit
from app.db import after_commit
from app.errors import NotFound
from app.models import AuditEvent, RequestStatus, User
from app.provisioning.service import download_kubeconfig
from app.quantities import format_hundredths
from app.teams import members, service
from app.teams import repository as repo
from app.teams.schemas import (
    PROBLEMS,
    AuditEventOut,
    ClusterRequestIn,
    DecisionIn,
    MemberIn,
    MemberOut,
    MeOut,
    PoolIn,
    PoolOut,
    QuotaIn,
    RejectIn,
    RequestOut,
    ShowbackOut,
    TeamOut,
    UsagePointOut,
)
from app.teams.views import cards, event_out, member_out, request_out, team_out
from app.usage import history
from app.web.deps import AdminPrincipal, BackendDep, CurrentPrincipal, SessionDep, UsageDep

router = APIRouter(prefix="/api/v1", responses=PROBLEMS)


def _wake(request: Request) -> None:
    request.app.state.reconciler.wake.set()


@router.get("/pool", response_model=PoolOut, tags=["pool"])
def get_pool(session: SessionDep, principal: CurrentPrincipal) -> PoolOut:
    """The org's GPU pool and how much of it is guaranteed to teams."""
    org = repo.get_org(session)
    committed = repo.committed_gpu_centi(session, org.id)
    return PoolOut(
        name=org.name,
        parent_queue=org.parent_queue,
        gpus=format_hundredths(org.gpus_centi),
        cpu_cores=format_hundredths(org.cpu_millicores // 10),
        memory_gb=format_hundredths(org.memory_mb // 10),
        committed_gpus=format_hundredths(committed),
        free_gpus=format_hundredths(max(0, org.gpus_centi - committed)),
    )


@router.put("/pool", response_model=PoolOut, tags=["pool"])
def put_pool(
    body: PoolIn, request: Request, session: SessionDep, principal: AdminPrincipal
) -> PoolOut:
    """Change the pool (admin); never below the guarantees already approved."""
    service.update_pool(
        session, actor=principal.user, data={k: str(v) for k, v in body.model_dump().items()}
    )
    after_commit(session, lambda: _wake(request))
    after_commit(session, request.app.state.usage_cache.forget_quotas)
    return get_pool(session, principal)


@router.get("/teams", response_model=list[TeamOut], tags=["teams"])
def list_teams(session: SessionDep, principal: CurrentPrincipal, usage: UsageDep) -> list[TeamOut]:
    """Teams you lead or belong to (admins: all)."""
    team_ids = None if principal.is_admin else sorted(principal.team_ids)
    teams = repo.get_teams(session, team_ids=team_ids)
    org = repo.get_org(session)
    team_cards = cards(session, teams, usage, org)
    return [team_out(t, c.share) for t, c in zip(teams, team_cards, strict=True)]


@router.get("/teams/{team_id}", response_model=TeamOut, tags=["teams"])
def get_team(
    team_id: int, session: SessionDep, principal: CurrentPrincipal, usage: UsageDep
) -> TeamOut:
    team = repo.get_team(session, team_id)
    principal.require_view(team)
    org = repo.get_org(session)
    card = cards(session, [team], usage, org)[0]
    return team_out(team, card.share, repo.get_steps(session, team.id))


@router.get(
    "/teams/{team_id}/kubeconfig",
    response_class=PlainTextResponse,
    tags=["teams"],
    responses={200: {"content": {"application/yaml": {}}}},
)
def get_kubeconfig(
    team_id: int, session: SessionDep, principal: CurrentPrincipal, backend: BackendDep
) -> Response:
    """The team's kubeconfig, read from the cluster now; every download is audited."""
    team = repo.get_team(session, team_id)
    principal.require_view(team)
    text = download_kubeconfig(session, backend=backend, actor=principal.user, team=team)
    return PlainTextResponse(
        text, media_type="application/yaml", headers={"Cache-Control": "no-store"}
    )


@router.post(
    "/teams/{team_id}/quota-requests", response_model=RequestOut, status_code=201, tags=["teams"]
)
def request_quota_change(
    team_id: int, body: QuotaIn, session: SessionDep, principal: CurrentPrincipal
) -> RequestOut:
    """Ask for new quota values; an admin decides as for a new cluster."""
    team = repo.get_team(session, team_id)
    principal.require_lead(team)
    created = service.submit_quota_change(
        session, actor=principal.user, team=team, data=body.form()
    )
    return request_out(created)


@router.post("/teams/{team_id}/decommission", response_model=TeamOut, tags=["teams"])
def decommission_team(
    team_id: int, request: Request, session: SessionDep, principal: CurrentPrincipal
) -> TeamOut:
    """Delete the team's vCluster, namespace, policy and queue; the audit trail stays."""
    team = repo.get_team(session, team_id)
    principal.require_lead(team)
    service.decommission(session, actor=principal.user, team=team)
    after_commit(session, lambda: _wake(request))
    after_commit(session, request.app.state.usage_cache.forget_quotas)
    return team_out(team)


@router.post("/teams/{team_id}/retry", response_model=TeamOut, tags=["teams"])
def retry_team(
    team_id: int, request: Request, session: SessionDep, principal: AdminPrincipal
) -> TeamOut:
    """Retry failed provisioning now instead of at the next back-off (admin)."""
    team = repo.get_team(session, team_id)
    service.retry_now(session, actor=principal.user, team=team)
    after_commit(session, lambda: _wake(request))
    after_commit(session, request.app.state.usage_cache.forget_quotas)
    return team_out(team)


@router.post("/requests", response_model=RequestOut, status_code=201, tags=["requests"])
def create_request(
    body: ClusterRequestIn, session: SessionDep, principal: CurrentPrincipal
) -> RequestOut:
    """Request a cluster for a new team; you become its lead."""
    created = service.submit_cluster_request(session, actor=principal.user, data=body.form())
    return request_out(created)


@router.get("/requests", response_model=list[RequestOut], tags=["requests"])
def list_requests(
    session: SessionDep, principal: CurrentPrincipal, status: RequestStatus | None = None
) -> list[RequestOut]:
    """Requests of your teams (admins: all), oldest first."""
    team_ids = None if principal.is_admin else sorted(principal.team_ids)
    rows = repo.get_requests(session, status=status, team_ids=team_ids)
    decisions = repo.get_decisions(session, [r.id for r in rows])
    return [request_out(r, decisions.get(r.id)) for r in rows]


@router.get("/requests/{request_id}", response_model=RequestOut, tags=["requests"])
def get_request(request_id: int, session: SessionDep, principal: CurrentPrincipal) -> RequestOut:
    found = repo.get_request(session, request_id)
    if not principal.can_view(found.team):
        raise NotFound(f"no request with id {request_id}")
    return request_out(found, repo.get_decisions(session, [found.id]).get(found.id))


@router.post("/requests/{request_id}/approve", response_model=RequestOut, tags=["requests"])
def approve_request(
    request_id: int,
    body: DecisionIn,
    request: Request,
    session: SessionDep,
    principal: AdminPrincipal,
) -> RequestOut:
    """Approve as asked, or with `adjusted` values; refused past the pool (409)."""
    decision = service.approve(
        session,
        actor=principal.user,
        request_id=request_id,
        adjusted=body.adjusted.form() if body.adjusted else None,
        reason=body.reason,
    )
    after_commit(session, lambda: _wake(request))
    after_commit(session, request.app.state.usage_cache.forget_quotas)
    return request_out(repo.get_request(session, request_id), decision)


@router.post("/requests/{request_id}/reject", response_model=RequestOut, tags=["requests"])
def reject_request(
    request_id: int, body: RejectIn, session: SessionDep, principal: AdminPrincipal
) -> RequestOut:
    decision = service.reject(
        session, actor=principal.user, request_id=request_id, reason=body.reason
    )
    return request_out(repo.get_request(session, request_id), decision)


@router.get("/audit", response_model=list[AuditEventOut], tags=["audit"])
def list_audit(
    session: SessionDep,
    principal: CurrentPrincipal,
    team_id: int | None = None,
    before_id: int | None = None,
    limit: int = 100,
) -> list[AuditEventOut]:
    """Audit events, newest first (team leads: their teams' events only)."""
    allowed = None if principal.is_admin else sorted(principal.team_ids)
    events = audit.get_all(
        session,
        team_ids=allowed,
        team_id=team_id,
        before_id=before_id,
        limit=max(1, min(limit, 500)),
    )
    return [event_out(e) for e in events]


@router.get("/teams/{team_id}/members", response_model=list[MemberOut], tags=["teams"])
def list_members(team_id: int, session: SessionDep, principal: CurrentPrincipal) -> list[MemberOut]:
    team = repo.get_team(session, team_id)
    principal.require_view(team)
    return [member_out(u, m) for u, m in members.get_all(session, team)]


@router.post("/teams/{team_id}/members", response_model=MemberOut, status_code=201, tags=["teams"])
def add_member(
    team_id: int, body: MemberIn, session: SessionDep, principal: CurrentPrincipal
) -> MemberOut:
    """Add someone by e-mail as a lead or a member (leads and admins)."""
    team = repo.get_team(session, team_id)
    principal.require_lead(team)
    member = members.add(session, actor=principal.user, team=team, email=body.email, role=body.role)
    user = session.get(User, member.user_id)
    assert user is not None
    return member_out(user, member)


@router.delete("/teams/{team_id}/members/{user_id}", status_code=204, tags=["teams"])
def remove_member(
    team_id: int, user_id: int, session: SessionDep, principal: CurrentPrincipal
) -> Response:
    team = repo.get_team(session, team_id)
    principal.require_lead(team)
    members.remove(session, actor=principal.user, team=team, user_id=user_id)
    return Response(status_code=204)


@router.get("/audit/{event_id}", response_model=AuditEventOut, tags=["audit"])
def get_audit_event(
    event_id: int, session: SessionDep, principal: CurrentPrincipal
) -> AuditEventOut:
    event = session.get(AuditEvent, event_id)
    visible = event is not None and (
        principal.is_admin or (event.team_id is not None and event.team_id in principal.team_ids)
    )
    if event is None or not visible:
        raise NotFound(f"no audit event with id {event_id}")
    return event_out(event)


@router.get("/me", response_model=MeOut, tags=["me"])
def me(principal: CurrentPrincipal) -> MeOut:
    """Who the portal thinks you are, and your teams."""
    return MeOut(
        email=principal.user.email,
        name=principal.user.display_name,
        admin=principal.is_admin,
        lead_of=sorted(principal.lead_of),
        member_of=sorted(principal.member_of),
    )


@router.get("/teams/{team_id}/history", response_model=list[UsagePointOut], tags=["usage"])
def team_history(
    team_id: int, session: SessionDep, principal: CurrentPrincipal, days: int = 7
) -> list[UsagePointOut]:
    """Hourly GPU use of the team over the last `days` days (at most 400)."""
    team = repo.get_team(session, team_id)
    principal.require_view(team)
    points = history.last_days(session, team.id, days=max(1, min(days, 400)))
    return [
        UsagePointOut(at=p.at, allocated=p.allocated, requested=p.requested, quota=p.quota)
        for p in points
    ]


@router.get("/showback", response_model=list[ShowbackOut], tags=["usage"])
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
