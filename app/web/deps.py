"""Request-scoped dependencies: the unit of work, the caller, CSRF."""

from __future__ import annotations

import hmac
import secrets
from collections.abc import AsyncIterator, Sequence
from functools import partial
from typing import Annotated, Any, cast

from anyio import CancelScope, CapacityLimiter, to_thread
from fastapi import Depends, Path, Query, Request
from pydantic import BeforeValidator, Field
from sqlalchemy.orm import Session
from starlette.concurrency import run_in_threadpool

from app.adapters.factory import Cluster
from app.auth import repository as auth_repo
from app.auth import service as auth_service
from app.auth import sessions
from app.auth import tokens as api_tokens
from app.auth.principal import Principal, principal_for
from app.auth.provider import IdentityProvider, ProviderError
from app.auth.secrets import digest
from app.core.config import Settings
from app.core.db import ends_quietly, finish
from app.core.errors import Forbidden, Unavailable
from app.core.models import Team, User
from app.core.quantities import DB_INT_MAX
from app.core.together import Read, read_all
from app.runtime import Portal, portal_of
from app.teams import repository as team_repo
from app.usage.service import UsageCache

ID_HELP = f"A whole number from 1 to {DB_INT_MAX}."


def _digits(value: object) -> object:
    """An id is written in digits only: "1.0", " 1", "+1" and "1_0" are not ids (read as 1
    or 10 by a lax parse, they would name another object than the one written)."""
    if isinstance(value, str) and not (value.isascii() and value.isdigit()):
        raise ValueError("write the id in digits only, e.g. 12")
    if isinstance(value, bool | float):
        raise ValueError("write the id in digits only, e.g. 12")
    return value


def _blank_is_none(value: object) -> object:
    """An empty form field (a filter's "all" option) means no value."""
    return None if value == "" else _digits(value)


# Ids in paths and queries: bounded by what the database's integer columns hold, so an id
# out of range is a clear 422 instead of a database error.
Id = Annotated[int, BeforeValidator(_digits), Path(ge=1, le=DB_INT_MAX, description=ID_HELP)]
OptionalIdQuery = Annotated[
    Annotated[int, Field(ge=1, le=DB_INT_MAX)] | None,
    BeforeValidator(_blank_is_none),
    Query(description=ID_HELP),
]
# Page numbers of the pages' lists: past the last page shows the last page, and a number
# no list reaches is read as that bound (not an offset the database cannot hold).
PAGE_MAX = 1_000_000


def page_number(page: int) -> int:
    return max(1, min(page, PAGE_MAX))


# The what-if page sends four fields per team: room for 5,000 teams (Starlette's default
# is 1,000 fields, which a 250-team org would already exceed).
MAX_FORM_FIELDS = 20_010

CSRF_HEADER = "X-CSRF-Token"
CSRF_FIELD = "csrf_token"
SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})


class NotAuthenticated(Exception):
    """No signed-in user: pages redirect to sign-in, the API answers 401."""

    def __init__(self, message: str = "sign in first") -> None:
        super().__init__(message)
        self.message = message


def bearer_token(request: Request) -> str | None:
    header = request.headers.get("Authorization", "")
    scheme, _, value = header.partition(" ")
    if scheme.lower() == "bearer" and value.strip():
        return value.strip()
    return None


async def get_session(request: Request) -> AsyncIterator[Session]:
    """One unit of work per request: commit after the handler, roll back on error. Safe
    methods read without a transaction's round trips (PostgreSQL). Opening a session does
    no I/O, so it happens on the event loop; so does ending a read with nothing to write
    (autocommit: closing only returns the connection). Any other ending (commit,
    rollback, returning the connection) runs on a thread, shielded from cancellation and
    outside the thread pool's limit (a full pool must not keep a connection from coming
    back)."""
    state = portal_of(request.app)
    safe = request.method in ("GET", "HEAD")
    session = (state.read_session_factory if safe else state.session_factory)()
    succeeded = False
    try:
        yield session
        succeeded = True
    finally:
        if succeeded and ends_quietly(session):
            session.close()  # an autocommit read with nothing to write: no I/O, no thread
        else:
            with CancelScope(shield=True):
                end = partial(finish, session, commit=succeeded)
                await to_thread.run_sync(end, limiter=CapacityLimiter(1))


SessionDep = Annotated[Session, Depends(get_session, scope="function")]

# Dependencies that only read the app's state are coroutines: FastAPI runs a plain
# function dependency on the thread pool, a thread hop per dependency per request.


async def get_portal(request: Request) -> Portal:
    """The process's parts (settings, backend, caches, workers): the one way a handler
    reaches them."""
    return portal_of(request.app)


PortalDep = Annotated[Portal, Depends(get_portal)]


async def get_settings_dep(portal: PortalDep) -> Settings:
    return portal.settings


SettingsDep = Annotated[Settings, Depends(get_settings_dep)]


async def get_backend(portal: PortalDep) -> Cluster:
    return portal.backend


BackendDep = Annotated[Cluster, Depends(get_backend)]


async def get_usage_cache(portal: PortalDep) -> UsageCache:
    return portal.usage_cache


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
    if bearer_token(request) is not None and request.url.path.startswith("/api/"):
        # A bearer token is never sent by a browser on its own: no CSRF to guard against.
        # Only the API acts as the bearer; a page (sign-in, sign-out) acts on the cookie.
        return
    if request.url.path.startswith("/api/") and not isinstance(request.session.get("sid"), str):
        # Nobody is signed in: say so (401) rather than complain about a missing token.
        raise NotAuthenticated
    expected = request.session.get("csrf")
    sent = request.headers.get(CSRF_HEADER)
    if sent is None:
        content_type = request.headers.get("content-type", "")
        if content_type.startswith(("application/x-www-form-urlencoded", "multipart/form-data")):
            form = await request.form(max_fields=MAX_FORM_FIELDS)
            value = form.get(CSRF_FIELD)
            sent = value if isinstance(value, str) else None
    if not expected or not sent or not hmac.compare_digest(str(expected), sent):
        raise Forbidden(
            "the form's security token is missing or out of date: reload the page and try again"
        )


# Who is asking, once resolved for a request (None: nobody signed in): kept in the
# request's own ASGI scope, made afresh for every request.
_PRINCIPAL = "portal.principal"
_UNRESOLVED = object()


async def get_principal_optional(
    request: Request, session: SessionDep, settings: SettingsDep
) -> Principal | None:
    """Who is asking, looked up on a thread unless a dependency already did so for this
    request (the team in the path: see ``team_for_viewer``)."""
    resolved = request.scope.get(_PRINCIPAL, _UNRESOLVED)
    if resolved is not _UNRESOLVED:
        return cast(Principal | None, resolved)
    return await run_in_threadpool(who_is_asking, request, session, settings)


def who_is_asking(request: Request, session: Session, settings: Settings) -> Principal | None:
    """Who is asking, resolved once per request and kept on it: a dependency that needs
    the database on a thread anyway (the team in the path) resolves the caller on the same
    thread, and the handler's own ``principal`` then costs no thread hop of its own (each
    hop costs CPU and a wait for the interpreter lock under load)."""
    resolved = request.scope.get(_PRINCIPAL, _UNRESOLVED)
    if resolved is _UNRESOLVED:
        resolved = request.scope[_PRINCIPAL] = _resolve(request, session, settings)
    return cast(Principal | None, resolved)


def page_principal(request: Request) -> Principal | None:
    """Who sees an error page, for its navigation: looked up anew from the browser's
    session (the request's own session was rolled back with what it had read); None when
    unknown. Never raises: the error being shown is the answer."""
    if bearer_token(request) is not None or not isinstance(request.session.get("sid"), str):
        return None
    state = portal_of(request.app)
    try:
        with state.session_factory() as session:
            return _resolve(request, session, state.settings)  # closed, not committed
    except Exception:  # the database is what failed: the page shows without navigation
        return None


def _resolve(request: Request, session: Session, settings: Settings) -> Principal | None:
    """Who is asking: a bearer token (API token or the provider's access token) when one
    is sent, else the browser's session."""
    token = bearer_token(request)
    if token is not None:
        user = _bearer_user(request, session, settings, token)
        memberships = [(m.team_id, m.role) for m in auth_repo.get_memberships(session, user.id)]
        return principal_for(user, memberships)
    sid = request.session.get("sid")
    if not isinstance(sid, str):
        return None
    found = auth_repo.get_signed_in(session, digest(sid))
    return _judged(request, session, settings, found)


def _judged(
    request: Request, session: Session, settings: Settings, found: auth_repo.SignedIn | None
) -> Principal | None:
    """The browser session's caller, if the session is still open (else the cookie is
    cleared)."""
    signed_in = sessions.still_valid(session, found, settings=settings)
    if signed_in is None:
        request.session.clear()
        return None
    return principal_for(*signed_in)


def _caller_read(request: Request) -> Read[auth_repo.SignedIn | None] | None:
    """The read of the browser session's caller, to run with a page's own reads; None
    when the caller is known already, asks with a bearer token or has no session."""
    if _PRINCIPAL in request.scope or bearer_token(request) is not None:
        return None
    sid = request.session.get("sid")
    return sessions.lookup(sid) if isinstance(sid, str) else None


def _bearer_user(request: Request, session: Session, settings: Settings, token: str) -> User:
    if token.startswith(api_tokens.PREFIX):
        user = api_tokens.authenticate(session, token)
        if user is None:
            raise NotAuthenticated("the API token is unknown, revoked or expired")
        return user
    client: IdentityProvider | None = portal_of(request.app).oidc
    if client is None:
        raise NotAuthenticated("bearer tokens need an API token (gpp_…) or single sign-on")
    try:
        claims = client.verify_access_token(token)
    except ProviderError as exc:
        if exc.unavailable:
            raise Unavailable(f"the access token could not be checked: {exc}") from exc
        raise NotAuthenticated(f"the access token was refused: {exc}") from exc
    return auth_service.sign_in_oidc(session, claims=claims, settings=settings, method="bearer")


async def get_principal(
    principal: Annotated[Principal | None, Depends(get_principal_optional)],
) -> Principal:
    if principal is None:
        raise NotAuthenticated
    return principal


async def get_admin(principal: Annotated[Principal, Depends(get_principal)]) -> Principal:
    principal.require_admin()
    return principal


MaybePrincipal = Annotated[Principal | None, Depends(get_principal_optional)]
CurrentPrincipal = Annotated[Principal, Depends(get_principal)]
AdminPrincipal = Annotated[Principal, Depends(get_admin)]


def _signed_in(request: Request, session: Session, settings: Settings) -> Principal:
    principal = who_is_asking(request, session, settings)
    if principal is None:
        raise NotAuthenticated
    return principal


# The team in the path and its caller are read on one thread: a handler that also takes
# ``CurrentPrincipal`` (and declares the team first) gets the caller already resolved.


def team_for_viewer(
    team_id: Id, request: Request, session: SessionDep, settings: SettingsDep
) -> Team:
    """The team in the path, if the caller may see it (else 404, as for a missing team)."""
    return viewed_team(team_id, request, session, settings)[0]


def viewed_team(
    team_id: int, request: Request, session: Session, settings: Settings
) -> tuple[Team, Principal]:
    """The team in the path and its caller, if the caller may see it (else 404): for a
    handler that reads them on its own thread (the team page and its polls, which would
    otherwise take one hop for these and another for the page). The caller and the team
    are read in one statement (PostgreSQL)."""
    team, principal, _ = viewed_team_reading(team_id, request, session, settings, ())
    return team, principal


def signed_in_reading(
    request: Request, session: Session, settings: Settings, reads: Sequence[Read[Any]]
) -> tuple[Principal, tuple[Any, ...]]:
    """The caller (401 without one) and a page's ``reads``, in one statement with the
    caller's session lookup (PostgreSQL). Their values are the caller's to judge: the
    page shows them only once the caller may see them."""
    caller = _caller_read(request)
    if caller is None:
        return _signed_in(request, session, settings), read_all(session, reads)
    signed_in, *values = read_all(session, (caller, *reads))
    principal = request.scope[_PRINCIPAL] = _judged(request, session, settings, signed_in)
    if principal is None:
        raise NotAuthenticated
    return principal, tuple(values)


def viewed_team_reading(
    team_id: int,
    request: Request,
    session: Session,
    settings: Settings,
    reads: Sequence[Read[Any]],
) -> tuple[Team, Principal, tuple[Any, ...]]:
    """``viewed_team``, and the page's own ``reads`` in the same statement as the caller
    and the team (on PostgreSQL the team page is one round trip). The reads' values are
    returned only once the caller may see the team: a caller who may not gets the same
    401 or 404 as from ``viewed_team``."""
    team_read, steps_read = team_repo.team_for_pages(team_id)
    principal, (found, steps, *values) = signed_in_reading(
        request, session, settings, (team_read, steps_read, *reads)
    )
    team = team_repo.attach_for_pages(session, team_id, found, steps)
    principal.require_view(team)
    return team, principal, tuple(values)


def admin_reading(
    request: Request, session: Session, settings: Settings, reads: Sequence[Read[Any]]
) -> tuple[Principal, tuple[Any, ...]]:
    """The caller, if an admin, and the page's ``reads`` in the same statement as the
    caller (for a handler that reads them on its own thread)."""
    principal, values = signed_in_reading(request, session, settings, reads)
    principal.require_admin()
    return principal, values


def team_for_lead(
    team_id: Id, request: Request, session: SessionDep, settings: SettingsDep
) -> Team:
    """The team in the path, if the caller leads it or is an admin (403 for its members)."""
    principal = _signed_in(request, session, settings)
    team = team_repo.get_team(session, team_id)
    principal.require_lead(team)
    return team


TeamForViewer = Annotated[Team, Depends(team_for_viewer)]
TeamForLead = Annotated[Team, Depends(team_for_lead)]


async def read_form(request: Request) -> dict[str, str]:
    """The submitted form's text fields, read on the event loop so handlers can stay sync."""
    form = await request.form(max_fields=MAX_FORM_FIELDS)
    return {k: v for k, v in form.items() if isinstance(v, str)}


FormDep = Annotated[dict[str, str], Depends(read_form)]
