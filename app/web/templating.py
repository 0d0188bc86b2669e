"""Jinja2 set-up and the one place that decides between a full page and a fragment."""

from __future__ import annotations

import base64
import hashlib
from typing import Any

from cryptography.fernet import Fernet, InvalidToken
from fastapi import Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response
from fastapi.templating import Jinja2Templates

from app.core import labels, quota
from app.core.config import PROJECT_ROOT
from app.core.quantities import format_figure, format_hundredths
from app.reads.org import shares_in_pools
from app.runtime import portal_of
from app.web.assets import ASSETS
from app.web.deps import csrf_token
from app.web.gauge import gauge
from app.web.marks import overview_row, status_pill, steps, timeline
from app.web.moments import ago, iso, moment, stamp, when

templates = Jinja2Templates(directory=str(PROJECT_ROOT / "templates"))


templates.env.globals["static"] = ASSETS.url  # a file's address with its version
templates.env.filters["gpu"] = format_hundredths
templates.env.filters["ago"] = ago
templates.env.filters["stamp"] = stamp
templates.env.filters["iso"] = iso
templates.env.filters["moment"] = moment
templates.env.filters["num"] = format_figure
templates.env.filters["label"] = labels.label  # a field as its form labels it
templates.env.filters["changes"] = labels.changes  # "GPU guarantee 0.25 → 0.2", as messages say
templates.env.globals["gauge"] = gauge
templates.env.globals["status_pill"] = status_pill
templates.env.globals["overview_row"] = overview_row
templates.env.globals["shares_in_pools"] = shares_in_pools
templates.env.globals["timeline"] = timeline
templates.env.globals["steps"] = steps
templates.env.globals["when"] = when
templates.env.globals["form_label"] = labels.form_label  # what events' messages say too
templates.env.globals["quota_fields"] = labels.form_fields()  # the declaration's fields
templates.env.globals["quota_shown"] = lambda row: row.quota.display()
templates.env.globals["pool_shown"] = lambda org: quota.pool_display(org.capacity)


def is_htmx(request: Request) -> bool:
    return (
        request.headers.get("HX-Request") == "true" and request.headers.get("HX-Boosted") != "true"
    )


REVEAL_SECONDS = 300


def _reveal_cipher(request: Request) -> Fernet:
    key = portal_of(request.app).settings.secret_key.get_secret_value().encode()
    digest = hashlib.sha256(b"gpu-portal one-time reveal\0" + key).digest()
    return Fernet(base64.urlsafe_b64encode(digest))


def stash_secret(request: Request, name: str, secret: str) -> None:
    """Keep a secret for the next page only (post/redirect/get), encrypted: the session
    cookie is signed but readable, and the secret must not sit in it in clear."""
    request.session[f"reveal:{name}"] = _reveal_cipher(request).encrypt(secret.encode()).decode()


def take_secret(request: Request, name: str) -> str | None:
    """The stashed secret, once; None after that, or when older than a few minutes."""
    sealed = request.session.pop(f"reveal:{name}", None)
    if not isinstance(sealed, str):
        return None
    try:
        return _reveal_cipher(request).decrypt(sealed.encode(), ttl=REVEAL_SECONDS).decode()
    except InvalidToken:
        return None


def flash(request: Request, message: str, kind: str = "ok") -> None:
    """A one-time notice shown on the next page (a toast)."""
    # Assigned, not appended in place: the session is saved only when a key is set, so a
    # second notice before the first was shown would otherwise be lost.
    request.session["flash"] = [
        *request.session.get("flash", []),
        {"kind": kind, "message": message},
    ]


def render(
    request: Request,
    template: str,
    context: dict[str, Any] | None = None,
    *,
    partial: str | None = None,
    status_code: int = 200,
    headers: dict[str, str] | None = None,
) -> HTMLResponse:
    """Render ``partial`` for an HTMX request when given, else the full ``template``."""
    state = portal_of(request.app)
    ctx: dict[str, Any] = {
        "request": request,
        "settings": state.settings,
        "simulated": state.backend.simulated,
        "csrf_token": csrf_token(request),
        "principal": None,
        "pending_count": 0,
    }
    ctx.update(context or {})
    if ctx["principal"] is not None:
        # A signed-in page shows someone's data: not for the browser's or a proxy's cache.
        headers = {"Cache-Control": "no-store", **(headers or {})}
    name = partial if partial and is_htmx(request) else template
    if name == template:
        ctx["flashes"] = request.session.pop("flash", [])
    return templates.TemplateResponse(request, name, ctx, status_code=status_code, headers=headers)


def redirect(request: Request, url: str) -> Response:
    """After a POST: HX-Redirect for HTMX, 303 for a plain form."""
    if is_htmx(request):
        return Response(status_code=204, headers={"HX-Redirect": url})
    return RedirectResponse(url, status_code=303)
