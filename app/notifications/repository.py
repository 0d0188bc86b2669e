"""Queries over notifications and the people they go to."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import func, select, update
from sqlalchemy.orm import Session

from app.core.models import MemberRole, Notification, TeamMember, User


def admin_ids(session: Session) -> list[int]:
    return list(session.scalars(select(User.id).where(User.is_admin.is_(True))))


def lead_ids(session: Session, team_id: int) -> list[int]:
    return list(
        session.scalars(
            select(TeamMember.user_id).where(
                TeamMember.team_id == team_id, TeamMember.role == MemberRole.LEAD
            )
        )
    )


def count_unread(session: Session, user_id: int) -> int:
    return int(
        session.scalar(
            select(func.count())
            .select_from(Notification)
            .where(Notification.user_id == user_id, Notification.read_at.is_(None))
        )
        or 0
    )


def get_recent(session: Session, user_id: int, limit: int) -> list[Notification]:
    return list(
        session.scalars(
            select(Notification)
            .where(Notification.user_id == user_id)
            .order_by(Notification.id.desc())
            .limit(limit)
        )
    )


def mark_read(session: Session, user_id: int, now: datetime) -> int:
    result = session.execute(
        update(Notification)
        .where(Notification.user_id == user_id, Notification.read_at.is_(None))
        .values(read_at=now)
    )
    return int(getattr(result, "rowcount", 0) or 0)
