"""Request-scoped dependencies: the unit of work, the caller, CSRF."""

from __future__ import annotations

import hmac
import secrets
from collections.abc import Iterator
from typing import Annotated

from fastapi import Depends, Request
from sqlalchemy.orm import Session

from app.auth.principal import Principal, principal_for
from app.config import Settings
from app.db import unit_of_work
from app.errors import Forbidden
from app.models import User
from app.provisioning.backend import ClusterBackend
from app.teams import repository as team_repo
from app.usage.service import UsageCache

CSRF_HEADER = "X-CSRF-Token"
CSRF_FIELD = "csrf_token"
SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})


class NotAuthenticated(Exception):
    """No signed-in user: pages redirect to sign-in, the API answers 401."""


def get_session(request: Request) -> Iterator[Session]:
    """One unit of work per request: commit after the handler, roll back on error."""
    with unit_of_work(request.app.state.session_factory) as session:
        yield session


SessionDep = Annotated[Session, Depends(get_session, scope="function")]


def get_settings_dep(request: Request) -> Settings:
    settings: Settings = request.app.state.settings
    return settings


SettingsDep = Annotated[Settings, Depends(get_settings_dep)]


def get_backend(request: Request) -> ClusterBackend:
    backend: ClusterBackend = request.app.state.backend
    return backend


BackendDep = Annotated[ClusterBackend, Depends(get_backend)]


def get_usage_cache(request: Request) -> UsageCache:
    cache: UsageCache = request.app.state.usage_cache
    return cache


UsageDep = Annotated[UsageCache, Depends(get_usage_cache)]


def csrf_token(request: Request) -> str:
    token = request.session.get("csrf")
    if not isinstance(token, str):
        token = secrets.token_urlsafe(32)
        request.session["csrf"] = token
    return token


async def csrf_protect(request: Request) -> None:
    """Refuse every unsafe request that does not carry this session's CSRF token."""
    if request.method in SAFE_METHODS:
        return
    expected = request.session.get("csrf")
    sent = request.headers.get(CSRF_HEADER)
    if sent is None:
        content_type = request.headers.get("content-type", "")
        if content_type.startswith(("application/x-www-form-urlencoded", "multipart/form-data")):
            form = await request.form()
            value = form.get(CSRF_FIELD)
            sent = value if isinstance(value, str) else None
    if not expected or not sent or not hmac.compare_digest(str(expected), sent):
        raise Forbidden(
            "the form's security token is missing or out of date: reload the page and try again"
        )


def get_principal_optional(request: Request, session: SessionDep) -> Principal | None:
    user_id = request.session.get("user_id")
    if not isinstance(user_id, int):
        return None
    user = session.get(User, user_id)
    if user is None:
        request.session.clear()
        return None
    memberships = [(m.team_id, m.role) for m in team_repo.get_memberships(session, user.id)]
    return principal_for(user, memberships)


def get_principal(
    principal: Annotated[Principal | None, Depends(get_principal_optional)],
) -> Principal:
    if principal is None:
        raise NotAuthenticated
    return principal


def get_admin(principal: Annotated[Principal, Depends(get_principal)]) -> Principal:
    principal.require_admin()
    return principal


MaybePrincipal = Annotated[Principal | None, Depends(get_principal_optional)]
CurrentPrincipal = Annotated[Principal, Depends(get_principal)]
AdminPrincipal = Annotated[Principal, Depends(get_admin)]


async def read_form(request: Request) -> dict[str, str]:
    """The submitted form's text fields, read on the event loop so handlers can stay sync."""
    form = await request.form()
    return {k: v for k, v in form.items() if isinstance(v, str)}


FormDep = Annotated[dict[str, str], Depends(read_form)]
