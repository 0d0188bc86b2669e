"""Server-side sign-in sessions: idle and absolute expiry, revocation at sign-out."""

from __future__ import annotations

from datetime import timedelta

from sqlalchemy.orm import Session

from app.auth import repository as repo
from app.auth.secrets import digest, new_secret
from app.core.config import Settings
from app.core.models import User, WebSession, utcnow

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
    found = repo.get_web_session(session, digest(raw))
    now = utcnow()
    if found is None or found.revoked_at is not None or found.expires_at <= now:
        return None
    if now - found.last_seen_at > timedelta(seconds=settings.session_idle_seconds):
        return None
    if now - found.last_seen_at > TOUCH_EVERY:
        found.last_seen_at = now
    return repo.get_user(session, found.user_id)


def end(session: Session, raw: str) -> None:
    repo.revoke_web_session(session, digest(raw))
