"""Request bodies are bounded before anything reads them.

Outside the sessions, the CSRF check and every route: a body larger than its kind of
request takes is answered 413 before it is parsed and before any sign-in work. A
declared Content-Length over the limit is refused without reading (a form is read up to
the limit, never further, to name the field that crossed it); a chunked body as soon as
it passes the limit. A body below the limit is handed on as it came.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from urllib.parse import unquote_plus

from starlette.types import ASGIApp, Message, Receive, Scope, Send

KIB = 1024
MIB = 1024 * KIB


@dataclass(frozen=True)
class Limit:
    path: str  # a path prefix ("" matches every path)
    limit: int
    what: str
    signed_in: bool = False  # only for a request with a session cookie (else the next)


SESSION_COOKIE = "portal_session"
# The first prefix that matches. The what-if form carries four fields per team; only a
# signed-in browser may send that much (the route itself then wants an admin): anyone
# else gets the general limit, so anonymous callers cannot make the portal hold 32 MiB.
LIMITS = (
    Limit("/admin/what-if", 32 * MIB, "the what-if form", signed_in=True),
    Limit("/api/", 1 * MIB, "a JSON API request"),
    Limit("", 1 * MIB, "a form"),
)
BODY_METHODS = frozenset({"POST", "PUT", "PATCH", "DELETE"})


def limit_for(path: str, *, signed_in: bool = True) -> Limit:
    return next(
        rule for rule in LIMITS if path.startswith(rule.path) and (signed_in or not rule.signed_in)
    )


def _has_session(headers: dict[bytes, bytes]) -> bool:
    cookies = headers.get(b"cookie", b"").decode("latin-1")
    return any(part.strip().startswith(SESSION_COOKIE + "=") for part in cookies.split(";"))


def _size(limit: int) -> str:
    return f"{limit // MIB} MiB" if limit >= MIB else f"{limit // KIB} KiB"


def _field_being_read(prefix: bytes, content_type: str) -> str | None:
    """The form field whose value crossed the limit (a url-encoded form's last name): a
    form's body is read up to the limit (never further) to name it."""
    if not content_type.startswith("application/x-www-form-urlencoded"):
        return None
    name, equals, _value = prefix.rsplit(b"&", 1)[-1].partition(b"=")
    if not equals:  # the limit fell inside a field's name: no one value is to blame
        return None
    return unquote_plus(name.decode("ascii", "replace"))[:60] or None


class BodyLimit:
    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["method"] not in BODY_METHODS:
            await self.app(scope, receive, send)
            return
        path = str(scope.get("path", ""))
        headers = dict(scope.get("headers", []))
        rule = limit_for(path, signed_in=_has_session(headers))
        content_type = headers.get(b"content-type", b"").decode("latin-1").lower()
        declared = headers.get(b"content-length")
        form = content_type.startswith("application/x-www-form-urlencoded")
        if declared is not None and declared.isdigit() and int(declared) > rule.limit and not form:
            await self._refuse(scope, send, rule, None)  # not one byte read
            return
        chunks: list[bytes] = []
        total = 0
        while True:
            message = await receive()
            if message["type"] != "http.request":  # the client went away
                return
            chunk = message.get("body", b"")
            total += len(chunk)
            if total > rule.limit:
                read = (b"".join(chunks) + chunk)[: rule.limit + 1]  # to the crossing byte
                await self._refuse(scope, send, rule, _field_being_read(read, content_type))
                return
            chunks.append(chunk)
            if not message.get("more_body", False):
                break
        body = b"".join(chunks)
        handed = False

        async def replay() -> Message:
            nonlocal handed
            if not handed:
                handed = True
                return {"type": "http.request", "body": body, "more_body": False}
            return await receive()

        await self.app(scope, replay, send)

    async def _refuse(self, scope: Scope, send: Send, rule: Limit, field: str | None) -> None:
        size = f"{_size(rule.limit)}, the most {rule.what} takes"
        if field:
            detail = f"the field {field!r} makes the body larger than {size}: shorten it"
        else:
            detail = f"the body is larger than {size}: send less"
        if str(scope.get("path", "")).startswith("/api/"):
            payload = {"detail": detail, "errors": {field: detail}} if field else {"detail": detail}
            body, kind = json.dumps(payload).encode(), b"application/json"
        else:
            body, kind = (detail[0].upper() + detail[1:]).encode(), b"text/plain; charset=utf-8"
        await send(
            {
                "type": "http.response.start",
                "status": 413,
                "headers": [
                    (b"content-type", kind),
                    (b"content-length", str(len(body)).encode()),
                    (b"connection", b"close"),
                ],
            }
        )
        await send({"type": "http.response.body", "body": body})
