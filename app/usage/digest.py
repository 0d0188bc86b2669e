"""The weekly right-sizing digest to each team's leads (and the team's webhooks): the
week's average use against the guarantee, and the suggestion if there is one.

Written once per ISO week on ``digest_weekday`` (UTC): the week's row in ``digest_runs``
is inserted in the same transaction as the notifications, so whichever portal process
gets there first writes it and the others find the row.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from app.core.config import Settings
from app.core.events import Event
from app.core.models import DigestRun, utcnow
from app.core.quantities import format_hundredths
from app.notifications import events
from app.teams import repository as teams
from app.usage import repository as repo

NO_EVICTIONS: dict[str, Any] = {"evicted": 0, "lost": "0.0", "evicted_by": [], "borrowing": False}


def week_of(now: datetime) -> str:
    year, week, _ = now.isocalendar()
    return f"{year}-W{week:02d}"


def write_weekly(session: Session, settings: Settings, now: datetime | None = None) -> int | None:
    """Notify every ready team's leads; None when it is not the day or already written."""
    now = now or utcnow()
    if now.weekday() != settings.digest_weekday or not teams.has_org(session):
        return None
    week = week_of(now)
    if repo.digest_written(session, week):
        return None
    try:
        with session.begin_nested():
            session.add(DigestRun(week=week, written_at=now))
            session.flush()
    except IntegrityError:
        return None  # another process is writing this week's digest
    org = teams.get_org(session)
    quotas = [q for q in repo.get_quota_rows(session, org.id) if q.ready]
    use = repo.average_use(session, since=now - timedelta(days=7))
    suggestions = {s.team_id: s for s in repo.get_suggestions(session)}
    evicted = evictions_by_team(session, now - timedelta(days=7))
    written = 0
    for quota in quotas:
        used = use.get(quota.id)
        s = suggestions.get(quota.id)
        current = s is not None and s.guarantee_centi == quota.quota_centi
        facts = {
            "week": week,
            "used": None if used is None else f"{used:.2f}",
            "guaranteed": format_hundredths(quota.quota_centi),
            "suggested": format_hundredths(s.suggested_centi) if s is not None and current else "",
            "direction": ("lower" if s.direction == "lower" else "raise") if s and current else "",
            **evicted.get(quota.id, NO_EVICTIONS),
        }
        events.record(
            session,
            Event.RIGHTSIZING_DIGEST,
            actor=None,
            team=quota,
            summary=f"weekly right-sizing digest {week} for {quota.name}",
            facts=facts,
        )
        written += 1
    return written


def evictions_by_team(session: Session, since: datetime) -> dict[int, dict[str, Any]]:
    """Per team, the week's evictions as the digest tells them: how many, the GPU-hours
    of work lost, the teams the GPUs went to, and whether every reclaim found the team
    above its guarantee (the figures KAI wrote with it)."""
    rows = repo.evictions_since(session, since)
    ids = {r.by_team_id for r in rows if r.by_team_id is not None}
    names = teams.get_team_names(session, ids, decommissioned=True)  # gone since, too
    found: dict[int, dict[str, Any]] = {}
    for row in rows:
        facts = found.setdefault(
            row.team_id, {"evicted": 0, "lost": 0.0, "evicted_by": [], "borrowing": True}
        )
        facts["evicted"] += 1
        facts["lost"] += row.lost_gpu_hours or 0.0
        by = names.get(row.by_team_id) if row.by_team_id is not None else None
        if by and by not in facts["evicted_by"]:
            facts["evicted_by"].append(by)
        queues = row.details.get("queues") or []
        own = queues[0] if queues else {}
        above = (
            own.get("allocated") is not None
            and own.get("deserved") is not None
            and own["allocated"] > own["deserved"]
        )
        facts["borrowing"] = facts["borrowing"] and above
    for facts in found.values():
        facts["lost"] = f"{facts['lost']:.1f}"
    return found
