"""Two weeks of usage history for the example org, so a first look at the demo shows
what right-sizing and the sparklines say about real-looking teams: ``nlp`` busy in
working hours around its guarantee, ``vision`` idle (its guarantee could be promised to
others), ``recommender`` starved (its work waits for more than it is guaranteed).

Only ``gpu-portal seed`` / ``serve --seed`` write it (never the tests' seeded org), as
hourly rows, which the collector's own roll-ups then treat like any others."""

from __future__ import annotations

import math
from datetime import datetime, timedelta

from sqlalchemy.orm import Session

from app.auth import repository as users
from app.core.models import utcnow
from app.core.quantities import gpus
from app.teams import repository as teams
from app.usage import budgets
from app.usage import repository as repo

DAYS = 14


def _working_hours(at: datetime) -> float:
    """0 at night and at weekends, up to 1 in the afternoon of a working day."""
    if at.weekday() >= 5:
        return 0.1
    return max(0.0, math.sin(math.pi * (at.hour - 7) / 12)) if 7 <= at.hour <= 19 else 0.0


def _figures(team: str, at: datetime, guarantee: float) -> tuple[float, float]:
    """(GPUs in use, GPUs asked for) of one example team over the hour starting ``at``."""
    busy = _working_hours(at)
    wobble = 0.5 + 0.5 * math.sin(at.timestamp() / 5400.0)  # hours differ from each other
    if team == "vision":  # idle: a notebook twice a working day
        used = 0.04 if at.hour in (10, 15) and at.weekday() < 5 else 0.0
        return used, used
    if team == "recommender":  # starved: asks for a whole GPU, gets about its guarantee
        asked = 0.6 + 0.4 * max(busy, 0.3 + 0.3 * wobble)
        return min(asked, guarantee + 0.05 * wobble), asked
    used = guarantee * (0.3 + 0.9 * busy * (0.7 + 0.3 * wobble))  # nlp: busy by day
    return used, used + 0.05 * busy


def seed_history(session: Session, now: datetime | None = None) -> int:
    """Hourly samples for the example teams over the last ``DAYS`` days (until the
    current hour); the number of rows written."""
    now = now or utcnow()
    end = now.replace(minute=0, second=0, microsecond=0)
    org = teams.get_org(session)
    rows: list[dict[str, object]] = []
    for quota in repo.get_quota_rows(session, org.id):
        guarantee = gpus(quota.quota_centi)
        for hour in range(DAYS * 24, 0, -1):
            at = end - timedelta(hours=hour)
            used, asked = _figures(quota.name, at, guarantee)
            inside = min(used, guarantee)
            rows.append(
                {
                    "team_id": quota.id,
                    "resolution": "hour",
                    "at": at,
                    "seconds": 3600,
                    "allocated_gpu": round(used, 4),
                    "requested_gpu": round(asked, 4),
                    "quota_gpu": guarantee,
                    "guaranteed_gpu_s": inside * 3600,
                    "borrowed_gpu_s": (used - inside) * 3600,
                }
            )
    repo.add_samples(session, rows)
    return len(rows)


def seed_budget(session: Session, now: datetime | None = None) -> bool:
    """The demo's GPU-hour budget: nlp's this month, twice what it has used so far (the
    history seeded above), so a newcomer sees one half spent."""
    now = now or utcnow()
    nlp = teams.get_live_team_by_name(session, "nlp")
    admin = users.get_user_by_email(session, "admin@example.org")
    if nlp is None or admin is None:
        return False
    used = budgets.of_team_used(session, nlp.id, now)
    hours = max(1.0, round(2 * used, 1))
    asked = budgets.parse_budget({"gpu_hours": f"{hours:g}", "at_limit": "alert"}, now=now)
    budget = budgets.set_budget(session, actor=admin, team=nlp, asked=asked, now=now)
    # Seeded half spent: its 50 % needs no message to a newcomer's bell.
    budget.alerted = 50 if used >= hours / 2 else 0
    return True
