"""Pages: the notification bell and its list, preferences, webhooks, deliveries."""

from __future__ import annotations

from fastapi import APIRouter, Request, Response
from fastapi.responses import HTMLResponse
from sqlalchemy.orm import Session

from app.auth.principal import Principal
from app.core.config import Settings
from app.core.db import discard_changes
from app.core.errors import InvalidInput
from app.core.models import Team
from app.notifications import service as notifications
from app.web.deps import (
    AdminPrincipal,
    CurrentPrincipal,
    FormDep,
    Id,
    PortalDep,
    SessionDep,
    SettingsDep,
    TeamForLead,
)
from app.web.templating import flash, redirect, render

router = APIRouter(include_in_schema=False)


@router.get("/notifications", response_class=HTMLResponse)
def notifications_page(
    request: Request, session: SessionDep, principal: CurrentPrincipal
) -> Response:
    return render(
        request,
        "notifications/list.html",
        {
            "principal": principal,
            "items": notifications.recent(session, principal.user),
            "unread": notifications.unread(session, principal.user),
        },
    )


@router.get("/notifications/bell", response_class=HTMLResponse)
def bell(request: Request, session: SessionDep, principal: CurrentPrincipal) -> Response:
    """The bell's unread count; the header polls it at most once a minute while the tab
    is visible."""
    return render(
        request,
        "notifications/bell.html",
        {"principal": principal, "unread": notifications.unread(session, principal.user)},
    )


@router.post("/notifications/read")
def mark_read(request: Request, session: SessionDep, principal: CurrentPrincipal) -> Response:
    count = notifications.mark_all_read(session, principal.user)
    flash(request, f"Marked {count} notification{'s' if count != 1 else ''} read.")
    return redirect(request, "/notifications")


@router.get("/notifications/settings", response_class=HTMLResponse)
def preferences_page(
    request: Request, session: SessionDep, principal: CurrentPrincipal, settings: SettingsDep
) -> Response:
    return render(
        request,
        "notifications/settings.html",
        {
            "principal": principal,
            "prefs": notifications.preferences(session, principal.user),
            "events": notifications.EVENTS,
            "email_enabled": settings.email_enabled,
        },
    )


@router.post("/notifications/settings")
def save_preferences(
    request: Request, session: SessionDep, principal: CurrentPrincipal, values: FormDep
) -> Response:
    ticked = [key.removeprefix("on:") for key in values if key.startswith("on:")]
    muted = notifications.save_preferences(session, principal.user, ticked)
    flash(request, "Saved." + (f" {muted} muted." if muted else " You hear of everything."))
    return redirect(request, "/notifications/settings")


# Webhooks: a team's (its leads and the admins) and the org's (admins) --------------------


def _webhooks_page(
    request: Request,
    session: SessionDep,
    principal: Principal,
    team: Team | None,
    *,
    secret: str | None = None,
    errors: dict[str, str] | None = None,
    values: dict[str, str] | None = None,
    status_code: int = 200,
) -> Response:
    return render(
        request,
        "notifications/webhooks.html",
        {
            "principal": principal,
            "team": team,
            "hooks": notifications.get_webhooks(session, team.id if team else None),
            "base": f"/teams/{team.id}/webhooks" if team else "/admin/webhooks",
            "secret": secret,
            "errors": errors or {},
            "values": values or {},
        },
        status_code=status_code,
    )


def _save_webhook(
    request: Request,
    session: SessionDep,
    principal: Principal,
    settings: Settings,
    team: Team | None,
    values: dict[str, str],
) -> Response:
    kind = values.get("kind", "")
    try:
        _, secret = notifications.save_webhook(
            session,
            actor=principal.user,
            team_id=team.id if team else None,
            kind=kind,
            url=values.get("url", ""),
            key=settings.secret_key.get_secret_value(),
            allow_private=settings.allow_private_webhooks,
            development=settings.development,
        )
    except InvalidInput as exc:
        discard_changes(session)
        return _webhooks_page(
            request, session, principal, team, errors=exc.errors, values=values, status_code=422
        )
    if secret:
        # Shown once, on this answer only: the page tells how to verify signatures.
        return _webhooks_page(request, session, principal, team, secret=secret)
    flash(request, f"Saved the {kind} webhook.")
    return redirect(request, f"/teams/{team.id}/webhooks" if team else "/admin/webhooks")


@router.get("/teams/{team_id}/webhooks", response_class=HTMLResponse)
def team_webhooks(
    request: Request, team: TeamForLead, session: SessionDep, principal: CurrentPrincipal
) -> Response:
    return _webhooks_page(request, session, principal, team)


@router.post("/teams/{team_id}/webhooks")
def set_team_webhook(
    request: Request,
    team: TeamForLead,
    session: SessionDep,
    principal: CurrentPrincipal,
    settings: SettingsDep,
    values: FormDep,
) -> Response:
    return _save_webhook(request, session, principal, settings, team, values)


@router.post("/teams/{team_id}/webhooks/{kind}/delete")
def delete_team_webhook(
    request: Request, team: TeamForLead, kind: str, session: SessionDep, principal: CurrentPrincipal
) -> Response:
    notifications.delete_webhook(session, actor=principal.user, team_id=team.id, kind=kind)
    flash(request, f"Removed the {kind} webhook.")
    return redirect(request, f"/teams/{team.id}/webhooks")


@router.post("/teams/{team_id}/webhooks/{kind}/test")
def test_team_webhook(
    request: Request, team: TeamForLead, kind: str, session: SessionDep, principal: CurrentPrincipal
) -> Response:
    return _send_test(request, session, principal, team.id, kind)


def _send_test(
    request: Request, session: Session, principal: Principal, team_id: int | None, kind: str
) -> Response:
    delivery = notifications.send_test(session, actor=principal.user, team_id=team_id, kind=kind)
    said = f"Test message queued (delivery #{delivery}): it goes out within seconds"
    flash(request, said + (" (Deliveries shows how it went)." if principal.is_admin else "."))
    return redirect(request, f"/teams/{team_id}/webhooks" if team_id else "/admin/webhooks")


@router.get("/admin/webhooks", response_class=HTMLResponse)
def org_webhooks(request: Request, session: SessionDep, principal: AdminPrincipal) -> Response:
    return _webhooks_page(request, session, principal, None)


@router.post("/admin/webhooks")
def set_org_webhook(
    request: Request,
    session: SessionDep,
    principal: AdminPrincipal,
    settings: SettingsDep,
    values: FormDep,
) -> Response:
    return _save_webhook(request, session, principal, settings, None, values)


@router.post("/admin/webhooks/{kind}/test")
def test_org_webhook(
    request: Request, kind: str, session: SessionDep, principal: AdminPrincipal
) -> Response:
    return _send_test(request, session, principal, None, kind)


@router.post("/admin/webhooks/{kind}/delete")
def delete_org_webhook(
    request: Request, kind: str, session: SessionDep, principal: AdminPrincipal
) -> Response:
    notifications.delete_webhook(session, actor=principal.user, team_id=None, kind=kind)
    flash(request, f"Removed the org's {kind} webhook.")
    return redirect(request, "/admin/webhooks")


# Deliveries: what went out, what is retried, what was given up (admins) ------------------


@router.get("/admin/deliveries", response_class=HTMLResponse)
def deliveries_page(
    request: Request, session: SessionDep, principal: AdminPrincipal, portal: PortalDep
) -> Response:
    return render(
        request,
        "notifications/deliveries.html",
        {
            "principal": principal,
            "counts": notifications.delivery_counts(session),
            "troubled": notifications.troubled(session),
            "smtp_problem": portal.smtp_problem(),
            "settings": portal.settings,
        },
    )


@router.post("/admin/deliveries/{delivery_id}/retry")
def retry_delivery(
    request: Request, delivery_id: Id, session: SessionDep, principal: AdminPrincipal
) -> Response:
    notifications.retry(session, delivery_id)
    flash(request, f"Delivery #{delivery_id} will be tried again now.")
    return redirect(request, "/admin/deliveries")
