"""Jinja2 set-up and the one place that decides between a full page and a fragment."""

from __future__ import annotations

import base64
import hashlib
from datetime import UTC, datetime
from typing import Any

from cryptography.fernet import Fernet, InvalidToken
from fastapi import Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response
from fastapi.templating import Jinja2Templates
from markupsafe import Markup

from app.core import labels
from app.core.config import PROJECT_ROOT
from app.core.quantities import format_figure, format_hundredths
from app.runtime import portal_of
from app.web.deps import csrf_token
from app.web.gauge import gauge
from app.web.marks import overview_row, status_pill

templates = Jinja2Templates(directory=str(PROJECT_ROOT / "templates"))


def _ago(value: datetime | None) -> str:
    if value is None:
        return ""
    seconds = int((datetime.now(UTC) - value).total_seconds())
    if seconds < 0:
        return f"in {_span(-seconds)}"
    if seconds < 5:
        return "just now"
    return f"{_span(seconds)} ago"


def _span(seconds: int) -> str:
    for size, unit in ((86400, "d"), (3600, "h"), (60, "min")):
        if seconds >= size:
            return f"{seconds // size} {unit}"
    return f"{seconds} s"


def _utc_seconds(value: datetime) -> str:
    """``YYYY-MM-DDTHH:MM:SS`` in UTC (a naive value is UTC already): the digits both
    forms below are cut from (``isoformat`` is a third of ``strftime``'s cost)."""
    if value.tzinfo is not None and value.tzinfo is not UTC:
        value = value.astimezone(UTC)
    return value.isoformat(timespec="seconds")[:19]


def _stamp_of(utc_seconds: str) -> str:
    return f"{utc_seconds[:10]} {utc_seconds[11:]} UTC"


def _stamp(value: datetime | None) -> str:
    return _stamp_of(_utc_seconds(value)) if value else ""


def _iso(value: datetime | None) -> str:
    """A UTC instant as the browser's Date parses it (the `when` macro's datetime)."""
    if value is None:
        return ""
    return _utc_seconds(value) + "Z"


def when(at: datetime | None, relative: bool = False) -> Markup:
    """A moment in time. Without JavaScript it reads in UTC; static/portal.js rewrites it
    in the viewer's time zone and keeps UTC on hover. ``relative``: "5 min ago".

    Every part is made here from the datetime's own fields (digits, fixed words), never
    from text anyone wrote, so it is put together directly: ``Markup.format`` escaping
    four fixed strings cost three quarters of this function (a team page shows some 25)."""
    if not at:
        return Markup("")
    text = _utc_seconds(at)
    stamp = _stamp_of(text)
    kind, shown = ("ago", _ago(at)) if relative else ("at", stamp)
    return Markup(  # noqa: S704 - digits and fixed words only, made above from the datetime
        f'<time datetime="{text}Z" title="{stamp}" data-when="{kind}">{shown}</time>'
    )


templates.env.filters["gpu"] = format_hundredths
templates.env.filters["ago"] = _ago
templates.env.filters["stamp"] = _stamp
templates.env.filters["iso"] = _iso
templates.env.filters["num"] = format_figure
templates.env.globals["gauge"] = gauge
templates.env.globals["status_pill"] = status_pill
templates.env.globals["overview_row"] = overview_row
templates.env.globals["when"] = when
templates.env.globals["form_label"] = labels.form_label  # what events' messages say too


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
