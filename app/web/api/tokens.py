"""API: personal API tokens."""

from __future__ import annotations

from fastapi import APIRouter, Request, Response

from app.auth import tokens
from app.core.errors import Forbidden
from app.web.deps import CurrentPrincipal, Id, SessionDep, SettingsDep, bearer_token
from app.web.paging import PAGED, WindowDep, announce
from app.web.schemas import PROBLEMS, NewTokenOut, TokenIn, TokenOut
from app.web.views.api import token_out

router = APIRouter(prefix="/api/v1", tags=["tokens"], responses=PROBLEMS)


@router.get("/tokens", response_model=list[TokenOut], responses=PAGED)
def list_tokens(
    request: Request,
    response: Response,
    session: SessionDep,
    principal: CurrentPrincipal,
    window: WindowDep,
) -> list[TokenOut]:
    """Your API tokens (never their secrets); paged (`limit`, `offset`)."""
    everyone = tokens.get_all(session, user=principal.user)
    shown = window.of(everyone)
    announce(request, response, window, returned=len(shown), total=len(everyone))
    return [token_out(t) for t in shown]


@router.post("/tokens", response_model=NewTokenOut, status_code=201)
def create_token(
    request: Request,
    body: TokenIn,
    session: SessionDep,
    principal: CurrentPrincipal,
    settings: SettingsDep,
) -> NewTokenOut:
    """Create a token that acts with your rights; the secret is in this answer only. Only
    a signed-in browser session makes tokens: a token made with a bearer token would
    outlive its parent's revocation."""
    if bearer_token(request) is not None:
        raise Forbidden(
            "API tokens are made from a signed-in session (the API tokens page), not with "
            "a bearer token: a token made with another would outlive its revocation"
        )
    created = tokens.create(
        session,
        user=principal.user,
        name=body.name,
        days=body.days,
        max_days=settings.api_token_max_days,
    )
    return NewTokenOut(**token_out(created.token).model_dump(), token=created.raw)


@router.delete("/tokens/{token_id}", response_model=TokenOut)
def revoke_token(token_id: Id, session: SessionDep, principal: CurrentPrincipal) -> TokenOut:
    return token_out(tokens.revoke(session, user=principal.user, token_id=token_id))
