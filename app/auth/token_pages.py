"""Personal API tokens: pages and API."""

from __future__ import annotations

from datetime import datetime

from fastapi import APIRouter, Request, Response
from fastapi.responses import HTMLResponse
from pydantic import BaseModel, ConfigDict, Field

from app.auth import tokens
from app.errors import InvalidInput
from app.models import ApiToken
from app.teams.schemas import PROBLEMS
from app.web.deps import CurrentPrincipal, FormDep, SessionDep, SettingsDep
from app.web.templating import flash, redirect, render

pages = APIRouter(include_in_schema=False)
api = APIRouter(prefix="/api/v1", tags=["tokens"], responses=PROBLEMS)


class TokenIn(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: str = Field(description="What the token is for, e.g. ci-pipeline.")
    days: int = Field(default=30, description="Lifetime in days.")


class TokenOut(BaseModel):
    id: int
    name: str
    prefix: str
    created_at: datetime
    expires_at: datetime
    last_used_at: datetime | None
    revoked: bool


class NewTokenOut(TokenOut):
    token: str = Field(description="The secret: shown this once, never again.")


def token_out(token: ApiToken) -> TokenOut:
    return TokenOut(
        id=token.id,
        name=token.name,
        prefix=token.prefix,
        created_at=token.created_at,
        expires_at=token.expires_at,
        last_used_at=token.last_used_at,
        revoked=token.revoked_at is not None,
    )


@pages.get("/tokens", response_class=HTMLResponse)
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


@pages.post("/tokens", response_class=HTMLResponse)
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


@pages.post("/tokens/{token_id}/revoke")
def revoke_token_page(
    request: Request, token_id: int, session: SessionDep, principal: CurrentPrincipal
) -> Response:
    token = tokens.revoke(session, user=principal.user, token_id=token_id)
    flash(request, f"Token {token.name} revoked.")
    return redirect(request, "/tokens")


@api.get("/tokens", response_model=list[TokenOut])
def list_tokens(session: SessionDep, principal: CurrentPrincipal) -> list[TokenOut]:
    """Your API tokens (never their secrets)."""
    return [token_out(t) for t in tokens.get_all(session, user=principal.user)]


@api.post("/tokens", response_model=NewTokenOut, status_code=201)
def create_token(
    body: TokenIn, session: SessionDep, principal: CurrentPrincipal, settings: SettingsDep
) -> NewTokenOut:
    """Create a token that acts with your rights; the secret is in this answer only."""
    created = tokens.create(
        session,
        user=principal.user,
        name=body.name,
        days=body.days,
        max_days=settings.api_token_max_days,
    )
    return NewTokenOut(**token_out(created.token).model_dump(), token=created.raw)


@api.delete("/tokens/{token_id}", response_model=TokenOut)
def revoke_token(token_id: int, session: SessionDep, principal: CurrentPrincipal) -> TokenOut:
    return token_out(tokens.revoke(session, user=principal.user, token_id=token_id))
