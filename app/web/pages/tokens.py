"""Pages: personal API tokens."""

from __future__ import annotations

from fastapi import APIRouter, Request, Response
from fastapi.responses import HTMLResponse

from app.auth import tokens
from app.core.errors import InvalidInput
from app.web.deps import CurrentPrincipal, FormDep, Id, SessionDep, SettingsDep
from app.web.templating import flash, redirect, render, stash_secret, take_secret

router = APIRouter(include_in_schema=False)


@router.get("/tokens", response_class=HTMLResponse)
def tokens_page(request: Request, session: SessionDep, principal: CurrentPrincipal) -> Response:
    listed = tokens.get_all(session, user=principal.user)
    created = None
    revealed = take_secret(request, "api-token")
    if revealed is not None:
        token_id, _, raw = revealed.partition(":")
        token = next((t for t in listed if str(t.id) == token_id), None)
        created = tokens.NewToken(token, raw) if token is not None else None
    return render(
        request,
        "auth/tokens.html",
        {
            "principal": principal,
            "tokens": listed,
            "errors": {},
            "values": {"days": "30"},
            "created": created,
        },
        headers={"Cache-Control": "no-store"},
    )


@router.post("/tokens", response_class=HTMLResponse)
def create_token_page(
    request: Request,
    session: SessionDep,
    principal: CurrentPrincipal,
    settings: SettingsDep,
    data: FormDep,
) -> Response:
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
        return render(
            request,
            "auth/tokens.html",
            {
                "principal": principal,
                "tokens": tokens.get_all(session, user=principal.user),
                "errors": exc.errors,
                "values": data,
                "created": None,
            },
            status_code=422,
        )
    # Post/redirect/get: reloading the page that shows the secret creates nothing more,
    # and shows the secret no more.
    stash_secret(request, "api-token", f"{created.token.id}:{created.raw}")
    return redirect(request, "/tokens")


@router.post("/tokens/{token_id}/revoke")
def revoke_token_page(
    request: Request, token_id: Id, session: SessionDep, principal: CurrentPrincipal
) -> Response:
    token = tokens.revoke(session, user=principal.user, token_id=token_id)
    flash(request, f"Token {token.name} revoked.")
    return redirect(request, "/tokens")
