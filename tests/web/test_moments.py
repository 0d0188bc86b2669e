"""How a moment reads on a page: UTC digits, the same instant however it was stored."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

import pytest

from app.web.templating import _iso, _stamp, when

NAIVE = datetime(2026, 1, 2, 3, 4, 5, 678)  # SQLite hands back naive UTC values


@pytest.mark.parametrize(
    "at",
    [
        NAIVE,
        NAIVE.replace(tzinfo=UTC),
        datetime(2026, 1, 2, 5, 4, 5, tzinfo=timezone(timedelta(hours=2))),
        datetime(2026, 1, 1, 22, 4, 5, tzinfo=timezone(timedelta(hours=-5))),
    ],
)
def test_a_moment_reads_in_utc_however_it_was_stored(at: datetime) -> None:
    assert str(when(at)) == (
        '<time datetime="2026-01-02T03:04:05Z" title="2026-01-02 03:04:05 UTC" '
        'data-when="at">2026-01-02 03:04:05 UTC</time>'
    )
    assert _iso(at) == "2026-01-02T03:04:05Z"
    assert _stamp(at) == "2026-01-02 03:04:05 UTC"


def test_a_relative_moment_says_how_long_ago() -> None:
    at = datetime.now(UTC) - timedelta(minutes=3, seconds=2)
    shown = str(when(at, relative=True))
    assert shown.startswith(f'<time datetime="{_iso(at)}" title="{_stamp(at)}" data-when="ago">')
    assert shown.endswith(">3 min ago</time>")
    assert ">in 2 h</time>" in str(when(datetime.now(UTC) + timedelta(hours=2, seconds=30), True))


def test_no_moment_shows_nothing() -> None:
    assert str(when(None)) == ""
    assert _iso(None) == _stamp(None) == ""
