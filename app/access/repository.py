"""Queries over issued kubeconfigs (grants)."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timedelta

from sqlalchemy import and_, bindparam, func, or_, select, update
from sqlalchemy.orm import Session

from app.core.models import KubeconfigGrant, Team, TeamMember, TeamStatus, User
from app.core.together import Read, Rows, read

Grant = KubeconfigGrant


# Built once (the team page runs it on every view), the team's id a parameter.
_TEAM_GRANTS = (
    select(User, Grant, TeamMember.role)
    .join(Grant, Grant.user_id == User.id)
    .outerjoin(
        TeamMember,
        and_(TeamMember.team_id == Grant.team_id, TeamMember.user_id == Grant.user_id),
    )
    .where(Grant.team_id == bindparam("team_id"), Grant.removed_at.is_(None))
    .order_by(User.email, Grant.expires_at.desc())
)


def team_grants(team_id: int) -> Read[list[tuple[User, Grant, str | None]]]:
    """The team's grants whose account may still exist, newest expiry first, each with its
    holder and the holder's role in the team now (None: no longer a member): one query
    for the team page's access card."""
    return Read(_TEAM_GRANTS, {"team_id": team_id}, _grants)


def _grants(rows: Rows) -> list[tuple[User, Grant, str | None]]:
    return [(user, grant, str(role) if role is not None else None) for user, grant, role in rows]


def get_team_grants(session: Session, team_id: int) -> list[tuple[User, Grant, str | None]]:
    return read(session, team_grants(team_id))


def get_open_grants(session: Session, team_id: int) -> Sequence[Grant]:
    """Every grant of the team whose account is not known to be gone."""
    return session.scalars(
        select(Grant).where(Grant.team_id == team_id, Grant.removed_at.is_(None))
    ).all()


def get_person_grants(session: Session, team_id: int, user_id: int) -> Sequence[Grant]:
    return session.scalars(
        select(Grant).where(
            Grant.team_id == team_id, Grant.user_id == user_id, Grant.removed_at.is_(None)
        )
    ).all()


def get_unrevoked_with_standing(
    session: Session,
) -> list[tuple[Grant, TeamStatus, str | None, bool]]:
    """Every grant not yet revoked, with what decides whether its holder may keep it: the
    team's status, the holder's role in the team (None: not a member) and admin flag."""
    rows = session.execute(
        select(Grant, Team.status, TeamMember.role, User.is_admin)
        .join(Team, Team.id == Grant.team_id)
        .join(User, User.id == Grant.user_id)
        .outerjoin(
            TeamMember,
            and_(TeamMember.team_id == Grant.team_id, TeamMember.user_id == Grant.user_id),
        )
        .where(Grant.revoked_at.is_(None), Grant.removed_at.is_(None))
    ).all()
    return [
        (grant, TeamStatus(status), str(role) if role is not None else None, bool(admin))
        for grant, status, role, admin in rows
    ]


def teams_with_open_grants(session: Session, now: datetime) -> dict[int, bool]:
    """Team id -> whether something is pending there (a revoked or expired grant whose
    account may still exist)."""
    rows = session.execute(
        select(Grant.team_id, Grant.revoked_at, Grant.expires_at).where(Grant.removed_at.is_(None))
    ).all()
    result: dict[int, bool] = {}
    for team_id, revoked_at, expires_at in rows:
        pending = revoked_at is not None or expires_at <= now
        result[team_id] = result.get(team_id, False) or pending
    return result


def revoke(
    session: Session,
    *,
    team_id: int,
    user_ids: Sequence[int] | None,
    now: datetime,
    reason: str,
) -> list[int]:
    """Mark the team's unrevoked grants (of these people, or everyone's) revoked; returns
    the people concerned."""
    where = [Grant.team_id == team_id, Grant.revoked_at.is_(None), Grant.removed_at.is_(None)]
    if user_ids is not None:
        where.append(Grant.user_id.in_(list(user_ids)))
    people = sorted(set(session.scalars(select(Grant.user_id).where(*where)).all()))
    if people:
        session.execute(
            update(Grant).where(*where).values(revoked_at=now, revoked_reason=reason[:500])
        )
    return people


def mark_removed(session: Session, *, team_id: int, keep: set[str], now: datetime) -> int:
    """Grants that no longer work (revoked or expired) and whose account is not in ``keep``
    (accounts that still serve a live grant) are done with: their account is gone."""
    where = [
        Grant.team_id == team_id,
        Grant.removed_at.is_(None),
        or_(Grant.revoked_at.is_not(None), Grant.expires_at <= now),
    ]
    if keep:
        where.append(Grant.account.not_in(keep))
    result = session.execute(update(Grant).where(*where).values(removed_at=now))
    return int(getattr(result, "rowcount", 0) or 0)


def get_expiring_untold(
    session: Session, *, now: datetime, within: timedelta
) -> list[tuple[Grant, str]]:
    """Live grants that last longer than ``within`` (by more than a minute: a 1-day
    kubeconfig is not announced a moment after its download), expire within ``within``
    and within a quarter of their lifetime, and whose holder was not told yet; with the
    team's name."""
    rows = session.execute(
        select(Grant, Team.name)
        .join(Team, Team.id == Grant.team_id)
        .where(
            Grant.revoked_at.is_(None),
            Grant.removed_at.is_(None),
            Grant.expiry_told_at.is_(None),
            Grant.expires_at > now,
            Grant.expires_at <= now + within,
        )
        .order_by(Grant.id)
    ).all()
    found = []
    for grant, name in rows:
        lifetime = grant.expires_at - grant.issued_at
        if lifetime <= within + timedelta(minutes=1):
            continue
        if grant.expires_at - now > min(within, lifetime / 4):
            continue
        found.append((grant, name))
    return found


def lock_person(session: Session, user_id: int) -> None:
    """Hold ``user_id``'s row until the transaction ends (a write that changes nothing:
    the row lock on PostgreSQL, the write lock on SQLite), so that counting their
    kubeconfigs and issuing one is atomic across requests and processes."""
    session.execute(update(User).where(User.id == user_id).values(id=User.id))


def count_live(session: Session, user_id: int, now: datetime) -> tuple[int, datetime | None]:
    """How many of ``user_id``'s kubeconfigs are live (unrevoked, unexpired), and when the
    first of them expires."""
    row = session.execute(
        select(func.count(), func.min(Grant.expires_at)).where(
            Grant.user_id == user_id, Grant.revoked_at.is_(None), Grant.expires_at > now
        )
    ).one()
    return int(row[0]), row[1]
