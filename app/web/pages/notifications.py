"""Pages: the notification bell and its list."""

from __future__ import annotations

from fastapi import APIRouter, Request, Response
from fastapi.responses import HTMLResponse

from app.notifications import service as notifications
from app.web.deps import CurrentPrincipal, SessionDep
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
