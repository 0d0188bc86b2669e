"""Users, sign-in and what the identity provider says about them."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import timedelta
from typing import Any

from sqlalchemy.orm import Session

from app.audit import service as audit
from app.auth import repository as repo
from app.core.config import Settings
from app.core.db import Effect, request_effect
from app.core.errors import InvalidInput
from app.core.events import Event
from app.core.models import (
    DISPLAY_NAME_MAX,
    EMAIL_MAX,
    SUBJECT_MAX,
    MemberRole,
    MemberSource,
    TeamMember,
    User,
    utcnow,
)
from app.core.text import is_address

BEARER_AUDIT_EVERY = timedelta(hours=1)


def valid_email(raw: str) -> str:
    """One plain address, lower case: a list ("a@x.org,b"), a display name or quoting is
    refused, never read as a recipient."""
    email = raw.strip().lower()
    if len(email) > EMAIL_MAX:
        raise InvalidInput({"email": f"an e-mail address has at most {EMAIL_MAX} characters"})
    if not is_address(email):
        raise InvalidInput(
            {
                "email": "enter one e-mail address such as lead@example.org (letters, "
                "digits and . _ + - before the @; no lists, names or spaces)"
            }
        )
    return email


def sign_in_dev(session: Session, *, email: str, name: str, admin: bool) -> User:
    """Development sign-in: trust what was typed. Exists only in development mode."""
    email = valid_email(email)
    name = name.strip()
    if len(name) > DISPLAY_NAME_MAX:
        raise InvalidInput({"name": f"use a name of at most {DISPLAY_NAME_MAX} characters"})
    user = repo.get_user_by_email(session, email)
    if user is None:
        user = User(email=email, display_name=name or email.split("@")[0][:DISPLAY_NAME_MAX])
        session.add(user)
    elif name:
        user.display_name = name  # the name typed is the name shown
    user.is_admin = admin
    user.last_sign_in_at = utcnow()
    session.flush()
    audit.record(
        session,
        actor=user,
        event=Event.SIGNED_IN,
        summary=f"signed in with the development sign-in{' as admin' if admin else ''}",
        details={"method": "development"},
    )
    return user


def groups_of(claims: Mapping[str, Any], settings: Settings) -> list[str]:
    value = claims.get(settings.oidc_groups_claim, [])
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, list):
        return []
    # Some providers (Keycloak with full paths) send "/gpu-team-nlp".
    return sorted({str(g).lstrip("/") for g in value})


def teams_from_groups(groups: list[str], settings: Settings) -> list[str]:
    pattern = settings.oidc_team_group_pattern
    if not pattern:
        return []
    prefix, _, suffix = pattern.partition("{team}")
    names = []
    for group in groups:
        if group.startswith(prefix) and group.endswith(suffix):
            name = group[len(prefix) : len(group) - len(suffix) if suffix else None]
            if name:
                names.append(name)
    return names


def sign_in_oidc(
    session: Session, *, claims: Mapping[str, Any], settings: Settings, method: str = "oidc"
) -> User:
    """Create or update the user the provider vouches for; roles and group-based team
    memberships follow the provider at every sign-in."""
    subject = str(claims["sub"])
    if len(subject) > SUBJECT_MAX:
        raise InvalidInput(
            {"sub": f"the provider's subject is longer than {SUBJECT_MAX} characters"}
        )
    email = str(claims.get("email") or "").strip().lower()
    if len(email) > EMAIL_MAX or not is_address(email):
        email = ""  # unusable as an address: the account is known by its subject
    name = str(claims.get("name") or claims.get("preferred_username") or email or subject)
    user = repo.get_user_by_subject(session, subject)
    if user is None and email and claims.get("email_verified", True) is not False:
        # A lead may have added this person by e-mail before their first sign-in.
        user = repo.get_unlinked_user_by_email(session, email)
    if user is None:
        user = User(
            email=email or f"{subject[:200]}@users.invalid", display_name=name[:DISPLAY_NAME_MAX]
        )
        session.add(user)
    user.subject = subject
    if email:
        user.email = email
    user.display_name = name[:DISPLAY_NAME_MAX]
    groups = groups_of(claims, settings)
    if user.is_admin and settings.oidc_admin_group not in groups:
        request_effect(session, Effect.ACCESS_CHANGED)  # no longer an admin's kubeconfigs
    user.is_admin = settings.oidc_admin_group in groups
    now = utcnow()
    recently = user.last_sign_in_at is not None and now - user.last_sign_in_at < BEARER_AUDIT_EVERY
    if method == "bearer" and recently:
        session.flush()
        sync_group_memberships(session, user=user, team_names=teams_from_groups(groups, settings))
        return user
    user.last_sign_in_at = now
    session.flush()
    sync_group_memberships(session, user=user, team_names=teams_from_groups(groups, settings))
    audit.record(
        session,
        actor=user,
        event=Event.SIGNED_IN,
        summary=(
            "used a provider access token"
            if method == "bearer"
            else "signed in through the identity provider"
        )
        + f" ({'admin' if user.is_admin else 'user'})",
        details={"method": method, "groups": groups},
    )
    return user


def sync_group_memberships(session: Session, *, user: User, team_names: list[str]) -> None:
    wanted = {t.id for t in repo.get_live_teams_named(session, team_names)}
    current = {m.team_id: m for m in repo.get_memberships(session, user.id)}
    for team_id in wanted - set(current):
        session.add(
            TeamMember(
                team_id=team_id, user_id=user.id, role=MemberRole.LEAD, source=MemberSource.GROUPS
            )
        )
    stale = [
        team_id
        for team_id, m in current.items()
        if m.source == MemberSource.GROUPS and team_id not in wanted
    ]
    if stale:
        repo.delete_memberships(session, user_id=user.id, team_ids=stale)
        request_effect(session, Effect.ACCESS_CHANGED)  # their kubeconfigs there are revoked
    session.flush()


def record_failed_sign_in(session: Session, *, reason: str, method: str) -> None:
    audit.record(
        session,
        actor=None,
        event=Event.SIGN_IN_FAILED,
        summary=f"a sign-in failed: {reason}",
        details={"method": method, "reason": reason},
    )
