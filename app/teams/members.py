"""Team membership managed in the portal: leads add people by e-mail."""

from __future__ import annotations

from sqlalchemy.orm import Session

from app.audit import service as audit
from app.auth import repository as users
from app.auth.service import valid_email
from app.core.db import Effect, request_effect
from app.core.errors import Conflict, InvalidInput, NotFound
from app.core.events import Event
from app.core.models import (
    DISPLAY_NAME_MAX,
    MemberRole,
    MemberSource,
    Team,
    TeamMember,
    TeamStatus,
    User,
)
from app.notifications import events
from app.teams import repository as repo


def get_all(session: Session, team: Team) -> list[tuple[User, TeamMember]]:
    return repo.get_members(session, team.id)


def _live(team: Team) -> None:
    """Members change only while the team has a cluster (or asks for one)."""
    if team.status in (TeamStatus.DECOMMISSIONING, TeamStatus.DECOMMISSIONED):
        raise Conflict(
            f"{team.name} is {TeamStatus(team.status).value}: its members no longer change."
        )


def add(session: Session, *, actor: User, team: Team, email: str, role: str) -> TeamMember:
    _live(team)
    email = valid_email(email)
    if role not in (MemberRole.LEAD, MemberRole.MEMBER):
        raise InvalidInput({"role": "choose lead or member"})
    user = users.get_user_by_email(session, email)
    if user is None:
        user = User(email=email, display_name=email.split("@")[0][:DISPLAY_NAME_MAX])
        session.add(user)
        session.flush()
    member = repo.get_member(session, team.id, user.id)
    if member is None:
        member = TeamMember(
            team_id=team.id, user_id=user.id, role=MemberRole(role), source=MemberSource.PORTAL
        )
        session.add(member)
    else:
        member.role = MemberRole(role)
        member.source = MemberSource.PORTAL
    session.flush()
    events.record(
        session,
        Event.MEMBER_ADDED,
        actor=actor,
        team=team,
        summary=f"{email} is now a {role} of {team.name}",
        facts={"email": email, "role": role},
        person_id=user.id,
    )
    # A changed role changes what the person may do inside the vCluster.
    request_effect(session, Effect.ACCESS_CHANGED)
    return member


def remove(session: Session, *, actor: User, team: Team, user_id: int) -> None:
    _live(team)
    member = repo.get_member(session, team.id, user_id)
    if member is None:
        raise NotFound(f"user {user_id} is not a member of {team.name}")
    if member.role == MemberRole.LEAD and repo.count_leads(session, team.id) <= 1:
        raise Conflict(f"{team.name} needs at least one lead: add another lead first")
    user = users.get_user(session, user_id)
    session.delete(member)
    session.flush()
    audit.record(
        session,
        actor=actor,
        event=Event.MEMBER_REMOVED,
        team_id=team.id,
        summary=f"{user.email if user else user_id} no longer belongs to {team.name}",
        details={"user_id": user_id},
    )
    # Their kubeconfig stops working: the access sweeper revokes it now.
    request_effect(session, Effect.ACCESS_CHANGED)
