"""Team lead pages: request a cluster, follow it, use it, change it, end it."""

from __future__ import annotations

import contextlib
import hashlib
from collections.abc import Callable, Mapping
from typing import Any, cast

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse, PlainTextResponse, RedirectResponse, Response
from sqlalchemy.orm import Session
from starlette.concurrency import run_in_threadpool

from app.access import service as access
from app.auth.principal import Principal
from app.catalog import service as catalog
from app.catalog.service import Chosen
from app.core import labels
from app.core.db import discard_changes
from app.core.errors import Conflict, DomainError, InvalidInput, NotFound
from app.core.models import Org, Sleep, Team, TeamStatus, utcnow
from app.core.quantities import format_hundredths, parse_hundredths
from app.provisioning import sleep
from app.provisioning.specs import spec_of
from app.runtime import Portal, portal_of
from app.teams import grants, members, service
from app.teams import repository as repo
from app.teams.podspec import example_pods
from app.teams.rules import parse_pool_fields, parse_quota, parse_quota_fields
from app.usage import history, rightsizing
from app.usage.service import UsageCache
from app.web.deps import (
    BackendDep,
    CurrentPrincipal,
    FormDep,
    Id,
    MaybePrincipal,
    OptionalIdQuery,
    PortalDep,
    SessionDep,
    SettingsDep,
    TeamForLead,
    TeamForViewer,
    UsageDep,
    viewed_team,
    viewed_team_reading,
)
from app.web.templating import flash, redirect, render
from app.web.views.impact import own_impact, pool_changes
from app.web.views.teams import (
    ShareDetail,
    TeamDetail,
    TeamLists,
    cards,
    share_detail,
    team_detail,
    team_lists,
    why_share,
)
from app.web.views.workloads import workloads_card

router = APIRouter(include_in_schema=False)

FORM_FIELDS = (
    "name",
    "gpu_quota",
    "gpu_limit",
    "over_quota_weight",
    "priority",
    "cpu_quota",
    "memory_quota",
    "purpose",
)


@router.get("/")
async def home(principal: MaybePrincipal) -> Response:
    """Where a visitor starts: sign-in, or their own pages (no I/O but the caller's lookup)."""
    if principal is None:
        return RedirectResponse("/login", status_code=303)
    return RedirectResponse("/admin" if principal.is_admin else "/teams", status_code=303)


@router.get("/teams", response_class=HTMLResponse)
def my_teams(
    request: Request,
    session: SessionDep,
    principal: CurrentPrincipal,
    usage: UsageDep,
    q: str = "",
) -> Response:
    teams = repo.get_teams(session, team_ids=principal.visible_team_ids, name_contains=q.strip())
    org = repo.get_org(session)
    # Decommissioned teams are history: listed apart, under the live ones.
    live = [t for t in teams if t.status != TeamStatus.DECOMMISSIONED]
    return render(
        request,
        "teams/list.html",
        {
            "principal": principal,
            "cards": cards(session, live, usage, org),
            "past": [t for t in teams if t.status == TeamStatus.DECOMMISSIONED],
            "org": org,
            "q": q.strip(),
        },
        partial="teams/partials/cards.html",
    )


def _new_form(
    request: Request,
    session: SessionDep,
    principal: CurrentPrincipal,
    values: dict[str, str],
    errors: dict[str, str],
    *,
    status_code: int = 200,
) -> Response:
    org = repo.get_org(session)
    try:
        requested: int | None = parse_hundredths(values.get("gpu_quota") or "0", what="guarantee")
    except ValueError:
        requested = None  # no verdict on the pool until the guarantee is a number
    preview = service.preview(session, requested_centi=requested or 0)
    offered = catalog.offered(session)
    chosen = values.get("template")
    if chosen is None:  # the form's first view: the default template, if there is one
        default = next((o for o in offered if o.template.is_default), None)
        chosen = str(default.template.id) if default is not None else ""
        if default is not None:  # with the quota it suggests
            values = {**values, **default.spec.default_quota}
    return render(
        request,
        "teams/new.html",
        {
            "principal": principal,
            "org": org,
            "values": values,
            "errors": errors,
            "preview": preview,
            "guarantee_valid": requested is not None and "gpu_quota" not in errors,
            "offered": offered,
            "chosen_template": chosen,
            # One "nothing inside" choice: none of its own where a template is one.
            "plain_allowed": (not org.require_template or principal.is_admin)
            and not any(o.spec.plain for o in offered),
            "summary": catalog.summary,
            "param_fields": [
                f"param-{o.template.id}-{p.name}" for o in offered for p in o.spec.parameters
            ],
            "other_pools": [p for p in repo.get_pools(session, org.id) if not p.is_default],
            **_pool_feedback(session, portal_of(request.app).usage_cache, org, None, values),
        },
        partial="teams/partials/new_feedback.html",
        status_code=status_code,
    )


@router.get("/teams/new", response_class=HTMLResponse)
def new_request(
    request: Request,
    session: SessionDep,
    principal: CurrentPrincipal,
    again: OptionalIdQuery = None,
) -> Response:
    """The request form; ``again``: a rejected team of the viewer's, whose request it
    opens on (to change what the admin said and ask again)."""
    # The design source's 0.33, or what is still free: the form opens on a request that fits.
    free = service.preview(session, requested_centi=0).free_centi
    defaults = {
        "gpu_quota": format_hundredths(min(33, free)),
        "gpu_limit": "1",
        "over_quota_weight": "1",
        "priority": "100",
    }
    earlier = None
    if again is not None:
        with contextlib.suppress(NotFound):
            earlier = repo.get_team(session, again)
    if earlier is not None and principal.can_view(earlier) and earlier.status == "rejected":
        asked = next(
            (r for r in repo.get_requests(session, team_ids=[earlier.id]) if r.kind == "create"),
            None,
        )
        if asked is not None:
            defaults = {
                "name": earlier.name,
                "purpose": asked.purpose,
                **service.values_of(asked).display(),
            }
    return _new_form(request, session, principal, defaults, {})


@router.post("/teams/new/validate", response_class=HTMLResponse)
def validate_request(
    request: Request, session: SessionDep, principal: CurrentPrincipal, values: FormDep
) -> Response:
    errors: dict[str, str] = {}
    try:
        service.check_cluster_request(session, values)
    except InvalidInput as exc:
        errors = exc.errors
    try:
        _chosen(session, principal, values)
    except InvalidInput as exc:
        errors = {**errors, **exc.errors}
    return _new_form(request, session, principal, values, errors)


def _chosen(session: Session, principal: Principal, values: Mapping[str, str]) -> Chosen | None:
    return catalog.choose_from_form(
        session, values, org=repo.get_org(session), admin=principal.is_admin
    )


@router.post("/teams")
def submit_request(
    request: Request, session: SessionDep, principal: CurrentPrincipal, values: FormDep
) -> Response:
    try:
        name, quota = service.check_cluster_request(session, values)  # the form, parsed once
        template = _chosen(session, principal, values)
        cluster_request = service.submit_cluster_request(
            session,
            actor=principal.user,
            name=name,
            values=quota,
            purpose=values.get("purpose", ""),
            template=template,
            pools=parse_pool_fields(values),
        )
    except InvalidInput as exc:
        discard_changes(session)
        return _new_form(request, session, principal, values, exc.errors, status_code=422)
    flash(request, f"Request for {cluster_request.team.name} sent to the admins.")
    return redirect(request, f"/teams/{cluster_request.team_id}")


# The team page and its polls, the pages every lead keeps open, are coroutines that read
# the caller, the team and the page on one thread (``viewed_team``): one thread hop a view
# instead of two.


@router.get("/teams/{team_id}", response_class=HTMLResponse)
async def team_page(
    team_id: Id, request: Request, session: SessionDep, portal: PortalDep
) -> Response:
    return await run_in_threadpool(_team_page, team_id, request, session, portal)


def _team_page(team_id: int, request: Request, session: Session, portal: Portal) -> Response:
    # The caller, the team and its lists in one statement (PostgreSQL).
    team, principal, lists = viewed_team_reading(
        team_id, request, session, portal.settings, team_lists(team_id)
    )
    detail = team_detail(
        session, team, portal.usage_cache, portal.settings, lists=cast(TeamLists, lists)
    )
    return render(
        request,
        "teams/detail.html",
        {
            **panels_context(portal, session, principal, detail),
            **share_context(portal, session, detail, last="", same=0),
        },
        partial="teams/partials/status.html",
    )


def panels_context(
    portal: Portal, session: Session, principal: Principal, detail: TeamDetail
) -> dict[str, Any]:
    """What the team page's panels show: the whole page, and the status poll that
    replaces them when the team changed."""
    settings = portal.settings
    return {
        "principal": principal,
        "d": detail,
        "kubeconfig_mode": settings.kubeconfigs.mode,
        "access_error": portal.sweeper.errors.get(detail.team.id),
        "ttl_choices": access.ttl_choices(settings),
        "ttl_default": settings.kubeconfigs.ttl_seconds,
        "pods": example_pods(
            detail.team,
            queue_label=settings.kai_queue_label,
            pool_label=settings.node_pool_label_key,
            pools=detail.pool_gpus,
        ),
        "now": utcnow(),
        # Read only where it is shown: a cluster asleep or waking.
        "wake_seconds": (sleep.wake_seconds(session) if detail.team.sleep != Sleep.AWAKE else None),
    }


STEADY_POLLS = 6  # a minute without change at one poll every 10 s


def share_context(
    portal: Portal, session: Session, detail: TeamDetail | ShareDetail, *, last: str, same: int
) -> dict[str, Any]:
    """Live polling that stops itself once the numbers stop changing."""
    share = detail.share
    figures = [(s.allocated, s.requested, s.fair_now, s.limit) for s in detail.all_shares]
    signature = hashlib.sha256(repr(figures).encode()).hexdigest()[:12]
    same = same + 1 if signature == last else 0
    recent: history.RecentHistory = portal.recent_history
    points = recent.get(session, detail.team.id)
    return {
        "history": history.sparkline(points, limit=share.limit),
        "signature": signature,
        "same": same,
        "live": same < STEADY_POLLS,
    }


@router.get("/teams/{team_id}/share", response_class=HTMLResponse)
async def team_share(
    team_id: Id,
    request: Request,
    session: SessionDep,
    portal: PortalDep,
    last: str = "",
    same: int = 0,
) -> Response:
    return await run_in_threadpool(_team_share, team_id, request, session, portal, last, same)


def _team_share(
    team_id: int, request: Request, session: Session, portal: Portal, last: str, same: int
) -> Response:
    team, principal = viewed_team(team_id, request, session, portal.settings)
    detail = share_detail(session, team, portal.usage_cache)
    context = {
        "principal": principal,
        "d": detail,
        **share_context(portal, session, detail, last=last, same=same),
    }
    return render(request, "teams/partials/share.html", context)


@router.get("/teams/{team_id}/status", response_class=HTMLResponse)
async def team_status(
    team_id: Id, request: Request, session: SessionDep, portal: PortalDep
) -> Response:
    return await run_in_threadpool(_team_status, team_id, request, session, portal)


def _team_status(team_id: int, request: Request, session: Session, portal: Portal) -> Response:
    team, principal = viewed_team(team_id, request, session, portal.settings)
    detail = team_detail(session, team, portal.usage_cache, portal.settings)
    changed = request.headers.get("X-Page-Version", detail.version) != detail.version
    context = {**panels_context(portal, session, principal, detail), "changed": changed}
    response = render(request, "teams/partials/status.html", context)
    if changed:
        # Whatever else listens (the live share gauge) refreshes now, not at its next poll.
        response.headers["HX-Trigger"] = "team-changed"
    return response


@router.get("/teams/{team_id}/workloads", response_class=HTMLResponse)
def team_workloads(
    request: Request,
    team: TeamForViewer,
    session: SessionDep,
    principal: CurrentPrincipal,
    portal: PortalDep,
) -> Response:
    """The team's workloads as KAI sees them, KAI's recent evictions of its work, and its
    pods the host refused (read from its vCluster): loaded after the page, so the page
    itself never waits for a cluster."""
    ready = team.status == TeamStatus.READY
    spec = spec_of(session, team, portal.settings) if ready else None
    reading = portal.refused_pods.get(spec) if spec is not None else None
    awake = spec is not None and team.sleep == Sleep.AWAKE
    kai = portal.workloads.get(spec) if awake and spec is not None else None
    card = workloads_card(session, team, kai)
    context = {
        "principal": principal,
        "team": team,
        "reading": reading,
        "card": card,
        # Asked again as often as a new reading can be there (never more than every 2 s).
        "poll_seconds": max(2, round(portal.settings.workloads_seconds)),
    }
    return render(request, "teams/partials/workloads.html", context)


@router.get("/teams/{team_id}/why", response_class=HTMLResponse)
def team_why(
    request: Request,
    team: TeamForViewer,
    session: SessionDep,
    principal: CurrentPrincipal,
    usage: UsageDep,
) -> Response:
    """Why the team's fair share is what it is, step by step (loaded when opened)."""
    context = {"principal": principal, "team": team, "why": why_share(session, usage, team)}
    return render(request, "teams/why.html", context, partial="teams/partials/why.html")


@router.post("/teams/{team_id}/kubeconfig")
def kubeconfig(
    request: Request,
    team: TeamForViewer,
    session: SessionDep,
    principal: CurrentPrincipal,
    backend: BackendDep,
    settings: SettingsDep,
    values: FormDep,
) -> Response:
    """A personal kubeconfig, made now: a POST, since it creates a credential. A sleeping
    cluster is woken first (its API makes the credential)."""
    if team.sleep != Sleep.AWAKE:
        said = sleep.wake_for_kubeconfig(session, team, actor=principal.user)
        flash(
            request,
            f"{said}: download your kubeconfig again in about {sleep.wake_seconds(session)} s.",
        )
        return redirect(request, f"/teams/{team.id}")
    try:
        download = access.issue(
            session,
            backend=backend,
            settings=settings,
            actor=principal.user,
            team=team,
            ttl=values.get("ttl"),
        )
    except DomainError as exc:
        flash(request, f"No kubeconfig: {labels.said(exc)}", "error")
        return redirect(request, f"/teams/{team.id}")
    return PlainTextResponse(
        download.text,
        media_type="application/yaml",
        headers={
            "Content-Disposition": f'attachment; filename="{download.filename}"',
            "Cache-Control": "no-store",
        },
    )


@router.post("/teams/{team_id}/kubeconfig/revoke")
def revoke_kubeconfigs(
    request: Request,
    team: TeamForViewer,
    session: SessionDep,
    principal: CurrentPrincipal,
    values: FormDep,
) -> Response:
    everyone = values.get("scope") == "everyone"
    if everyone:
        principal.require_lead(team)
    count = access.revoke_own_or_all(session, actor=principal.user, team=team, everyone=everyone)
    if everyone:
        flash(
            request, f"Revoked the kubeconfigs of {count} {'person' if count == 1 else 'people'}."
        )
    else:
        flash(request, "Your kubeconfigs for this team are revoked." if count else "You held none.")
    return redirect(request, f"/teams/{team.id}")


@router.post("/teams/{team_id}/template/accept")
def accept_template(
    request: Request,
    team: TeamForLead,
    session: SessionDep,
    principal: CurrentPrincipal,
    data: FormDep,
) -> Response:
    """A lead moves the team to its template's newest version, with the values chosen
    for what it asks (fields ``param-<name>``)."""
    chosen = {k.removeprefix("param-"): v for k, v in data.items() if k.startswith("param-")}
    try:
        version = catalog.accept_latest(session, actor=principal.user, team=team, chosen=chosen)
    except DomainError as exc:
        discard_changes(session)
        flash(request, labels.said(exc), "error")
        return redirect(request, f"/teams/{team.id}")
    flash(request, f"{team.name} moves to {version.label}.")
    return redirect(request, f"/teams/{team.id}")


@router.post("/teams/{team_id}/rightsizing")
def propose_rightsizing(
    request: Request,
    team: TeamForLead,
    session: SessionDep,
    principal: CurrentPrincipal,
    data: FormDep,
) -> Response:
    """One click: the team's right-sizing suggestion (in the default pool, or in the node
    pool the form names) becomes a quota-change request."""
    pool = str(data.get("pool", "")).strip()
    try:
        typed = data.get("gpus", "").strip()
        centi = parse_hundredths(typed, what="the GPUs asked") if typed else None
        change = rightsizing.propose(
            session, actor=principal.user, team=team, pool=pool, centi=centi
        )
    except (Conflict, ValueError) as exc:
        discard_changes(session)
        said = exc.message if isinstance(exc, Conflict) else f"Not asked: {exc}."
        flash(request, said, kind="error")
        return redirect(request, f"/teams/{team.id}")
    asked = change.other_pools()[pool] if pool else change.quota
    flash(
        request,
        f"Asked to change {team.name}'s guarantee{' in pool ' + pool if pool else ''} to "
        f"{format_hundredths(asked.gpu.guarantee)} GPU (request #{change.id}).",
    )
    return redirect(request, "/admin/requests" if principal.is_admin else f"/teams/{team.id}")


def _pool_feedback(
    session: Session,
    usage: UsageCache,
    org: Org,
    team: Team | None,
    values: Mapping[str, str],
) -> dict[str, Any]:
    """The form's other node pools as typed: each pool changed (before → after, its fit,
    the team's own figures there) and what is wrong with the typed values."""
    held = grants.base_pools(session, team) if team is not None else {}
    try:
        typed = parse_pool_fields(values)
    except InvalidInput as exc:
        return {"pool_changes": [], "pool_errors": dict(exc.errors)}
    if typed is None:
        return {"pool_changes": [], "pool_errors": {}}
    after, errors = service.resolve_pools(session, org, typed)
    if errors:
        return {"pool_changes": [], "pool_errors": errors}
    return {
        "pool_changes": pool_changes(session, usage, org, team, held, after),
        "pool_errors": {},
    }


def _quota_form(
    request: Request,
    session: Session,
    principal: Any,
    usage: UsageCache,
    team: Team,
    values: Mapping[str, str],
    errors: dict[str, str],
    *,
    status_code: int = 200,
) -> Response:
    """The quota-change form with the team's current → new values, where the new
    guarantee leaves the pool, and the team's own shares after (what KAI may take back
    from its running work when the change lowers them)."""
    org = repo.get_org(session)
    parsed = None
    try:
        parsed = parse_quota(values, pool=org)
    except InvalidInput as exc:
        errors = errors or exc.errors
    requested = (parsed.gpu.guarantee or 0) if parsed is not None else 0
    return render(
        request,
        "teams/quota.html",
        {
            "principal": principal,
            "team": team,
            "values": values,
            "errors": errors,
            "org": org,
            "current": grants.base(session, team, org.default_pool).display(),
            "new": parsed.display() if parsed is not None else None,
            "preview": service.preview(session, requested_centi=requested, exclude_team_id=team.id),
            "own": own_impact(session, usage, org, team, parsed) if parsed is not None else None,
            "other_pools": [p for p in repo.get_pools(session, org.id) if not p.is_default],
            **_pool_feedback(session, usage, org, team, values),
        },
        partial="teams/partials/quota_feedback.html",
        status_code=status_code,
    )


@router.get("/teams/{team_id}/quota", response_class=HTMLResponse)
def quota_form(
    request: Request,
    team: TeamForLead,
    session: SessionDep,
    principal: CurrentPrincipal,
    usage: UsageDep,
) -> Response:
    # Its own quota, without the temporary grants running now (a change keeps them).
    values = grants.base(session, team, repo.get_org(session).default_pool).display()
    for pool, held in grants.base_pools(session, team).items():  # the other pools
        values.update({f"pools.{pool.name}.{k}": v for k, v in held.display().items() if v})
    return _quota_form(request, session, principal, usage, team, values, {})


@router.post("/teams/{team_id}/quota/validate", response_class=HTMLResponse)
def validate_quota(
    request: Request,
    team: TeamForLead,
    session: SessionDep,
    principal: CurrentPrincipal,
    usage: UsageDep,
    values: FormDep,
) -> Response:
    """The form's feedback as the lead types (HTMX; nothing is saved)."""
    return _quota_form(request, session, principal, usage, team, values, {})


@router.post("/teams/{team_id}/quota")
def submit_quota(
    request: Request,
    team: TeamForLead,
    session: SessionDep,
    principal: CurrentPrincipal,
    usage: UsageDep,
    values: FormDep,
) -> Response:
    try:
        service.submit_quota_change(
            session,
            actor=principal.user,
            team=team,
            values=parse_quota_fields(values),
            purpose=values.get("purpose", ""),
            pools=parse_pool_fields(values),
        )
    except InvalidInput as exc:
        discard_changes(session)
        return _quota_form(
            request, session, principal, usage, team, values, exc.errors, status_code=422
        )
    flash(request, "Quota change sent to the admins.")
    return redirect(request, f"/teams/{team.id}")


@router.post("/teams/{team_id}/decommission")
def decommission(
    request: Request,
    team: TeamForLead,
    session: SessionDep,
    principal: CurrentPrincipal,
    data: FormDep,
) -> Response:
    if data.get("confirm", "").strip() != team.name:
        # Also without JavaScript: nothing is deleted by one stray click.
        flash(request, f"Not decommissioned: type {team.name} to confirm.", "error")
        return redirect(request, f"/teams/{team.id}")
    service.decommission(session, actor=principal.user, team=team)
    flash(request, f"Decommissioning {team.name}.")
    return redirect(request, f"/teams/{team.id}")


def _sleep_action(
    request: Request, session: Session, team: Team, act: Callable[[], str], *, refused: str
) -> Response:
    """A sleep form's action: its answer flashed, or what was refused and why (nothing of
    it written); back to the team page, where the status card follows it."""
    try:
        said = act()
    except DomainError as exc:
        discard_changes(session)
        flash(request, f"{refused}: {labels.said(exc)}", "error")
    else:
        flash(request, said)
    return redirect(request, f"/teams/{team.id}")


@router.post("/teams/{team_id}/wake")
def wake(
    request: Request, team: TeamForViewer, session: SessionDep, principal: CurrentPrincipal
) -> Response:
    """Wake the team's sleeping cluster (anyone of the team, or an admin)."""

    def act() -> str:
        who = principal.user.email
        if not sleep.wake(
            session, team, actor=principal.user, cause="person", reason=f"woken by {who}"
        ):
            return f"{team.name}'s cluster is awake already."
        seconds = sleep.wake_seconds(session)
        return f"Waking {team.name}: it answers again in about {seconds} s."

    return _sleep_action(request, session, team, act, refused="Not woken")


@router.post("/teams/{team_id}/sleep")
def put_to_sleep(
    request: Request,
    team: TeamForLead,
    session: SessionDep,
    principal: CurrentPrincipal,
    backend: BackendDep,
) -> Response:
    def act() -> str:
        sleep.ask_sleep_now(session, team, actor=principal.user, backend=backend)
        return f"{team.name}'s cluster goes to sleep."

    return _sleep_action(request, session, team, act, refused="Not put to sleep")


@router.post("/teams/{team_id}/keep-awake")
def keep_awake(
    request: Request,
    team: TeamForLead,
    session: SessionDep,
    principal: CurrentPrincipal,
    data: FormDep,
) -> Response:
    def act() -> str:
        now = utcnow()
        until = sleep.until_from_hours(data.get("hours", ""), now)
        sleep.keep_awake(session, team, actor=principal.user, until=until, now=now)
        if until is None:
            return f"{team.name} is no longer kept awake."
        return f"{team.name} is kept awake until {until:%Y-%m-%d %H:%M} UTC."

    return _sleep_action(request, session, team, act, refused="Not kept awake")


@router.post("/teams/{team_id}/sleep-hours")
def sleep_hours(
    request: Request,
    team: TeamForLead,
    session: SessionDep,
    principal: CurrentPrincipal,
    data: FormDep,
) -> Response:
    """The team's own idle hours before its cluster sleeps, within the org's bounds."""

    def act() -> str:
        org = repo.get_org(session)
        hours = sleep.hours_from_form(data.get("sleep_after_hours", ""))
        sleep.set_team_hours(session, team, org, hours=hours, actor=principal.user)
        if hours is None:
            return f"{team.name}'s cluster sleeps by the org's policy."
        return f"{team.name}'s cluster sleeps after {hours} idle hours."

    return _sleep_action(request, session, team, act, refused="Not changed")


@router.post("/teams/{team_id}/retry")
def retry(
    request: Request, team: TeamForViewer, session: SessionDep, principal: CurrentPrincipal
) -> Response:
    principal.require_admin()
    service.retry_now(session, actor=principal.user, team=team)
    flash(request, f"Retrying {team.name} now.")
    return redirect(request, f"/teams/{team.id}")


@router.post("/teams/{team_id}/members")
def add_member(
    request: Request,
    team: TeamForLead,
    session: SessionDep,
    principal: CurrentPrincipal,
    data: FormDep,
) -> Response:
    try:
        members.add(
            session,
            actor=principal.user,
            team=team,
            email=data.get("email", ""),
            role=data.get("role", "member"),
        )
    except InvalidInput as exc:
        flash(request, "Not added: " + "; ".join(exc.errors.values()), "error")
        return redirect(request, f"/teams/{team.id}")
    flash(request, f"{data.get('email', '').strip().lower()} added to {team.name}.")
    return redirect(request, f"/teams/{team.id}")


@router.post("/teams/{team_id}/members/{user_id}/remove")
def remove_member(
    request: Request,
    team: TeamForLead,
    user_id: Id,
    session: SessionDep,
    principal: CurrentPrincipal,
) -> Response:
    members.remove(session, actor=principal.user, team=team, user_id=user_id)
    flash(request, f"Removed from {team.name}.")
    return redirect(request, f"/teams/{team.id}")
