"""Server-side sign-in sessions: idle and absolute expiry, revocation at sign-out."""

from __future__ import annotations

from datetime import timedelta

from sqlalchemy.orm import Session

from app.auth import repository as repo
from app.auth.secrets import digest, new_secret
from app.core.config import Settings
from app.core.models import User, WebSession, utcnow
from app.core.together import Read

TOUCH_EVERY = timedelta(seconds=60)


def start(session: Session, *, user: User, method: str, settings: Settings) -> str:
    """Open a session and return the raw id for the cookie (only its hash is stored)."""
    raw = new_secret()
    now = utcnow()
    session.add(
        WebSession(
            token_hash=digest(raw),
            user_id=user.id,
            method=method,
            created_at=now,
            last_seen_at=now,
            expires_at=now + timedelta(seconds=settings.session_absolute_seconds),
        )
    )
    session.flush()
    return raw


def resolve(session: Session, raw: str, *, settings: Settings) -> User | None:
    """The session's user, or None when it is unknown, revoked, idle too long or too old."""
    signed_in = resolve_with_memberships(session, raw, settings=settings)
    return signed_in[0] if signed_in is not None else None


def lookup(raw: str) -> Read[repo.SignedIn | None]:
    """The read behind the session cookie's value, to run together with a page's own
    reads; ``still_valid`` judges what it found."""
    return repo.signed_in(digest(raw))


def resolve_with_memberships(
    session: Session, raw: str, *, settings: Settings
) -> tuple[User, list[tuple[int, str]], int] | None:
    """The session's user and memberships, read in one query on every request (so a
    sign-out or a revoked session takes effect at once), or None."""
    return still_valid(session, repo.get_signed_in(session, digest(raw)), settings=settings)


def still_valid(
    session: Session, found: repo.SignedIn | None, *, settings: Settings
) -> tuple[User, list[tuple[int, str]], int] | None:
    """What ``repo.signed_in`` found, if the session is still open (not revoked, not idle
    too long, not too old); seen now, written at most once a minute. A session read
    together with a page's reads comes detached: the session takes it back to write it."""
    if found is None:
        return None
    web, user, memberships, unread = found
    now = utcnow()
    if web.revoked_at is not None or web.expires_at <= now:
        return None
    if now - web.last_seen_at > timedelta(seconds=settings.session_idle_seconds):
        return None
    if now - web.last_seen_at > TOUCH_EVERY:
        if web not in session:
            session.add(web)
        web.last_seen_at = now
    return user, memberships, unread


def end(session: Session, raw: str) -> None:
    repo.revoke_web_session(session, digest(raw))
