"""Writing notifications with the change they describe, and reading them."""

from __future__ import annotations

from collections.abc import Iterable

from sqlalchemy.orm import Session

from app.core.models import Notification, User, utcnow
from app.notifications import repository as repo

SHOWN = 30


def notify(
    session: Session,
    *,
    event: str,
    title: str,
    link: str,
    user_ids: Iterable[int | None],
    team_id: int | None = None,
    actor: User | None = None,
) -> int:
    """One notification per person (never to the person who caused it), in the caller's
    transaction: it exists exactly when the change does. Returns how many were written."""
    people = sorted({u for u in user_ids if u is not None and (actor is None or u != actor.id)})
    for user_id in people:
        session.add(
            Notification(
                user_id=user_id,
                team_id=team_id,
                event=event,
                title=title[:300],
                link=link[:300],
            )
        )
    return len(people)


def to_admins(session: Session) -> list[int]:
    return repo.admin_ids(session)


def to_leads(session: Session, team_id: int) -> list[int]:
    return repo.lead_ids(session, team_id)


def unread(session: Session, user: User) -> int:
    return repo.count_unread(session, user.id)


def recent(session: Session, user: User) -> list[Notification]:
    return repo.get_recent(session, user.id, SHOWN)


def mark_all_read(session: Session, user: User) -> int:
    return repo.mark_read(session, user.id, utcnow())
