"""Test data, built through the same services the portal uses."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

from sqlalchemy.orm import Session, sessionmaker

from app.core.db import unit_of_work
from app.core.models import ClusterRequest, Org, UsageSample, User
from app.teams import service
from app.teams.rules import parse_quota_fields


def make_org(session: Session, *, gpus: str = "1", name: str = "ml-org") -> Org:
    org = Org.with_pool(name, {"gpu": round(float(gpus) * 100), "cpu": 40_000, "memory": 160_000})
    session.add(org)
    session.flush()
    return org


def make_user(session: Session, email: str, *, admin: bool = False) -> User:
    user = User(email=email, display_name=email.split("@")[0], is_admin=admin)
    session.add(user)
    session.flush()
    return user


def request_values(name: str, **overrides: Any) -> dict[str, str]:
    values = {
        "name": name,
        "gpu_quota": "0.33",
        "gpu_limit": "1",
        "over_quota_weight": "1",
        "priority": "100",
        "purpose": f"{name} experiments",
    }
    values.update({k: str(v) for k, v in overrides.items()})
    return values


def submit(session: Session, lead: User, name: str, **overrides: Any) -> ClusterRequest:
    """A request as a page sends it: the form parsed at the edge, then the service."""
    form = request_values(name, **overrides)
    return service.submit_cluster_request(
        session,
        actor=lead,
        name=form["name"],
        values=parse_quota_fields(form),
        purpose=form["purpose"],
    )


NOW = datetime(2026, 11, 29, 12, 0, 0, tzinfo=UTC)


def write_history(
    factory: sessionmaker[Session],
    team_id: int,
    allocated: Callable[[int], float],
    requested: Callable[[int], float] | None = None,
    *,
    hours: int = 14 * 24,
    now: datetime = NOW,
    guarantee: float = 2.0,
    pool: str = "",
) -> None:
    """Generated usage history: one hourly row per hour for ``hours`` hours back from
    ``now`` (hour 0 is the newest), the last day as raw 10-minute samples instead, as the
    collector leaves it; in the default pool, or the node pool named ``pool``."""
    rows = []
    for hour in range(hours):
        a = allocated(hour)
        r = requested(hour) if requested else a
        if hour < 24:
            for minute in range(0, 60, 10):
                at = now - timedelta(hours=hour + 1) + timedelta(minutes=minute)
                rows.append(_usage_row(guarantee, team_id, "raw", at, 600, a, r))
        else:
            rows.append(
                _usage_row(guarantee, team_id, "hour", now - timedelta(hours=hour + 1), 3600, a, r)
            )
    for row in rows:
        row.pool = pool
    with unit_of_work(factory) as session:
        session.add_all(rows)


def _usage_row(
    guarantee: float, team_id: int, resolution: str, at: datetime, seconds: int, a: float, r: float
) -> UsageSample:
    return UsageSample(
        team_id=team_id,
        resolution=resolution,
        at=at,
        seconds=seconds,
        allocated_gpu=a,
        requested_gpu=r,
        quota_gpu=guarantee,
        guaranteed_gpu_s=min(a, guarantee) * seconds,
        borrowed_gpu_s=max(0.0, a - guarantee) * seconds,
    )
