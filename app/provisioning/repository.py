"""Every query of the reconciler: leases on due teams."""

from __future__ import annotations

from collections.abc import Collection
from datetime import datetime

from sqlalchemy import or_, select, update
from sqlalchemy.orm import Session

from app.core.models import Team, TeamStatus

# Teams the reconciler looks at: everything that holds, or is building or removing, objects.
WORK_STATUSES = (
    TeamStatus.APPROVED,
    TeamStatus.PROVISIONING,
    TeamStatus.FAILED,
    TeamStatus.READY,
    TeamStatus.DECOMMISSIONING,
)


def claim_due(
    session: Session,
    *,
    owner: str,
    now: datetime,
    until: datetime,
    limit: int,
    exclude: Collection[int] = (),
) -> list[int]:
    """Lease up to ``limit`` teams that are due and not leased by anyone else."""
    query = (
        select(Team.id)
        .where(
            Team.status.in_(WORK_STATUSES),
            or_(Team.next_attempt_at.is_(None), Team.next_attempt_at <= now),
            or_(Team.lease_until.is_(None), Team.lease_until < now),
        )
        .order_by(Team.next_attempt_at)
        .limit(limit)
    )
    if exclude:
        query = query.where(Team.id.not_in(exclude))
    if session.get_bind().dialect.name == "postgresql":
        query = query.with_for_update(skip_locked=True)
    claimed: list[int] = []
    for team_id in session.scalars(query).all():
        result = session.execute(
            update(Team)
            .where(Team.id == team_id, or_(Team.lease_until.is_(None), Team.lease_until < now))
            .values(lease_owner=owner, lease_until=until)
            .execution_options(synchronize_session=False)
        )
        if getattr(result, "rowcount", 0) == 1:
            claimed.append(team_id)
    return claimed


def release(session: Session, *, team_id: int, owner: str) -> None:
    session.execute(
        update(Team)
        .where(Team.id == team_id, Team.lease_owner == owner)
        .values(lease_owner=None, lease_until=None)
    )


def release_owned(session: Session, *, owner: str, keep: Collection[int] = ()) -> int:
    """Give back every lease ``owner`` holds but those of ``keep``; how many there were."""
    query = update(Team).where(Team.lease_owner == owner)
    if keep:
        query = query.where(Team.id.not_in(keep))
    result = session.execute(
        query.values(lease_owner=None, lease_until=None).execution_options(
            synchronize_session=False
        )
    )
    return int(getattr(result, "rowcount", 0) or 0)
