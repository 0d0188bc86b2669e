"""Quiet hours: the times of day (and, if the org says so, the weekends) when an idle team
cluster sleeps after an hour instead of the policy's hours, in the org's time zone.

Windows are written as people write them: ``22:00-07:00`` (across midnight), several
separated by commas (``12:00-13:00, 20:00-07:00``). Pure functions: no database, no clock.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime, timedelta
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from app.core.errors import InvalidInput

WINDOW = re.compile(r"^([01]\d|2[0-3]):([0-5]\d)-([01]\d|2[0-3]):([0-5]\d)$")
DAY = 24 * 60


@dataclass(frozen=True)
class Quiet:
    """An org's quiet hours: daily windows in minutes of the day (``end < start``: across
    midnight), the weekends (Saturday and Sunday) whole, in ``zone``."""

    windows: tuple[tuple[int, int], ...] = ()
    weekends: bool = False
    zone: str = "UTC"

    @property
    def any(self) -> bool:
        return bool(self.windows) or self.weekends

    def holds(self, at: datetime) -> bool:
        """Whether ``at`` (aware) is within quiet hours."""
        local = at.astimezone(ZoneInfo(self.zone))
        if self.weekends and local.weekday() >= 5:
            return True
        minute = local.hour * 60 + local.minute
        return any(_within(minute, start, end) for start, end in self.windows)

    def first_from(self, at: datetime) -> datetime | None:
        """The first moment from ``at`` on that is quiet (``at`` itself when it is);
        None without quiet hours."""
        if not self.any:
            return None
        if self.holds(at):
            return at
        zone = ZoneInfo(self.zone)
        local = at.astimezone(zone)
        found: list[datetime] = []
        for days in range(8):
            day = (local + timedelta(days=days)).date()
            starts = [start for start, _end in self.windows]
            if self.weekends and day.weekday() == 5:
                starts.append(0)
            for start in starts:
                moment = datetime(
                    day.year, day.month, day.day, start // 60, start % 60, tzinfo=zone
                )
                if moment > at:
                    found.append(moment)
            if found:
                break
        return min(found).astimezone(at.tzinfo) if found else None

    def describe(self) -> str:
        """As people read it: "22:00-07:00 and weekends, Europe/Berlin"."""
        parts = [f"{_hhmm(s)}-{_hhmm(e)}" for s, e in self.windows]
        if self.weekends:
            parts.append("weekends")
        return f"{' and '.join(parts)}, {self.zone}" if parts else ""


def _within(minute: int, start: int, end: int) -> bool:
    return start <= minute < end if start < end else minute >= start or minute < end


def _hhmm(minute: int) -> str:
    return f"{minute // 60:02d}:{minute % 60:02d}"


def parse(text: str, *, weekends: bool, zone: str) -> Quiet:
    """Quiet hours as a form or the API gives them; InvalidInput names what to change."""
    errors: dict[str, str] = {}
    try:
        ZoneInfo(zone)
    except (ZoneInfoNotFoundError, ValueError):
        errors["sleep_time_zone"] = (
            f"{zone!r} is not a time zone: name one as the tz database does, e.g. "
            "Europe/Berlin or America/New_York"
        )
    windows: list[tuple[int, int]] = []
    for part in (p.strip() for p in text.split(",")):
        if not part:
            continue
        found = WINDOW.match(part.replace(" ", ""))
        if found is None:
            errors["sleep_quiet_hours"] = (
                f"{part!r}: write each window as HH:MM-HH:MM (e.g. 22:00-07:00), several "
                "separated by commas"
            )
            break
        h1, m1, h2, m2 = (int(g) for g in found.groups())
        start, end = h1 * 60 + m1, h2 * 60 + m2
        if start == end:
            errors["sleep_quiet_hours"] = f"{part}: a window starts and ends at different times"
            break
        for other in windows:
            if _overlap((start, end), other):
                errors["sleep_quiet_hours"] = (
                    f"{_hhmm(other[0])}-{_hhmm(other[1])} and {part} overlap: join them "
                    "into one window"
                )
                break
        windows.append((start, end))
    if errors:
        raise InvalidInput(errors)
    return Quiet(tuple(windows), weekends, zone)


def _overlap(a: tuple[int, int], b: tuple[int, int]) -> bool:
    def minutes(window: tuple[int, int]) -> set[int]:
        start, end = window
        return {m for m in range(DAY) if _within(m, start, end)}

    return bool(minutes(a) & minutes(b))


def stored(text: str) -> tuple[tuple[int, int], ...]:
    """Windows as the org row keeps them (checked when they were set)."""
    return parse(text, weekends=False, zone="UTC").windows
