"""API reference pages: Swagger UI at /docs and ReDoc at /redoc, served from the portal.

FastAPI's own pages load their assets from a CDN and start them with an inline script;
the portal's CSP (script-src 'self') blocks both, and an offline site cannot reach a CDN.
These pages load the same projects from static/vendor (fetched from npm at set-up) and
start them from static/api-docs.js.

Scripts stay 'self' only, without 'unsafe-eval'. Both viewers set inline styles as they
render (ReDoc through styled-components), so these two pages alone allow inline styles;
they show only the public OpenAPI description and take no input of the portal's.
"""

from __future__ import annotations

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse

from app.web.templating import templates

router = APIRouter(include_in_schema=False)


DOCS_CSP = (
    "default-src 'self'; img-src 'self' data:; style-src 'self' 'unsafe-inline'; "
    "script-src 'self'; worker-src 'self' blob:; frame-ancestors 'none'; form-action 'none'"
)


def _page(request: Request, viewer: str) -> HTMLResponse:
    return templates.TemplateResponse(
        request,
        "docs/reference.html",
        {"viewer": viewer, "openapi_url": request.app.openapi_url, "title": request.app.title},
        headers={"content-security-policy": DOCS_CSP},
    )


@router.get("/docs", response_class=HTMLResponse)
def swagger_ui(request: Request) -> HTMLResponse:
    return _page(request, "swagger")


@router.get("/redoc", response_class=HTMLResponse)
def redoc(request: Request) -> HTMLResponse:
    return _page(request, "redoc")
