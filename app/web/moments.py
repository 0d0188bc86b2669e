"""How a moment reads on a page: UTC digits (static/portal.js shows them in the viewer's
time zone), or how long ago it was."""

from __future__ import annotations

from datetime import UTC, datetime

from markupsafe import Markup


def ago(value: datetime | None, now: datetime | None = None) -> str:
    """How far ``value`` is from ``now`` (this moment unless given): "5 min ago", "in 2 h"."""
    if value is None:
        return ""
    seconds = int(((now or datetime.now(UTC)) - value).total_seconds())
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


def stamp(value: datetime | None) -> str:
    return _stamp_of(_utc_seconds(value)) if value else ""


def iso(value: datetime | None) -> str:
    """A UTC instant as the browser's Date parses it (the `when` macro's datetime)."""
    if value is None:
        return ""
    return _utc_seconds(value) + "Z"


def when(at: datetime | None, relative: bool = False, now: datetime | None = None) -> Markup:
    """A moment in time. Without JavaScript it reads in UTC; static/portal.js rewrites it
    in the viewer's time zone and keeps UTC on hover. ``relative``: "5 min ago" (from
    ``now``, this moment unless given: a list of moments passes one).

    Every part is made here from the datetime's own fields (digits, fixed words), never
    from text anyone wrote, so it is put together directly: ``Markup.format`` escaping
    four fixed strings cost three quarters of this function (a team page shows some 25)."""
    if not at:
        return Markup("")
    text = _utc_seconds(at)
    stamp = _stamp_of(text)
    kind, shown = ("ago", ago(at, now)) if relative else ("at", stamp)
    return Markup(  # noqa: S704 - digits and fixed words only, made above from the datetime
        f'<time datetime="{text}Z" title="{stamp}" data-when="{kind}">{shown}</time>'
    )


def moment(epoch: float) -> datetime:
    """A ``time.time()`` as a moment in UTC (for ``when``)."""
    return datetime.fromtimestamp(epoch, UTC)
