"""Every query of users, their memberships, sign-in sessions and API tokens."""

from __future__ import annotations

from collections.abc import Sequence

from sqlalchemy import bindparam, delete, func, select, update
from sqlalchemy.orm import Session

from app.core.models import (
    LIVE_STATUSES,
    ApiToken,
    Notification,
    Team,
    TeamMember,
    User,
    WebSession,
    utcnow,
)
from app.core.together import Read, Rows, read


def get_user(session: Session, user_id: int) -> User | None:
    return session.get(User, user_id)


def get_user_by_email(session: Session, email: str) -> User | None:
    return session.scalars(select(User).where(User.email == email)).first()


def get_user_by_subject(session: Session, subject: str) -> User | None:
    return session.scalars(select(User).where(User.subject == subject)).first()


def get_unlinked_user_by_email(session: Session, email: str) -> User | None:
    """A user added by e-mail who has not signed in through the provider yet."""
    return session.scalars(select(User).where(User.email == email, User.subject.is_(None))).first()


def get_sign_in_choices(session: Session, *, limit: int = 20) -> list[User]:
    """Known users for the development sign-in page, admins first."""
    return list(
        session.scalars(select(User).order_by(User.is_admin.desc(), User.email).limit(limit))
    )


def get_memberships(session: Session, user_id: int) -> list[TeamMember]:
    return list(session.scalars(select(TeamMember).where(TeamMember.user_id == user_id)))


def get_live_teams_named(session: Session, names: Sequence[str]) -> list[Team]:
    if not names:
        return []
    return list(
        session.scalars(select(Team).where(Team.name.in_(names), Team.status.in_(LIVE_STATUSES)))
    )


def delete_memberships(session: Session, *, user_id: int, team_ids: Sequence[int]) -> None:
    session.execute(
        delete(TeamMember).where(TeamMember.user_id == user_id, TeamMember.team_id.in_(team_ids))
    )


# Every signed-in request runs it: built once, not per request.
# The bell's count of unread notices rides along (every page shows it, without script).
_UNREAD = (
    select(func.count())
    .select_from(Notification)
    .where(Notification.user_id == User.id, Notification.read_at.is_(None))
    .correlate(User)
    .scalar_subquery()
)
_SIGNED_IN = (
    select(WebSession, User, TeamMember.team_id, TeamMember.role, _UNREAD)
    .join(User, User.id == WebSession.user_id)
    .outerjoin(TeamMember, TeamMember.user_id == User.id)
    .where(WebSession.token_hash == bindparam("token_hash"))
)


# The browser session, its user, the user's memberships and unread notices.
SignedIn = tuple[WebSession, User, list[tuple[int, str]], int]


def signed_in(token_hash: str) -> Read[SignedIn | None]:
    """A browser session, its user and the user's memberships: one select, to run alone
    or together with a page's own reads (its entities are then detached)."""
    return Read(_SIGNED_IN, {"token_hash": token_hash}, _signed_in)


def _signed_in(rows: Rows) -> SignedIn | None:
    if not rows:
        return None
    memberships = [(int(r[2]), str(r[3])) for r in rows if r[2] is not None]
    return rows[0][0], rows[0][1], memberships, int(rows[0][4] or 0)


def get_signed_in(session: Session, token_hash: str) -> SignedIn | None:
    """A browser session, its user and the user's memberships in one round trip."""
    return read(session, signed_in(token_hash))


def revoke_web_session(session: Session, token_hash: str) -> None:
    session.execute(
        update(WebSession)
        .where(WebSession.token_hash == token_hash, WebSession.revoked_at.is_(None))
        .values(revoked_at=utcnow())
    )


def get_token(session: Session, token_id: int) -> ApiToken | None:
    return session.get(ApiToken, token_id)


def get_token_by_hash(session: Session, token_hash: str) -> ApiToken | None:
    return session.scalars(select(ApiToken).where(ApiToken.token_hash == token_hash)).first()


def get_tokens(session: Session, user_id: int) -> list[ApiToken]:
    return list(
        session.scalars(
            select(ApiToken).where(ApiToken.user_id == user_id).order_by(ApiToken.id.desc())
        )
    )
