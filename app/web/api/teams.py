"""API: teams, personal kubeconfigs, quota changes, members and decommissioning."""

from __future__ import annotations

from datetime import UTC
from typing import Annotated

from fastapi import APIRouter, Body, Request, Response
from fastapi.responses import JSONResponse, PlainTextResponse

from app.access import service as access
from app.auth import repository as users
from app.catalog import service as catalog
from app.core.models import Sleep, utcnow
from app.provisioning import sleep
from app.teams import members, service
from app.teams import repository as repo
from app.web.deps import (
    AdminPrincipal,
    BackendDep,
    CurrentPrincipal,
    Id,
    SessionDep,
    SettingsDep,
    TeamForLead,
    TeamForViewer,
    UsageDep,
)
from app.web.paging import PAGED, WindowDep, announce
from app.web.schemas import (
    PROBLEMS,
    HolderOut,
    MemberIn,
    MemberOut,
    QuotaIn,
    RequestOut,
    RevokedOut,
    RevokeIn,
    SleepIn,
    TeamOut,
    TemplateAcceptIn,
)
from app.web.views.api import member_out, request_out, team_out
from app.web.views.teams import cards

router = APIRouter(prefix="/api/v1", responses=PROBLEMS, tags=["teams"])


@router.get("/teams", response_model=list[TeamOut], responses=PAGED)
def list_teams(
    request: Request,
    response: Response,
    session: SessionDep,
    principal: CurrentPrincipal,
    usage: UsageDep,
    window: WindowDep,
) -> list[TeamOut]:
    """Teams you lead or belong to (admins: all), by name; paged (`limit`, `offset`)."""
    visible = principal.visible_team_ids
    teams = repo.get_teams(session, team_ids=visible, limit=window.limit, offset=window.offset)
    total = repo.count_teams(session, team_ids=visible)
    announce(request, response, window, returned=len(teams), total=total)
    team_cards = cards(session, teams, usage, repo.get_org(session))
    problem = usage.error or usage.model.history_error
    return [
        team_out(t, c.share, usage_error=problem) for t, c in zip(teams, team_cards, strict=True)
    ]


@router.get("/teams/{team_id}", response_model=TeamOut)
def get_team(team: TeamForViewer, session: SessionDep, usage: UsageDep) -> TeamOut:
    card = cards(session, [team], usage, repo.get_org(session))[0]
    problem = usage.error or usage.model.history_error
    return team_out(team, card.share, list(team.steps), problem)  # steps: loaded with the team


@router.post(
    "/teams/{team_id}/kubeconfig",
    response_class=Response,
    responses={
        200: {
            "description": "Your personal kubeconfig (header X-Expires-At says until when)",
            "content": {
                "application/yaml": {
                    "schema": {
                        "type": "object",
                        "description": "A kubeconfig file (YAML): one cluster, one user, one "
                        "context, named after the team and you",
                        "required": ["apiVersion", "kind", "clusters", "users", "contexts"],
                    }
                }
            },
        }
    },
)
def issue_kubeconfig(
    team: TeamForViewer,
    session: SessionDep,
    principal: CurrentPrincipal,
    backend: BackendDep,
    settings: SettingsDep,
    ttl: str | None = None,
) -> Response:
    """A kubeconfig for you alone, made now in the team's vCluster: a token that expires
    after `ttl` (30m, 8h, 7d; default and maximum set by the admins) and stops working
    when you leave the team, your role changes or it is revoked. Every issue is audited."""
    if team.sleep != Sleep.AWAKE:
        # Woken (and the wake committed); the credential is made once its API answers.
        said = sleep.wake_for_kubeconfig(session, team, actor=principal.user)
        seconds = sleep.wake_seconds(session)
        return JSONResponse(
            {"detail": f"{said}: ask again in about {seconds} s"},
            status_code=503,
            headers={"Retry-After": str(seconds)},
        )
    download = access.issue(
        session, backend=backend, settings=settings, actor=principal.user, team=team, ttl=ttl
    )
    headers = {"Cache-Control": "no-store"}
    if download.expires_at is not None:
        headers["X-Expires-At"] = download.expires_at.isoformat()
    return PlainTextResponse(download.text, media_type="application/yaml", headers=headers)


@router.get("/teams/{team_id}/kubeconfigs", response_model=list[HolderOut], responses=PAGED)
def list_kubeconfig_holders(
    request: Request,
    response: Response,
    team: TeamForViewer,
    session: SessionDep,
    settings: SettingsDep,
    window: WindowDep,
) -> list[HolderOut]:
    """People holding a working kubeconfig for the team, with its expiry; paged."""
    everyone, _pending = access.holders(session, team, settings)
    live = window.of(everyone)
    announce(request, response, window, returned=len(live), total=len(everyone))
    return [
        HolderOut(
            user_id=h.user_id,
            email=h.email,
            portal_role=h.portal_role,
            cluster_role=h.cluster_role,
            expires_at=h.expires_at,
        )
        for h in live
    ]


@router.post("/teams/{team_id}/kubeconfigs/revoke", response_model=RevokedOut)
def revoke_kubeconfigs(
    team: TeamForViewer, body: RevokeIn, session: SessionDep, principal: CurrentPrincipal
) -> RevokedOut:
    """Revoke your own kubeconfigs for the team, or (`everyone`, leads and admins)
    everyone's. The ServiceAccounts are deleted in the vCluster right after."""
    if body.everyone:
        principal.require_lead(team)
    count = access.revoke_own_or_all(
        session, actor=principal.user, team=team, everyone=body.everyone
    )
    return RevokedOut(people=count)


@router.post("/teams/{team_id}/quota-requests", response_model=RequestOut, status_code=201)
def request_quota_change(
    team: TeamForLead, body: QuotaIn, session: SessionDep, principal: CurrentPrincipal
) -> RequestOut:
    """Ask for new quota values; an admin decides as for a new cluster."""
    created = service.submit_quota_change(
        session,
        actor=principal.user,
        team=team,
        values=body.values(),
        purpose=body.purpose,
        pools=body.pool_values(),
    )
    return request_out(created)


@router.post("/teams/{team_id}/decommission", response_model=TeamOut)
def decommission_team(
    team: TeamForLead, session: SessionDep, principal: CurrentPrincipal
) -> TeamOut:
    """Delete the team's vCluster, namespace, policy and queue; the audit trail stays."""
    service.decommission(session, actor=principal.user, team=team)
    return team_out(team)


NO_CHOICES = TemplateAcceptIn()  # an empty body: every value carries over


@router.post("/teams/{team_id}/template/accept", response_model=TeamOut)
def accept_template(
    team: TeamForLead,
    session: SessionDep,
    principal: CurrentPrincipal,
    body: Annotated[TemplateAcceptIn, Body()] = NO_CHOICES,
) -> TeamOut:
    """Move the team to its template's newest version (a lead; for templates that wait
    for leads to accept); the vCluster is then installed with it in turn. `parameters`
    sets what the new version adds or no longer allows (the rest carry over)."""
    catalog.accept_latest(session, actor=principal.user, team=team, chosen=body.parameters)
    return team_out(team)


@router.post("/teams/{team_id}/wake", response_model=TeamOut, responses=PROBLEMS)
def wake_team(team: TeamForViewer, session: SessionDep, principal: CurrentPrincipal) -> TeamOut:
    """Wake the team's sleeping cluster (anyone of the team, or an admin); `sleep.state`
    says `waking` until its API answers, then `awake`. Waking an awake cluster changes
    nothing."""
    who = principal.user.email
    sleep.wake(session, team, actor=principal.user, cause="api", reason=f"woken by {who}")
    return team_out(team)


@router.post("/teams/{team_id}/sleep", response_model=TeamOut, responses=PROBLEMS)
def sleep_team(
    team: TeamForLead, session: SessionDep, principal: CurrentPrincipal, backend: BackendDep
) -> TeamOut:
    """Put the team's cluster to sleep now (a lead): paused as `vcluster pause` pauses it,
    its queue, objects and kubeconfigs kept. Refused while a team pod runs."""
    sleep.ask_sleep_now(session, team, actor=principal.user, backend=backend)
    return team_out(team)


@router.put("/teams/{team_id}/sleep", response_model=TeamOut, responses=PROBLEMS)
def set_team_sleep(
    team: TeamForLead, session: SessionDep, principal: CurrentPrincipal, body: SleepIn
) -> TeamOut:
    """A lead's choices: keep the cluster awake until a time, and the team's own idle
    hours before sleep (within the org's bounds)."""
    now = utcnow()
    until = body.awake_until
    if until is not None and until.tzinfo is None:
        until = until.replace(tzinfo=UTC)
    if "awake_until" in body.model_fields_set:
        sleep.keep_awake(session, team, actor=principal.user, until=until, now=now)
    if "sleep_after_hours" in body.model_fields_set:
        sleep.set_team_hours(
            session,
            team,
            repo.get_org(session),
            hours=body.sleep_after_hours,
            actor=principal.user,
        )
    return team_out(team)


@router.post("/teams/{team_id}/retry", response_model=TeamOut)
def retry_team(team_id: Id, session: SessionDep, principal: AdminPrincipal) -> TeamOut:
    """Retry failed provisioning now instead of at the next back-off (admin)."""
    team = repo.get_team(session, team_id)
    service.retry_now(session, actor=principal.user, team=team)
    return team_out(team)


@router.get("/teams/{team_id}/members", response_model=list[MemberOut], responses=PAGED)
def list_members(
    request: Request,
    response: Response,
    team: TeamForViewer,
    session: SessionDep,
    window: WindowDep,
) -> list[MemberOut]:
    """The team's people; paged (`limit`, `offset`)."""
    everyone = members.get_all(session, team)
    shown = window.of(everyone)
    announce(request, response, window, returned=len(shown), total=len(everyone))
    return [member_out(u, m) for u, m in shown]


@router.post("/teams/{team_id}/members", response_model=MemberOut, status_code=201)
def add_member(
    team: TeamForLead, body: MemberIn, session: SessionDep, principal: CurrentPrincipal
) -> MemberOut:
    """Add someone by e-mail as a lead or a member (leads and admins)."""
    member = members.add(session, actor=principal.user, team=team, email=body.email, role=body.role)
    user = users.get_user(session, member.user_id)
    assert user is not None
    return member_out(user, member)


@router.delete("/teams/{team_id}/members/{user_id}", status_code=204)
def remove_member(
    team: TeamForLead, user_id: Id, session: SessionDep, principal: CurrentPrincipal
) -> Response:
    members.remove(session, actor=principal.user, team=team, user_id=user_id)
    return Response(status_code=204)
