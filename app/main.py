"""The FastAPI application: wiring only. Engines, clients and workers start in lifespan."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from urllib.parse import quote, urlsplit

from fastapi import Depends, FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, RedirectResponse, Response
from starlette.concurrency import run_in_threadpool
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.middleware.sessions import SessionMiddleware
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from app.core import logs
from app.core.config import Settings, get_settings
from app.core.errors import DomainError, InvalidInput
from app.runtime import Portal, serve_roles
from app.web import observability
from app.web.api import audit as audit_api
from app.web.api import catalog as catalog_api
from app.web.api import grants as grants_api
from app.web.api import me as me_api
from app.web.api import notifications as notifications_api
from app.web.api import pool as pool_api
from app.web.api import requests as requests_api
from app.web.api import teams as teams_api
from app.web.api import tokens as tokens_api
from app.web.api import usage as usage_api
from app.web.api import workloads as workloads_api
from app.web.assets import ASSETS
from app.web.deps import NotAuthenticated, csrf_protect, page_principal
from app.web.limits import SESSION_COOKIE, BodyLimit
from app.web.pages import admin as admin_pages
from app.web.pages import audit as audit_pages
from app.web.pages import auth as auth_pages
from app.web.pages import catalog as catalog_pages
from app.web.pages import docs as docs_pages
from app.web.pages import grants as grant_pages
from app.web.pages import notifications as notification_pages
from app.web.pages import pools as pool_pages
from app.web.pages import teams as team_pages
from app.web.pages import tokens as token_pages
from app.web.pages import usage as usage_pages
from app.web.templating import is_htmx, render, templates

log = logging.getLogger(__name__)


def security_headers(settings: Settings) -> list[tuple[bytes, bytes]]:
    # Sign-out is a form whose answer redirects to the provider's end-session page:
    # form-action must allow the provider's origin for that redirect.
    form_action = "'self'"
    if settings.oidc_issuer:
        parts = urlsplit(settings.oidc_issuer)
        form_action += f" {parts.scheme}://{parts.netloc}"
    csp = (
        "default-src 'self'; img-src 'self' data:; style-src 'self'; script-src 'self'; "
        f"frame-ancestors 'none'; form-action {form_action}"
    )
    return [
        (b"x-content-type-options", b"nosniff"),
        (b"x-frame-options", b"DENY"),
        (b"referrer-policy", b"same-origin"),
        (b"content-security-policy", csp.encode()),
    ]


class SecurityHeaders:
    """Adds the same protective headers to every response."""

    def __init__(self, app: ASGIApp, headers: list[tuple[bytes, bytes]]) -> None:
        self.app = app
        self.headers = headers

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        extra = list(self.headers)
        if scope.get("scheme") == "https":
            # Served over https (directly, or behind a proxy whose X-Forwarded-Proto
            # uvicorn trusts): browsers should never try plain http again.
            extra.append((b"strict-transport-security", b"max-age=31536000; includeSubDomains"))
        if str(scope.get("path", "")).startswith("/api/"):
            # Every API answer is about its caller: never stored by a shared cache.
            extra.append((b"cache-control", b"no-store"))

        async def send_with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = list(message.get("headers", []))
                present = {k.lower() for k, _ in headers}
                headers += [(k, v) for k, v in extra if k not in present]
                message["headers"] = headers
            await send(message)

        await self.app(scope, receive, send_with_headers)


# The app's route table: every router the portal serves. FastAPI tries them in this
# order, each router's routes one by one, for every request: the routers asked most often
# come first (an open team page polls its status, share and workloads; every page polls
# the bell), which made the routing of /api/v1/me a fraction of what it was. No two
# routers can match the same path (tests/web/test_routes.py), so the order changes
# nothing but the time it takes to find a route.
ROUTERS = tuple(
    module.router
    for module in (
        observability,
        me_api,
        team_pages,
        notification_pages,
        teams_api,
        admin_pages,
        pool_pages,
        grant_pages,
        usage_pages,
        usage_api,
        workloads_api,
        requests_api,
        grants_api,
        pool_api,
        notifications_api,
        audit_pages,
        audit_api,
        auth_pages,
        token_pages,
        tokens_api,
        catalog_pages,
        catalog_api,
        docs_pages,
    )
)


def serve_app() -> FastAPI:
    """What ``gpu-portal serve`` runs."""
    return create_app()


def create_app(settings: Settings | None = None) -> FastAPI:
    """The portal: its parts made from ``settings``, its routes, middleware and error pages."""
    settings = settings or get_settings()
    # Outside development the templates do not change: no file check per include (a
    # team page includes some twenty partials).
    templates.env.auto_reload = settings.reload_templates

    portal = Portal(settings, roles=serve_roles(settings))
    app = FastAPI(
        title="GPU cluster portal",
        version="0.1.0",
        description=(
            "Self-service isolated clusters (vCluster) on a shared GPU pool scheduled by "
            "KAI Scheduler. Unsafe methods need the session's CSRF token in `X-CSRF-Token`."
        ),
        lifespan=_lifespan(portal, settings),
        docs_url=None,  # served by app.web.pages.docs from the portal's own assets
        redoc_url=None,
        dependencies=[Depends(csrf_protect)],
    )
    app.state.portal = portal
    _add_middleware(app, settings)
    app.mount("/static", ASSETS, name="static")
    for router in ROUTERS:
        app.include_router(router)
    app.add_exception_handler(NotAuthenticated, _not_authenticated)  # type: ignore[arg-type]
    app.add_exception_handler(DomainError, _domain_error)  # type: ignore[arg-type]
    app.add_exception_handler(RequestValidationError, _invalid_request)  # type: ignore[arg-type]
    app.add_exception_handler(StarletteHTTPException, _http_error)  # type: ignore[arg-type]
    return app


def _lifespan(
    portal: Portal, settings: Settings
) -> Callable[[FastAPI], AbstractAsyncContextManager[None]]:
    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        logs.install()
        logs.register_secrets(settings.secret_values())
        portal.start()
        metrics_server = None
        if settings.metrics_port:
            from prometheus_client import start_http_server

            metrics_server, _ = start_http_server(
                settings.metrics_port, addr=settings.metrics_host, registry=portal.metrics_registry
            )
        try:
            yield
        finally:
            portal.stop()
            if metrics_server is not None:
                metrics_server.shutdown()

    return lifespan


def _add_middleware(app: FastAPI, settings: Settings) -> None:
    """The middleware, innermost first."""
    app.add_middleware(
        SessionMiddleware,
        secret_key=settings.secret_key.get_secret_value(),
        session_cookie=SESSION_COOKIE,
        max_age=settings.session_absolute_seconds,
        same_site="lax",
        https_only=not settings.development,
    )
    # Bodies bounded before the session, the CSRF check or any route reads them.
    app.add_middleware(BodyLimit)
    app.add_middleware(SecurityHeaders, headers=security_headers(settings))
    # Outermost: request ids, and the request metrics unless they are off.
    app.add_middleware(observability.RequestContext, count=settings.metrics_enabled)


def _wants_json(request: Request) -> bool:
    return request.url.path.startswith("/api/")


async def _not_authenticated(request: Request, exc: NotAuthenticated) -> Response:
    if _wants_json(request):
        return JSONResponse(
            {"detail": exc.message},
            status_code=401,
            headers={"WWW-Authenticate": 'Bearer realm="gpu-portal"'},
        )
    target = "/login?next=" + quote(request.url.path)
    if is_htmx(request):
        return Response(status_code=401, headers={"HX-Redirect": target})
    return RedirectResponse(target, status_code=303)


async def _error_page(
    request: Request, status: int, message: str, errors: dict[str, str] | None = None
) -> Response:
    """An error as a page, with the navigation of whoever is signed in."""
    principal = await run_in_threadpool(page_principal, request)
    return render(
        request,
        "error.html",
        {"message": message, "errors": errors or {}, "status": status, "principal": principal},
        status_code=status,
    )


async def _domain_error(request: Request, exc: DomainError) -> Response:
    errors = exc.errors if isinstance(exc, InvalidInput) else None
    if _wants_json(request):
        return JSONResponse({"detail": exc.message, "errors": errors}, status_code=exc.status_code)
    message = exc.message if errors is None else "Some of what was sent needs a change:"
    return await _error_page(request, exc.status_code, message, errors)


async def _http_error(request: Request, exc: StarletteHTTPException) -> Response:
    """No such page (or method): a page with the navigation for a browser, the API's JSON
    for anything else."""
    if _wants_json(request) or "text/html" not in request.headers.get("accept", ""):
        return JSONResponse(
            {"detail": exc.detail}, status_code=exc.status_code, headers=exc.headers
        )
    message = (
        f"There is no page at {request.url.path}: it may have moved, or the link is wrong."
        if exc.status_code == 404
        else str(exc.detail)
    )
    return await _error_page(request, exc.status_code, message)


async def _invalid_request(request: Request, exc: RequestValidationError) -> Response:
    errors = {
        ".".join(str(p) for p in err["loc"] if p not in ("body", "path", "query")): str(
            err["msg"]
        ).removeprefix("Value error, ")
        for err in exc.errors()
    }
    detail = "the request is invalid: " + "; ".join(f"{k}: {v}" for k, v in errors.items())
    if _wants_json(request):
        return JSONResponse({"detail": detail, "errors": errors}, status_code=422)
    return await _error_page(request, 422, "Some of what was sent needs a change:", errors)
