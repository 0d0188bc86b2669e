"""Queries over notifications and the people they go to."""

from __future__ import annotations

from collections.abc import Collection
from datetime import datetime

from sqlalchemy import bindparam, delete, func, or_, select, update
from sqlalchemy.orm import Session

from app.core.models import (
    Delivery,
    MemberRole,
    Notification,
    NotificationMute,
    Team,
    TeamMember,
    User,
    Webhook,
)


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


# The bell loads with every page: built once, the user's id a parameter.
_UNREAD = (
    select(func.count())
    .select_from(Notification)
    .where(Notification.user_id == bindparam("user_id"), Notification.read_at.is_(None))
)


def count_unread(session: Session, user_id: int) -> int:
    return int(session.scalar(_UNREAD, {"user_id": user_id}) or 0)


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


def mark_read_for_team(
    session: Session, team_id: int, events: Collection[str], now: datetime
) -> int:
    """Mark every unread notification of ``events`` about ``team_id`` read (settled)."""
    result = session.execute(
        update(Notification)
        .where(
            Notification.team_id == team_id,
            Notification.event.in_(events),
            Notification.read_at.is_(None),
        )
        .values(read_at=now)
        .execution_options(synchronize_session=False)
    )
    return int(getattr(result, "rowcount", 0) or 0)


def muted(session: Session, user_ids: Collection[int], event: str) -> set[tuple[int, str]]:
    """(person, channel) pairs of these people that muted ``event``."""
    if not user_ids:
        return set()
    rows = session.execute(
        select(NotificationMute.user_id, NotificationMute.channel).where(
            NotificationMute.user_id.in_(user_ids), NotificationMute.event == event
        )
    )
    return {(user_id, channel) for user_id, channel in rows}


def get_mutes(session: Session, user_id: int) -> set[tuple[str, str]]:
    rows = session.execute(
        select(NotificationMute.event, NotificationMute.channel).where(
            NotificationMute.user_id == user_id
        )
    )
    return {(event, channel) for event, channel in rows}


def set_mutes(session: Session, user_id: int, pairs: set[tuple[str, str]]) -> None:
    session.execute(delete(NotificationMute).where(NotificationMute.user_id == user_id))
    session.add_all(NotificationMute(user_id=user_id, event=e, channel=c) for e, c in sorted(pairs))


def webhooks_for(session: Session, scopes: Collection[str]) -> list[Webhook]:
    return list(
        session.scalars(select(Webhook).where(Webhook.scope.in_(scopes)).order_by(Webhook.id))
    )


def get_webhooks_by_id(session: Session, ids: Collection[int]) -> dict[int, Webhook]:
    if not ids:
        return {}
    return {h.id: h for h in session.scalars(select(Webhook).where(Webhook.id.in_(ids)))}


def get_webhook(session: Session, scope: str, kind: str) -> Webhook | None:
    return session.scalars(
        select(Webhook).where(Webhook.scope == scope, Webhook.kind == kind)
    ).one_or_none()


def claim_deliveries(
    session: Session, *, owner: str, now: datetime, until: datetime, limit: int
) -> list[int]:
    """Lease up to ``limit`` due deliveries nobody else holds (SKIP LOCKED on PostgreSQL,
    and a conditional update everywhere: two processes never hold the same one)."""
    query = (
        select(Delivery.id)
        .where(
            Delivery.status == "pending",
            Delivery.next_attempt_at <= now,
            or_(Delivery.lease_until.is_(None), Delivery.lease_until < now),
        )
        .order_by(Delivery.next_attempt_at, Delivery.id)
        .limit(limit)
    )
    if session.get_bind().dialect.name == "postgresql":
        query = query.with_for_update(skip_locked=True)
    claimed: list[int] = []
    for delivery_id in session.scalars(query).all():
        result = session.execute(
            update(Delivery)
            .where(
                Delivery.id == delivery_id,
                Delivery.status == "pending",
                or_(Delivery.lease_until.is_(None), Delivery.lease_until < now),
            )
            .values(lease_owner=owner, lease_until=until)
            .execution_options(synchronize_session=False)
        )
        if getattr(result, "rowcount", 0) == 1:
            claimed.append(delivery_id)
    return claimed


def get_deliveries(session: Session, ids: Collection[int]) -> list[Delivery]:
    return list(session.scalars(select(Delivery).where(Delivery.id.in_(ids)).order_by(Delivery.id)))


def finish_delivery(session: Session, delivery_id: int, *, owner: str, **values: object) -> bool:
    """Record an attempt's outcome, only while ``owner`` still holds the lease."""
    result = session.execute(
        update(Delivery)
        .where(Delivery.id == delivery_id, Delivery.lease_owner == owner)
        .values(lease_owner=None, lease_until=None, **values)
        .execution_options(synchronize_session=False)
    )
    return getattr(result, "rowcount", 0) == 1


def extend_leases(session: Session, *, owner: str, ids: Collection[int], until: datetime) -> int:
    """Renew ``owner``'s lease on those of ``ids`` it still holds."""
    result = session.execute(
        update(Delivery)
        .where(Delivery.id.in_(ids), Delivery.lease_owner == owner)
        .values(lease_until=until)
        .execution_options(synchronize_session=False)
    )
    return int(getattr(result, "rowcount", 0) or 0)


def release_deliveries(session: Session, *, owner: str) -> int:
    result = session.execute(
        update(Delivery)
        .where(Delivery.lease_owner == owner, Delivery.status == "pending")
        .values(lease_owner=None, lease_until=None)
    )
    return int(getattr(result, "rowcount", 0) or 0)


def count_deliveries(session: Session) -> dict[str, int]:
    rows = session.execute(select(Delivery.status, func.count()).group_by(Delivery.status))
    counts = {"pending": 0, "sent": 0, "failed": 0}
    counts.update({status: int(n) for status, n in rows})
    return counts


def get_troubled(session: Session, limit: int) -> list[Delivery]:
    """Given-up deliveries and those being retried, newest first."""
    return list(
        session.scalars(
            select(Delivery)
            .where(
                or_(
                    Delivery.status == "failed",
                    (Delivery.status == "pending") & (Delivery.attempts > 0),
                )
            )
            .order_by(Delivery.id.desc())
            .limit(limit)
        )
    )


def retry_delivery(session: Session, delivery_id: int, now: datetime) -> bool:
    """A given-up delivery starts over; one waiting to be retried is due now."""
    given_up = session.execute(
        update(Delivery)
        .where(Delivery.id == delivery_id, Delivery.status == "failed")
        .values(status="pending", attempts=0, next_attempt_at=now, last_error="")
    )
    if getattr(given_up, "rowcount", 0) == 1:
        return True
    waiting = session.execute(
        update(Delivery)
        .where(Delivery.id == delivery_id, Delivery.status == "pending")
        .values(next_attempt_at=now)
    )
    return getattr(waiting, "rowcount", 0) == 1


def emails_of(session: Session, notification_ids: Collection[int]) -> dict[int, str]:
    rows = session.execute(
        select(Notification.id, User.email)
        .join(User, User.id == Notification.user_id)
        .where(Notification.id.in_(notification_ids))
    )
    return {notification_id: email for notification_id, email in rows}


def team_names(session: Session, team_ids: Collection[int]) -> dict[int, str]:
    if not team_ids:
        return {}
    return dict(session.execute(select(Team.id, Team.name).where(Team.id.in_(team_ids))).all())
