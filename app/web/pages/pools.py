"""Pages: the org's node pools (admin): what the cluster holds in each, the budget teams
may be guaranteed there, the GPU type and price; add, change and remove."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse, Response
from sqlalchemy.orm import Session

from app.auth.principal import Principal
from app.core import labels
from app.core.db import discard_changes
from app.core.errors import DomainError, InvalidInput
from app.provisioning import sleep
from app.runtime import Portal
from app.teams import pools
from app.teams import repository as repo
from app.web.deps import AdminPrincipal, FormDep, Id, PortalDep, SessionDep
from app.web.templating import flash, redirect, render

router = APIRouter(prefix="/admin/pools", include_in_schema=False)


def _page(
    request: Request,
    session: Session,
    portal: Portal,
    principal: Principal,
    *,
    errors: Mapping[str, str] | None = None,
    typed: Mapping[str, str] | None = None,
    editing: int | None = None,
    status_code: int = 200,
) -> Response:
    discovery = portal.node_pools.get()
    org = repo.get_org(session)
    rows, unclaimed = pools.pool_rows(session, org, discovery.found)
    return render(
        request,
        "admin/pools.html",
        {
            "principal": principal,
            "rows": rows,
            "unclaimed": unclaimed,
            "discovery_error": discovery.error,
            "label_key": portal.settings.node_pool_label_key,
            "errors": errors or {},
            "typed": typed or {},
            "editing": editing,
            "org": org,
            "wake_seconds": sleep.wake_seconds(session),
        },
        status_code=status_code,
    )


def _hours(data: Mapping[str, str], name: str, label: str, *, optional: bool = False) -> int | None:
    typed = data.get(name, "").strip()
    if not typed and optional:
        return None
    try:
        return int(typed)
    except ValueError:
        raise InvalidInput({name: f"{label}: a whole number of hours."}) from None


@router.get("", response_class=HTMLResponse)
def pools_page(
    request: Request, session: SessionDep, principal: AdminPrincipal, portal: PortalDep
) -> Response:
    return _page(request, session, portal, principal)


@router.post("")
def add_pool(
    request: Request,
    session: SessionDep,
    principal: AdminPrincipal,
    portal: PortalDep,
    data: FormDep,
) -> Response:
    try:
        pool = pools.add_pool(session, actor=principal.user, data=data)
    except InvalidInput as exc:
        discard_changes(session)
        return _page(
            request, session, portal, principal, errors=exc.errors, typed=data, status_code=422
        )
    except DomainError as exc:
        discard_changes(session)
        flash(request, f"Pool not added: {labels.said(exc)}", "error")
        return redirect(request, "/admin/pools")
    flash(request, f"Pool {pool.name} added.")
    return redirect(request, "/admin/pools")


@router.post("/sleep-policy")
def set_sleep_policy(
    request: Request,
    session: SessionDep,
    principal: AdminPrincipal,
    portal: PortalDep,
    data: FormDep,
) -> Response:
    try:
        after = _hours(data, "sleep_after_hours", "Asleep after idle hours", optional=True)
        most = _hours(data, "sleep_max_hours", "Most idle hours a team may choose")
        sleep.set_policy(
            session,
            repo.get_org(session),
            after_hours=after,
            max_hours=most or 0,
            actor=principal.user,
            quiet_hours=data.get("sleep_quiet_hours", ""),
            weekends=data.get("sleep_weekends") == "on",
            time_zone=data.get("sleep_time_zone", ""),
        )
    except InvalidInput as exc:
        discard_changes(session)
        return _page(
            request, session, portal, principal, errors=exc.errors, typed=data, status_code=422
        )
    flash(request, "Sleep policy saved.")
    return redirect(request, "/admin/pools")


@router.post("/{pool_id}")
def change_pool(
    request: Request,
    pool_id: Id,
    session: SessionDep,
    principal: AdminPrincipal,
    portal: PortalDep,
    data: FormDep,
) -> Response:
    try:
        pool, changed = pools.change_pool(
            session,
            actor=principal.user,
            pool_id=pool_id,
            data=_filled(data),
            below_committed=data.get("below_committed") == "confirm",
        )
    except InvalidInput as exc:
        discard_changes(session)
        return _page(
            request,
            session,
            portal,
            principal,
            errors=exc.errors,
            typed=data,
            editing=pool_id,
            status_code=422,
        )
    except DomainError as exc:
        discard_changes(session)
        flash(request, f"Pool not changed: {labels.said(exc)}", "error")
        return redirect(request, "/admin/pools")
    flash(
        request,
        f"Pool {pool.name} changed." if changed else f"Pool {pool.name}: nothing to change.",
    )
    return redirect(request, "/admin/pools")


def _filled(data: Mapping[str, str]) -> dict[str, Any]:
    """The form's fields without the CSRF token and the confirmation."""
    return {k: v for k, v in data.items() if k not in ("csrf_token", "below_committed")}


@router.post("/{pool_id}/remove")
def remove_pool(
    request: Request,
    pool_id: Id,
    session: SessionDep,
    principal: AdminPrincipal,
) -> Response:
    try:
        name = pools.remove_pool(session, actor=principal.user, pool_id=pool_id)
    except DomainError as exc:
        discard_changes(session)
        flash(request, f"Pool not removed: {labels.said(exc)}", "error")
        return redirect(request, "/admin/pools")
    flash(request, f"Pool {name} removed.")
    return redirect(request, "/admin/pools")
