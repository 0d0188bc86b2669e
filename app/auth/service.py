"""Users and sign-in bookkeeping."""

from __future__ import annotations

import re

from sqlalchemy.orm import Session

from app.audit import service as audit
from app.errors import InvalidInput
from app.models import User, utcnow
from app.teams import repository as repo

_EMAIL = re.compile(r"^[^@\s]+@[^@\s]+\.[^@\s]+$")


def sign_in_dev(session: Session, *, email: str, name: str, admin: bool) -> User:
    """Development sign-in: trust what was typed. Exists only in development mode."""
    email = email.strip().lower()
    if not _EMAIL.match(email):
        raise InvalidInput({"email": "enter an e-mail address such as lead@example.org"})
    user = repo.get_user_by_email(session, email)
    if user is None:
        user = User(email=email, display_name=name.strip() or email.split("@")[0])
        session.add(user)
    user.is_admin = admin
    user.last_sign_in_at = utcnow()
    session.flush()
    audit.record(
        session,
        actor=user,
        action="auth.signed_in",
        summary=f"signed in with the development sign-in as {'admin' if admin else 'team lead'}",
        details={"method": "development"},
    )
    return user
