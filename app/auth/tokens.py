"""Personal API tokens: created and revoked by their owner, shown once, stored as a hash."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta

from sqlalchemy.orm import Session

from app.audit import service as audit
from app.auth import repository as repo
from app.auth.secrets import digest, new_secret
from app.core.errors import InvalidInput, NotFound
from app.core.events import Event
from app.core.models import TOKEN_NAME_MAX, ApiToken, User, utcnow

PREFIX = "gpp_"
USE_AUDIT_EVERY = timedelta(hours=1)
# last_used_at is written at most this often: every write takes the token row's lock, and
# one CI job's calls with one token would otherwise queue on it.
TOUCH_EVERY = timedelta(minutes=1)


@dataclass(frozen=True)
class NewToken:
    token: ApiToken
    raw: str


def create(session: Session, *, user: User, name: str, days: int, max_days: int) -> NewToken:
    name = name.strip()
    errors: dict[str, str] = {}
    if not name or len(name) > TOKEN_NAME_MAX:
        errors["name"] = (
            f"give the token a name of 1 to {TOKEN_NAME_MAX} characters, e.g. ci-pipeline"
        )
    if not 1 <= days <= max_days:
        errors["days"] = f"choose a lifetime from 1 to {max_days} days"
    if errors:
        raise InvalidInput(errors)
    raw = new_secret(PREFIX)
    token = ApiToken(
        user_id=user.id,
        name=name,
        prefix=raw[:10],
        token_hash=digest(raw),
        expires_at=utcnow() + timedelta(days=days),
    )
    session.add(token)
    session.flush()
    audit.record(
        session,
        actor=user,
        event=Event.TOKEN_CREATED,
        summary=f"created API token {name!r} ({token.prefix}…), valid {days} days",
        details={"token_id": token.id},
    )
    return NewToken(token, raw)


def get_all(session: Session, *, user: User) -> list[ApiToken]:
    return repo.get_tokens(session, user.id)


def revoke(session: Session, *, user: User, token_id: int) -> ApiToken:
    token = repo.get_token(session, token_id)
    if token is None or token.user_id != user.id:
        raise NotFound(f"no API token with id {token_id}")
    if token.revoked_at is None:
        token.revoked_at = utcnow()
        audit.record(
            session,
            actor=user,
            event=Event.TOKEN_REVOKED,
            summary=f"revoked API token {token.name!r} ({token.prefix}…)",
            details={"token_id": token.id},
        )
    return token


def authenticate(session: Session, raw: str) -> User | None:
    """The token's owner, or None when the token is unknown, revoked or expired."""
    token = repo.get_token_by_hash(session, digest(raw))
    now = utcnow()
    if token is None or token.revoked_at is not None or token.expires_at <= now:
        return None
    user = repo.get_user(session, token.user_id)
    if user is None:
        return None
    if token.last_used_at is None or now - token.last_used_at > USE_AUDIT_EVERY:
        audit.record(
            session,
            actor=user,
            event=Event.TOKEN_USED,
            summary=f"used API token {token.name!r} ({token.prefix}…)",
            details={"token_id": token.id},
        )
    if token.last_used_at is None or now - token.last_used_at >= TOUCH_EVERY:
        token.last_used_at = now
    return user
