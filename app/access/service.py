"""Issuing and revoking personal kubeconfigs.

Who may hold one: portal admins (any team), and the team's leads and members, each bound
inside the vCluster to the ClusterRole the settings give their portal role. A revocation
is recorded here at once (the page says so) and carried out in the vCluster by the
sweeper, which also revokes whatever the records show is no longer allowed.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from datetime import datetime, timedelta

from sqlalchemy.orm import Session

from app.access import repository as repo
from app.access.credentials import CredentialIssuer, IssuedCredential, Person
from app.audit import service as audit
from app.core.config import MIN_TTL_SECONDS, Settings, format_duration, parse_duration
from app.core.db import Effect, request_effect
from app.core.errors import Conflict, Forbidden, InvalidInput, TooMany
from app.core.events import Event
from app.core.models import KubeconfigGrant, MemberRole, Team, TeamStatus, User, utcnow
from app.notifications import events
from app.notifications.events import TeamRef
from app.provisioning import sleep
from app.provisioning.backend import BackendError, TeamSpec
from app.provisioning.specs import spec_of
from app.teams import repository as teams

GONE = (TeamStatus.DECOMMISSIONING, TeamStatus.DECOMMISSIONED)
# Choices offered on the team page (the API takes any duration up to the maximum).
TTL_CHOICES = (3600, 8 * 3600, 86400, 3 * 86400, 7 * 86400, 30 * 86400)


@dataclass(frozen=True)
class Download:
    filename: str
    text: str
    expires_at: datetime | None


def entitlement(
    settings: Settings, *, is_admin: bool, member_role: str | None
) -> tuple[str, str] | None:
    """(portal role, ClusterRole inside the vCluster) the person may hold, or None."""
    if is_admin:
        return "admin", settings.kubeconfigs.admin_role
    if member_role == MemberRole.LEAD:
        return "lead", settings.kubeconfigs.lead_role
    if member_role == MemberRole.MEMBER:
        return "member", settings.kubeconfigs.member_role
    return None


def ttl_choices(settings: Settings) -> list[tuple[int, str]]:
    """(seconds, label) offered to a person: the standard choices up to the maximum, and
    the default; the default is marked by the caller."""
    top = settings.kubeconfigs.max_ttl_seconds
    seconds = sorted({s for s in TTL_CHOICES if s <= top} | {settings.kubeconfigs.ttl_seconds})
    return [(s, format_duration(s)) for s in seconds]


def parse_ttl(settings: Settings, value: str | None) -> int:
    if value is None or not value.strip():
        return settings.kubeconfigs.ttl_seconds
    seconds = parse_duration(value)
    if seconds is None:
        raise InvalidInput({"ttl": f"{value!r} is not a duration: use 30m, 8h or 7d"})
    if seconds < MIN_TTL_SECONDS:
        raise InvalidInput(
            {"ttl": f"the shortest kubeconfig lasts {format_duration(MIN_TTL_SECONDS)}"}
        )
    if seconds > settings.kubeconfigs.max_ttl_seconds:
        raise InvalidInput(
            {
                "ttl": f"the longest kubeconfig lasts {settings.kubeconfigs.max_ttl} "
                "(PORTAL_KUBECONFIG_MAX_TTL, set by the admins)"
            }
        )
    return seconds


def person_for(settings: Settings, session: Session, team: Team, user: User) -> Person:
    member = teams.get_member(session, team.id, user.id)
    entitled = entitlement(
        settings, is_admin=user.is_admin, member_role=member.role if member else None
    )
    if entitled is None:
        raise Forbidden(f"you are not a member of {team.name}")
    return Person(user.id, user.email, *entitled)


def issue(
    session: Session,
    *,
    backend: CredentialIssuer,
    settings: Settings,
    actor: User,
    team: Team,
    ttl: str | None = None,
) -> Download:
    """A kubeconfig for ``actor`` alone, made now in the team's vCluster."""
    if team.status != TeamStatus.READY:
        raise Conflict(f"team {team.name} is {team.status}: kubeconfigs exist once it is ready")
    person = person_for(settings, session, team, actor)
    spec = spec_of(session, team, settings)
    sleep.touch(team, utcnow())  # a use of the team's cluster: the sleep policy waits
    # The name the team page's commands use; each person keeps their own on their machine.
    filename = f"kubeconfig-{team.name}.yaml"
    if settings.kubeconfigs.mode == "oidc":
        text = _oidc_kubeconfig(session, backend, settings, actor, team, spec, person)
        return Download(filename, text, None)
    seconds = parse_ttl(settings, ttl)
    now = utcnow()
    repo.lock_person(session, actor.id)
    live, first_expiry = repo.count_live(session, actor.id, now)
    if live >= settings.kubeconfig_max_live:
        until = f" (the first expires at {first_expiry:%Y-%m-%d %H:%M} UTC)" if first_expiry else ""
        raise TooMany(
            f"you hold {live} live kubeconfigs, the most one person may{until}: revoke "
            "yours on a team's page (Revoke my kubeconfigs) and download again"
        )
    _clear_the_way(session, backend, team, actor, spec, person, now)
    try:
        issued = backend.issue_credential(spec, person, ttl_seconds=seconds)
    except BackendError as exc:
        raise Conflict(f"the kubeconfig could not be issued: {exc}. Try again.") from exc
    _record_grant(session, backend, actor, team, person, issued, seconds, now)
    return Download(filename, issued.kubeconfig, issued.expires_at)


def _record_grant(
    session: Session,
    backend: CredentialIssuer,
    actor: User,
    team: Team,
    person: Person,
    issued: IssuedCredential,
    seconds: int,
    now: datetime,
) -> None:
    """The credential just made, kept (never its token) and audited."""
    session.add(
        KubeconfigGrant(
            team_id=team.id,
            user_id=actor.id,
            portal_role=person.portal_role,
            cluster_role=person.cluster_role,
            account=person.account,
            token_id=issued.token_id,
            simulated=backend.simulated,
            issued_at=now,
            expires_at=issued.expires_at,
        )
    )
    session.flush()
    audit.record(
        session,
        actor=actor,
        event=Event.KUBECONFIG_ISSUED,
        team_id=team.id,
        summary=f"downloaded a personal kubeconfig for {team.name} "
        f"({person.cluster_role}, expires in {format_duration(seconds)})",
        details={
            "user_id": actor.id,
            "email": actor.email,
            "cluster_role": person.cluster_role,
            "ttl_seconds": seconds,
            "expires_at": issued.expires_at.isoformat(),
            "token_id": issued.token_id,
            "account": person.account,
        },
    )


def _oidc_kubeconfig(
    session: Session,
    backend: CredentialIssuer,
    settings: Settings,
    actor: User,
    team: Team,
    spec: TeamSpec,
    person: Person,
) -> str:
    """A kubeconfig that signs in through the identity provider (no credential made)."""
    try:
        text = backend.oidc_kubeconfig(
            spec,
            person,
            issuer=settings.oidc_issuer or "",
            client_id=settings.kubeconfigs.oidc_client_id or settings.oidc_client_id,
        )
    except BackendError as exc:
        raise Conflict(f"the kubeconfig could not be made: {exc}") from exc
    audit.record(
        session,
        actor=actor,
        event=Event.KUBECONFIG_ISSUED,
        team_id=team.id,
        summary=f"downloaded an identity-provider kubeconfig for {team.name}",
        details={"mode": "oidc", "cluster_role": person.cluster_role},
    )
    return text


def _clear_the_way(
    session: Session,
    backend: CredentialIssuer,
    team: Team,
    actor: User,
    spec: TeamSpec,
    person: Person,
    now: datetime,
) -> None:
    """What stands in the way of a fresh account: grants at another role (the role
    changed and the sweeper has not got to it yet) are revoked now, and any revoked
    account is deleted before a new one with the same name is made, so that no old
    token can work again."""
    earlier = repo.get_person_grants(session, team.id, actor.id)
    changed = [g for g in earlier if g.revoked_at is None and g.cluster_role != person.cluster_role]
    for grant in changed:
        grant.revoked_at = now
        grant.revoked_reason = f"role changed to {person.cluster_role}"
    if any(g.revoked_at is not None for g in earlier):
        try:
            backend.revoke_credentials(spec, [person.account])
        except BackendError as exc:
            raise Conflict(
                f"your earlier kubeconfig could not be revoked first: {exc}. Try again."
            ) from exc
        for grant in earlier:
            if grant.revoked_at is not None:
                grant.removed_at = now


def revoke(
    session: Session,
    *,
    actor: User | None,
    team: Team,
    user_ids: list[int] | None,
    reason: str,
) -> int:
    """Revoke the kubeconfigs of these people (None: everyone's) for the team. Returns how
    many people lost one; their ServiceAccounts are deleted by the sweeper at once."""
    people = repo.revoke(session, team_id=team.id, user_ids=user_ids, now=utcnow(), reason=reason)
    if people:
        _record_revocation(session, actor, team.id, people, reason)
    request_effect(session, Effect.ACCESS_CHANGED)
    return len(people)


def revoke_own_or_all(session: Session, *, actor: User, team: Team, everyone: bool) -> int:
    """ "Revoke my kubeconfigs" (``everyone`` False) or "revoke everyone's" for the team;
    whether the actor may do the latter is the caller's check (leads and admins)."""
    return revoke(
        session,
        actor=actor,
        team=team,
        user_ids=None if everyone else [actor.id],
        reason="revoked by a lead or admin" if everyone else "revoked by its holder",
    )


def _record_revocation(
    session: Session, actor: User | None, team_id: int, people: list[int], reason: str
) -> None:
    audit.record(
        session,
        actor=actor,
        event=Event.KUBECONFIG_REVOKED,
        team_id=team_id,
        summary=f"revoked the kubeconfigs of {len(people)} "
        f"{'person' if len(people) == 1 else 'people'}: {reason}",
        details={"user_ids": people, "reason": reason},
    )


def revoke_unentitled(session: Session, settings: Settings) -> list[int]:
    """Level-triggered: every unrevoked grant whose holder may no longer hold it (left the
    team, another role, lost admin, team decommissioned) is revoked. Returns the teams
    where something was revoked."""
    now = utcnow()
    by_team: dict[int, dict[str, list[KubeconfigGrant]]] = {}
    for grant, status, role, is_admin in repo.get_unrevoked_with_standing(session):
        if status in GONE:
            reason = "the team was decommissioned"
        else:
            entitled = entitlement(settings, is_admin=is_admin, member_role=role)
            if entitled is None:
                reason = "no longer a member of the team"
            elif entitled[1] != grant.cluster_role:
                reason = f"role changed to {entitled[1]}"
            else:
                continue
        by_team.setdefault(grant.team_id, {}).setdefault(reason, []).append(grant)
    for team_id, reasons in by_team.items():
        for reason, grants in reasons.items():
            for grant in grants:
                grant.revoked_at = now
                grant.revoked_reason = reason
            _record_revocation(session, None, team_id, sorted({g.user_id for g in grants}), reason)
    session.flush()
    return sorted(by_team)


@dataclass(frozen=True)
class Holder:
    user_id: int
    email: str
    portal_role: str
    cluster_role: str
    expires_at: datetime  # the newest kubeconfig's
    simulated: bool
    name: str = ""
    count: int = 1  # live kubeconfigs the person holds for the team
    first_expires_at: datetime | None = None  # the earliest of them, when more than one


@dataclass(frozen=True)
class Pending:
    email: str
    reason: str
    revoked_at: datetime


def holders(session: Session, team: Team, settings: Settings) -> tuple[list[Holder], list[Pending]]:
    """Who holds a working kubeconfig for the team (with expiry), and revocations that
    are decided but not yet carried out in the vCluster. A holder who may no longer hold
    theirs (removed a moment ago) is shown as being revoked at once, before the sweeper
    has recorded it."""
    return holders_of(team, repo.get_team_grants(session, team.id), settings)


def holders_of(
    team: Team, grants: list[tuple[User, KubeconfigGrant, str | None]], settings: Settings
) -> tuple[list[Holder], list[Pending]]:
    """``holders`` from the team's grants as read (``repository.team_grants``)."""
    now = utcnow()
    live: list[Holder] = []
    pending: dict[str, Pending] = {}
    pending_ids: set[int] = set()
    seen: dict[int, int] = {}  # user id -> index in live
    for u, g, role in grants:
        if g.expires_at <= now:
            continue  # expired: nothing to hold or to revoke
        if g.revoked_at is not None:
            pending.setdefault(u.email, Pending(u.email, g.revoked_reason, g.revoked_at))
            continue
        if u.id in pending_ids:
            continue  # being revoked: listed once, with the reason
        if u.id in seen:
            # One line per person (the newest is listed first), saying how many.
            held = live[seen[u.id]]
            first = min(held.first_expires_at or held.expires_at, g.expires_at)
            live[seen[u.id]] = replace(held, count=held.count + 1, first_expires_at=first)
            continue
        seen[u.id] = len(live)
        entitled = (
            None
            if team.status in GONE
            else entitlement(settings, is_admin=u.is_admin, member_role=role)
        )
        if entitled is not None and entitled[1] == g.cluster_role:
            live.append(
                Holder(
                    u.id,
                    u.email,
                    g.portal_role,
                    g.cluster_role,
                    g.expires_at,
                    g.simulated,
                    name=u.display_name,
                )
            )
        else:
            del seen[u.id]
            pending_ids.add(u.id)
            reason = "no longer allowed" if entitled is None else f"role changed to {entitled[1]}"
            pending[u.email] = Pending(u.email, reason, now)
    return live, list(pending.values())


EXPIRY_NOTICE = timedelta(days=1)


def tell_expiring(session: Session, now: datetime | None = None) -> int:
    """Tell each holder of a long-lived kubeconfig (one that lasts more than a day) that
    it expires soon, once: within a day and within a quarter of its lifetime. A shorter
    one is not announced: its holder chose its expiry when downloading it."""
    now = now or utcnow()
    told = 0
    for grant, team_name in repo.get_expiring_untold(session, now=now, within=EXPIRY_NOTICE):
        grant.expiry_told_at = now
        expires = f"{grant.expires_at:%Y-%m-%d %H:%M}"
        events.record(
            session,
            Event.KUBECONFIG_EXPIRING,
            actor=None,
            team=TeamRef(grant.team_id, team_name),
            summary=f"told user #{grant.user_id} that their kubeconfig for {team_name} "
            f"expires at {expires} UTC",
            facts={"user_id": grant.user_id, "expires_at": expires},
            person_id=grant.user_id,
        )
        told += 1
    return told
