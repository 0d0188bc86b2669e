"""Pages: personal API tokens."""

from __future__ import annotations

from fastapi import APIRouter, Request, Response
from fastapi.responses import HTMLResponse

from app.auth import tokens
from app.core.errors import InvalidInput
from app.web.deps import CurrentPrincipal, FormDep, Id, SessionDep, SettingsDep
from app.web.templating import flash, redirect, render

router = APIRouter(include_in_schema=False)


@router.get("/tokens", response_class=HTMLResponse)
def tokens_page(request: Request, session: SessionDep, principal: CurrentPrincipal) -> Response:
    return render(
        request,
        "auth/tokens.html",
        {
            "principal": principal,
            "tokens": tokens.get_all(session, user=principal.user),
            "errors": {},
            "values": {"days": "30"},
            "created": None,
        },
    )


@router.post("/tokens", response_class=HTMLResponse)
def create_token_page(
    request: Request,
    session: SessionDep,
    principal: CurrentPrincipal,
    settings: SettingsDep,
    data: FormDep,
) -> Response:
    errors: dict[str, str] = {}
    created = None
    try:
        days = int(data.get("days") or "0")
    except ValueError:
        days = 0
    try:
        created = tokens.create(
            session,
            user=principal.user,
            name=data.get("name", ""),
            days=days,
            max_days=settings.api_token_max_days,
        )
    except InvalidInput as exc:
        errors = exc.errors
    return render(
        request,
        "auth/tokens.html",
        {
            "principal": principal,
            "tokens": tokens.get_all(session, user=principal.user),
            "errors": errors,
            "values": data,
            "created": created,
        },
        status_code=422 if errors else 200,
        headers={"Cache-Control": "no-store"},
    )


@router.post("/tokens/{token_id}/revoke")
def revoke_token_page(
    request: Request, token_id: Id, session: SessionDep, principal: CurrentPrincipal
) -> Response:
    token = tokens.revoke(session, user=principal.user, token_id=token_id)
    flash(request, f"Token {token.name} revoked.")
    return redirect(request, "/tokens")
