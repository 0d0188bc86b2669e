"""How a moment reads on a page: UTC digits, the same instant however it was stored."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

import pytest

from app.web.moments import ago, iso, stamp, when

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
    assert iso(at) == "2026-01-02T03:04:05Z"
    assert stamp(at) == "2026-01-02 03:04:05 UTC"


def test_a_relative_moment_says_how_long_ago() -> None:
    at = datetime.now(UTC) - timedelta(minutes=3, seconds=2)
    shown = str(when(at, relative=True))
    assert shown.startswith(f'<time datetime="{iso(at)}" title="{stamp(at)}" data-when="ago">')
    assert shown.endswith(">3 min ago</time>")
    assert ">in 2 h</time>" in str(when(datetime.now(UTC) + timedelta(hours=2, seconds=30), True))


def test_no_moment_shows_nothing() -> None:
    assert str(when(None)) == ""
    assert iso(None) == stamp(None) == ""


def test_a_list_of_moments_can_be_read_from_one_now() -> None:
    now = datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)
    assert ago(now - timedelta(seconds=4), now) == "just now"
    assert ago(now - timedelta(minutes=59, seconds=59), now) == "59 min ago"
    assert ago(now - timedelta(days=2, hours=23), now) == "2 d ago"
    assert str(when(now + timedelta(seconds=30), relative=True, now=now)).endswith(
        ">in 30 s</time>"
    )
