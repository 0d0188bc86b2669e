"""Sign-in (single sign-on, and the development sign-in when enabled) and sign-out."""

from __future__ import annotations

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response

from app.auth import repository as auth_repo
from app.auth import service as auth_service
from app.auth import sessions
from app.auth.provider import IdentityProvider, ProviderError
from app.core.config import Settings
from app.core.errors import Forbidden, InvalidInput
from app.core.models import User
from app.runtime import portal_of
from app.web.deps import FormDep, MaybePrincipal, SessionDep, SettingsDep, csrf_token
from app.web.templating import render

router = APIRouter(include_in_schema=False)


def _safe_next(url: str | None) -> str:
    # Only local paths: never an open redirect.
    if url and url.startswith("/") and not url.startswith("//") and "\\" not in url:
        return url
    return "/"


def _oidc(request: Request) -> IdentityProvider:
    client: IdentityProvider | None = portal_of(request.app).oidc
    if client is None:
        raise Forbidden("single sign-on is not configured: set PORTAL_OIDC_ISSUER and friends")
    return client


def _callback_url(request: Request, settings: Settings) -> str:
    if settings.public_url:
        return settings.public_url.rstrip("/") + "/auth/callback"
    return str(request.url_for("oidc_callback"))


def _establish(
    request: Request, session: SessionDep, settings: Settings, user: User, method: str
) -> None:
    """A fresh session at sign-in: nothing from before survives (no fixation)."""
    old = request.session.get("sid")
    if isinstance(old, str):
        sessions.end(session, old)
    request.session.clear()
    request.session["sid"] = sessions.start(session, user=user, method=method, settings=settings)
    csrf_token(request)


@router.get("/login", response_class=HTMLResponse)
def login_page(
    request: Request,
    session: SessionDep,
    settings: SettingsDep,
    principal: MaybePrincipal,
    next: str = "/",
) -> Response:
    users = auth_repo.get_sign_in_choices(session) if settings.development else []
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
        user = auth_service.sign_in_dev(
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
    _establish(request, session, settings, user, "development")
    return RedirectResponse(_safe_next(data.get("next")), status_code=303)


@router.get("/auth/start")
def oidc_start(
    request: Request,
    session: SessionDep,
    settings: SettingsDep,
    next: str = "/",
) -> Response:
    client = _oidc(request)
    try:
        begun = client.begin(_callback_url(request, settings))
    except ProviderError as exc:
        auth_service.record_failed_sign_in(session, reason=str(exc), method="oidc")
        return _failed(request, str(exc), status_code=502)
    request.session["oidc"] = {
        "state": begun.state,
        "nonce": begun.nonce,
        "verifier": begun.code_verifier,
        "next": _safe_next(next),
    }
    return RedirectResponse(begun.url, status_code=303)


@router.get("/auth/callback", name="oidc_callback")
def oidc_callback(
    request: Request,
    session: SessionDep,
    settings: SettingsDep,
    code: str = "",
    state: str = "",
    error: str = "",
    error_description: str = "",
) -> Response:
    client = _oidc(request)
    pending = request.session.pop("oidc", None)
    reason: str | None = None
    if error:
        reason = f"the identity provider said {error}: {error_description or 'no details'}"
    elif not isinstance(pending, dict) or not state or state != pending.get("state"):
        reason = "the sign-in's state does not match this browser's (a stale or forged link)"
    elif not code:
        reason = "the identity provider sent no authorization code"
    if reason is not None:
        auth_service.record_failed_sign_in(session, reason=reason, method="oidc")
        return _failed(request, reason)
    assert isinstance(pending, dict)
    try:
        claims = client.finish(
            code=code,
            redirect_uri=_callback_url(request, settings),
            code_verifier=str(pending["verifier"]),
            nonce=str(pending["nonce"]),
        )
    except ProviderError as exc:
        auth_service.record_failed_sign_in(session, reason=str(exc), method="oidc")
        return _failed(request, str(exc))
    user = auth_service.sign_in_oidc(session, claims=claims, settings=settings)
    _establish(request, session, settings, user, "oidc")
    return RedirectResponse(str(pending.get("next") or "/"), status_code=303)


def _failed(request: Request, reason: str, *, status_code: int = 400) -> Response:
    return render(
        request,
        "auth/failed.html",
        {"reason": reason},
        status_code=status_code,
    )


@router.post("/logout")
def logout(request: Request, session: SessionDep, settings: SettingsDep) -> Response:
    sid = request.session.get("sid")
    if isinstance(sid, str):
        sessions.end(session, sid)
    request.session.clear()
    client: IdentityProvider | None = portal_of(request.app).oidc
    if client is not None:
        base = (
            settings.public_url.rstrip("/")
            if settings.public_url
            else str(request.base_url).rstrip("/")
        )
        target = client.end_session_url(base + "/login")
        if target:
            return RedirectResponse(target, status_code=303)
    return RedirectResponse("/login", status_code=303)
