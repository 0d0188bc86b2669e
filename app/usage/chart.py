"""The usage chart a person reads: GPUs in use, asked for and guaranteed over the last
24 hours, 7 days or 30 days, with its axes (GPUs up the side, time along the bottom, in
UTC) and a hover text for every hour or day. Geometry only; the page draws it."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from sqlalchemy.orm import Session

from app.core.errors import InvalidInput
from app.core.quantities import format_figure as num
from app.usage.repository import DEFAULT_POOL, usage_points


@dataclass(frozen=True)
class Range:
    key: str  # as the address writes it
    words: str  # "the last 7 days"
    span: timedelta
    period: str  # each point's: "hour" or "day"
    tick_every: timedelta  # between the time axis's labels
    tick_format: str


RANGES = {
    r.key: r
    for r in (
        Range("24h", "the last 24 hours", timedelta(hours=24), "hour", timedelta(hours=6), "%H:00"),
        Range("7d", "the last 7 days", timedelta(days=7), "hour", timedelta(days=1), "%a %d"),
        Range("30d", "the last 30 days", timedelta(days=30), "day", timedelta(days=5), "%b %d"),
    )
}
DEFAULT_RANGE = "7d"


def parse_range(raw: str | None) -> Range:
    """The range an address asks for (empty: the last 7 days)."""
    found = RANGES.get(raw or DEFAULT_RANGE)
    if found is None:
        raise InvalidInput({"range": f"choose one of {', '.join(RANGES)}"})
    return found


@dataclass(frozen=True)
class Tick:
    at: float  # along its axis, in the chart's units
    label: str


@dataclass(frozen=True)
class Column:
    """One hour or day under the pointer: where it is and what it says."""

    x: float
    width: float
    says: str


@dataclass(frozen=True)
class Sample:
    at: datetime  # the hour's or day's start, UTC
    allocated: float
    requested: float
    quota: float


@dataclass(frozen=True)
class Chart:
    range: Range
    samples: tuple[Sample, ...]
    allocated: str  # SVG polyline points
    requested: str
    quota: str  # a step line: the guarantee changes at approvals
    y_ticks: tuple[Tick, ...]
    x_ticks: tuple[Tick, ...]
    columns: tuple[Column, ...]
    since: datetime  # the first sample's start: a young team's chart begins there
    peak: float
    average: float
    width: int = 640
    height: int = 220
    left: int = 44
    right: int = 8
    top: int = 24
    bottom: int = 26

    @property
    def whole(self) -> bool:
        """Samples reach back to the range's start (an hour's or a day's slack)."""
        slack = timedelta(days=1) if self.range.period == "day" else timedelta(hours=1)
        return self.since <= datetime.now(UTC) - self.range.span + slack

    @property
    def plot_bottom(self) -> int:
        return self.height - self.bottom


def nice_top(value: float) -> tuple[float, float]:
    """The axis's top and its step: at most four steps of 1, 2, 2.5 or 5 times a power
    of ten, the top at or above ``value``."""
    value = max(value, 0.01)
    raw = value / 4
    power = 10 ** math.floor(math.log10(raw))
    step = next(m * power for m in (1, 2, 2.5, 5, 10) if m * power >= raw - 1e-12)
    return round(math.ceil(value / step - 1e-9) * step, 4), step


def chart(
    points: list[tuple[datetime, float, float, float]],
    what: Range,
    *,
    limit: float | None = None,
    now: datetime | None = None,
) -> Chart | None:
    """The chart of ``points`` (start, allocated, requested, guarantee) over ``what``;
    ``limit``: drawn into the scale (the team's, where one is known). None: no points."""
    if not points:
        return None
    now = now or datetime.now(UTC)
    samples = tuple(Sample(*p) for p in points)
    start = now - what.span
    values = [s.allocated for s in samples] + [s.requested for s in samples]
    values += [s.quota for s in samples] + ([limit] if limit is not None and limit > 0 else [])
    top_value, step = nice_top(max(values))
    shape = Chart(what, samples, "", "", "", (), (), (), samples[0].at, 0.0, 0.0)
    width = shape.width - shape.left - shape.right
    height = shape.plot_bottom - shape.top
    span = what.span.total_seconds()
    period = timedelta(days=1) if what.period == "day" else timedelta(hours=1)

    def x(at: datetime) -> float:
        return round(shape.left + max(0.0, (at - start).total_seconds()) / span * width, 1)

    def y(value: float) -> float:
        return round(shape.plot_bottom - value / top_value * height, 1)

    def line(values: list[float]) -> str:
        return " ".join(
            f"{x(s.at + period / 2)},{y(v)}" for s, v in zip(samples, values, strict=True)
        )

    quota = []
    for s in samples:
        quota += [f"{x(s.at)},{y(s.quota)}", f"{x(s.at + period)},{y(s.quota)}"]
    y_ticks = tuple(
        Tick(y(i * step), num(round(i * step, 4))) for i in range(round(top_value / step) + 1)
    )
    x_ticks = _x_ticks(start, now, what, x)
    column_width = round(period.total_seconds() / span * width, 2)
    columns = tuple(Column(x(s.at), column_width, _says(s, what)) for s in samples)
    used = [s.allocated for s in samples]
    return Chart(
        what,
        samples,
        line(used),
        line([s.requested for s in samples]),
        " ".join(quota),
        y_ticks,
        x_ticks,
        columns,
        samples[0].at,
        max(used),
        sum(used) / len(used),
    )


def _x_ticks(
    start: datetime, now: datetime, what: Range, x: Callable[[datetime], float]
) -> tuple[Tick, ...]:
    """The time axis's labels, at whole multiples of their spacing, none nearer an edge
    than a twentieth of the period (it would be cut off)."""
    margin = what.span / 20
    at, ticks = _first_tick(start, what), []
    while at <= now - margin:
        if at >= start + margin:
            ticks.append(Tick(x(at), at.strftime(what.tick_format)))
        at += what.tick_every
    return tuple(ticks)


def _says(s: Sample, what: Range) -> str:
    """An hour's or a day's figures, under the pointer."""
    stamp = "%a %d %b %H:00 UTC" if what.period == "hour" else "%a %d %b (UTC)"
    return (
        f"{s.at.strftime(stamp)}: {num(s.allocated)} GPU in use, {num(s.requested)} "
        f"asked for, guarantee {num(s.quota)}"
    )


def _first_tick(start: datetime, what: Range) -> datetime:
    """The first label's moment after ``start``: a whole multiple of its spacing."""
    every = int(what.tick_every.total_seconds())
    epoch = int(start.timestamp())
    return datetime.fromtimestamp(epoch + (-epoch) % every, tz=UTC)


def usage_chart(
    session: Session,
    what: Range,
    *,
    team_id: int | None = None,
    org_id: int | None = None,
    limit: float | None = None,
    pool: str = DEFAULT_POOL,
    now: datetime | None = None,
) -> Chart | None:
    """A team's chart over ``what`` (``team_id`` None: the org's teams together);
    ``pool``: another node pool's name."""
    now = now or datetime.now(UTC)
    points = usage_points(
        session,
        team_id=team_id,
        org_id=org_id,
        since=now - what.span,
        period=what.period,
        pool=pool,
    )
    return chart(points, what, limit=limit, now=now)
