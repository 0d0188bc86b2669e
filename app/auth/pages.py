"""Sign-in and sign-out pages."""

from __future__ import annotations

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response
from sqlalchemy import select

from app.auth.service import sign_in_dev
from app.errors import Forbidden, InvalidInput
from app.models import User
from app.web.deps import FormDep, MaybePrincipal, SessionDep, SettingsDep, csrf_token
from app.web.templating import render

router = APIRouter(include_in_schema=False)


def _safe_next(url: str | None) -> str:
    # Only local paths: never an open redirect.
    if url and url.startswith("/") and not url.startswith("//") and "\\" not in url:
        return url
    return "/"


@router.get("/login", response_class=HTMLResponse)
def login_page(
    request: Request,
    session: SessionDep,
    settings: SettingsDep,
    principal: MaybePrincipal,
    next: str = "/",
) -> Response:
    users = (
        list(session.scalars(select(User).order_by(User.is_admin.desc(), User.email).limit(20)))
        if settings.development
        else []
    )
    return render(
        request,
        "auth/login.html",
        {"principal": principal, "users": users, "next": _safe_next(next), "errors": {}},
    )


@router.post("/login/dev")
def login_dev(
    request: Request, session: SessionDep, settings: SettingsDep, data: FormDep
) -> Response:
    if not settings.development:
        raise Forbidden("the development sign-in is off: sign in through your identity provider")
    try:
        user = sign_in_dev(
            session,
            email=data.get("email", ""),
            name=data.get("name", ""),
            admin=data.get("role") == "admin",
        )
    except InvalidInput as exc:
        return render(
            request,
            "auth/login.html",
            {"users": [], "next": "/", "errors": exc.errors, "values": data},
            status_code=422,
        )
    # A new session at sign-in: nothing from before survives (no fixation).
    request.session.clear()
    request.session["user_id"] = user.id
    csrf_token(request)
    return RedirectResponse(_safe_next(data.get("next")), status_code=303)


@router.post("/logout")
def logout(request: Request) -> Response:
    request.session.clear()
    return RedirectResponse("/login", status_code=303)
