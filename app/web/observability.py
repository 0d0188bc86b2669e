"""Per request: an id (X-Request-ID accepted and returned, carried by every log record
written while the request runs, uvicorn's access line included) and metrics; and the
operational endpoints /healthz, /readyz and /metrics."""

from __future__ import annotations

import hmac
import re
import time
import uuid

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse, Response
from prometheus_client import CONTENT_TYPE_LATEST
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from app.core import metrics
from app.core.logs import REQUEST_ID
from app.runtime import portal_of
from app.web.deps import bearer_token

router = APIRouter(include_in_schema=False)

_SAFE_ID = re.compile(r"^[A-Za-z0-9._:-]{1,128}$")


class RequestContext:
    """Outermost middleware: every request gets an id and a metric sample."""

    def __init__(self, app: ASGIApp, *, count: bool = True) -> None:
        self.app = app
        self.count = count

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        given = dict(scope.get("headers") or []).get(b"x-request-id", b"").decode("latin-1")
        request_id = given if _SAFE_ID.match(given) else uuid.uuid4().hex
        token = REQUEST_ID.set(request_id)
        started = time.perf_counter()
        status = 500

        async def send_with_id(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
                message["headers"] = [
                    *message.get("headers", []),
                    (b"x-request-id", request_id.encode()),
                ]
            await send(message)

        try:
            await self.app(scope, receive, send_with_id)
        finally:
            REQUEST_ID.reset(token)
            if self.count:
                self._observe(scope, status, time.perf_counter() - started)

    @staticmethod
    def _observe(scope: Scope, status: int, elapsed: float) -> None:
        route = scope.get("route")
        template = getattr(route, "path", None) or "unmatched"
        method = scope.get("method", "")
        metrics.HTTP_REQUESTS.labels(method, template, str(status)).inc()
        metrics.HTTP_LATENCY.labels(method, template).observe(elapsed)


@router.get("/healthz")
async def healthz() -> dict[str, str]:
    """The process answers. Nothing else is checked: a slow database must not restart it
    (a coroutine: a liveness probe takes no thread from the pages)."""
    return {"status": "ok"}


@router.get("/readyz")
def readyz(request: Request) -> JSONResponse:
    """Ready for traffic: database reachable, migrations at head, every job's loop alive."""
    portal = portal_of(request.app)
    if portal.stopping:
        return JSONResponse({"status": "stopping"}, status_code=503)
    readiness = portal.readiness()
    failed = readiness.failed
    body: dict[str, object] = {"status": "ready" if not failed else "not ready", "failed": failed}
    if readiness.degraded:
        # Jobs whose last pass failed: still running and retrying; their logs say why.
        body["retrying"] = list(readiness.degraded)
    return JSONResponse(body, status_code=200 if not failed else 503)


@router.get("/metrics")
def metrics_endpoint(request: Request) -> Response:
    settings = portal_of(request.app).settings
    if settings.metrics_port:
        return JSONResponse(
            {"detail": f"metrics are served on port {settings.metrics_port}"}, status_code=404
        )
    if settings.metrics_token is not None:
        # The scheme is case-insensitive (RFC 9110): "bearer" and "BEARER" are "Bearer".
        expected = settings.metrics_token.get_secret_value()
        given = bearer_token(request) or ""
        if not hmac.compare_digest(given.encode(), expected.encode()):
            return JSONResponse(
                {"detail": "send Authorization: Bearer <PORTAL_METRICS_TOKEN>"},
                status_code=401,
                headers={"WWW-Authenticate": 'Bearer realm="metrics"'},
            )
    elif not settings.development:
        return JSONResponse(
            {"detail": "metrics are off: set PORTAL_METRICS_TOKEN or PORTAL_METRICS_PORT"},
            status_code=403,
        )
    body = metrics.render(portal_of(request.app).metrics_registry)
    return Response(body, media_type=CONTENT_TYPE_LATEST)
