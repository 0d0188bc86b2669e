"""Paging of the API's lists: one rule for every list.

``limit`` (default 100, at most 1000) and ``offset`` (from 0) select a window of a list
in a stable order (each list says which). The answer is the window itself, a JSON array
as before, with ``X-Total-Count`` (the whole list's length, where counting is cheap: all
of them today) and, while more follows, a ``Link: <…>; rel="next"`` header with the next
window's URL (RFC 8288). The audit trail pages by ``before_id`` instead (newest first,
flat at any depth); its next link carries it."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Annotated, Any, TypeVar

from fastapi import Depends, Query, Request, Response

from app.runtime import portal_of

LIMIT_DEFAULT = 100
LIMIT_MAX = 1000
OFFSET_MAX = 10**9

T = TypeVar("T")


@dataclass(frozen=True)
class Window:
    limit: int
    offset: int

    def of(self, items: Sequence[T]) -> list[T]:
        """This window of a list held in memory (the short ones: a team's members)."""
        return list(items[self.offset : self.offset + self.limit])


async def _window(
    limit: Annotated[
        int,
        Query(ge=1, le=LIMIT_MAX, description=f"At most this many (1 to {LIMIT_MAX})."),
    ] = LIMIT_DEFAULT,
    offset: Annotated[
        int, Query(ge=0, le=OFFSET_MAX, description="Skip this many first (from 0).")
    ] = 0,
) -> Window:
    return Window(limit, offset)


WindowDep = Annotated[Window, Depends(_window)]

PAGED: dict[int | str, dict[str, Any]] = {
    200: {
        "headers": {
            "X-Total-Count": {
                "description": "How many the whole list holds.",
                "schema": {"type": "integer"},
            },
            "Link": {
                "description": 'The next window, while more follows: `<url>; rel="next"`.',
                "schema": {"type": "string"},
            },
        }
    }
}


def announce(
    request: Request, response: Response, window: Window, *, returned: int, total: int
) -> None:
    """The headers of a window: the total, and the next window's link while more follows."""
    response.headers["X-Total-Count"] = str(total)
    if window.offset + returned < total and returned > 0:
        nxt = _link(request, limit=window.limit, offset=window.offset + returned)
        response.headers["Link"] = f'<{nxt}>; rel="next"'


def announce_before(request: Request, response: Response, *, last_id: int | None) -> None:
    """Keyset paging (newest first): the next window starts below the last id returned."""
    if last_id is not None:
        response.headers["Link"] = f'<{_link(request, before_id=last_id)}>; rel="next"'


def _link(request: Request, **params: int) -> str:
    """This request's URL with ``params`` set, on the configured public URL
    (PORTAL_PUBLIC_URL), else relative: never on the Host header a caller sent."""
    nxt = request.url.include_query_params(**params)
    where = nxt.path + (f"?{nxt.query}" if nxt.query else "")
    public = portal_of(request.app).settings.public_url
    return public.rstrip("/") + where if public else where


BEFORE_PAGED: dict[int | str, dict[str, Any]] = {
    200: {"headers": {"Link": PAGED[200]["headers"]["Link"]}}
}
