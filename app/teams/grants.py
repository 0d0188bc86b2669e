"""Temporary quota grants: a team's GPU guarantee (and limit) raised in one pool for a
window — "+2 GPU until Friday 18:00" — reviewed like a quota change, added to the team's
quota at its start and taken back at its end.

The team's quota lines always hold its base quota plus every grant applied and not yet
released there; a quota change is asked and approved in base values (the grants still
applied are added back on approval), so a change approved during a grant is kept after
it. Start and end are level-triggered (``tick``): each pass applies the grants whose
start passed and releases those whose end passed, also after the portal was down. The
fit is checked over time: at no moment of a window may the pool's base guarantees plus
every approved grant active then exceed the pool's budget, under the org's lock (racing
admins wait for each other).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from sqlalchemy.orm import Session

from app.core.errors import Conflict, InvalidInput, NotFound
from app.core.events import Event
from app.core.models import (
    GrantStatus,
    Org,
    Pool,
    QuotaGrant,
    Team,
    TeamStatus,
    User,
    utcnow,
)
from app.core.quantities import format_hundredths, parse_hundredths
from app.core.quota import Quota
from app.notifications import events
from app.teams import repository as repo
from app.teams.rules import parse_reason

PAST_SLACK = timedelta(minutes=5)  # a start this little in the past means "now"
RECENT = timedelta(days=7)  # ended grants listed this long after
OPEN = (GrantStatus.SUBMITTED, GrantStatus.APPROVED)
GONE = (TeamStatus.DECOMMISSIONING, TeamStatus.DECOMMISSIONED)  # a grant ends with them


@dataclass(frozen=True)
class Ask:
    """A grant as a lead asks for it, parsed."""

    pool: str  # the pool's name ("": the default pool)
    gpu_centi: int
    limit_centi: int
    starts_at: datetime
    ends_at: datetime
    reason: str


def parse_moment(raw: str, *, what: str) -> datetime:
    """A moment as a form (``2026-12-11T18:00``, read as UTC) or the API (ISO 8601 with
    an offset) writes it."""
    text = raw.strip()
    try:
        moment = datetime.fromisoformat(text)
    except ValueError:
        raise ValueError(f"{what}: write a date and time such as 2026-12-11T18:00 (UTC)") from None
    return moment.replace(tzinfo=UTC) if moment.tzinfo is None else moment.astimezone(UTC)


def parse_ask(data: Mapping[str, str], *, now: datetime, max_days: int) -> Ask:
    """A grant's fields checked together: every problem named by its field."""
    errors: dict[str, str] = {}
    gpus = limit = 0
    try:
        gpus = parse_hundredths(data.get("gpus", ""), what="the GPUs added")
        if gpus <= 0:
            errors["gpus"] = "add at least 0.01 GPU"
    except ValueError as exc:
        errors["gpus"] = str(exc)
    raw_limit = str(data.get("limit", "") or "").strip()
    try:
        limit = parse_hundredths(raw_limit, what="the limit added") if raw_limit else gpus
        if limit < gpus and "gpus" not in errors:
            errors["limit"] = "add at least as much limit as guarantee (a guarantee above "
            errors["limit"] += "the limit could never be used)"
    except ValueError as exc:
        errors["limit"] = str(exc)
    starts_at, ends_at = now, now
    raw_start = str(data.get("starts_at", "") or "").strip()
    try:
        starts_at = parse_moment(raw_start, what="the start") if raw_start else now
        if starts_at < now - PAST_SLACK:
            errors["starts_at"] = "is in the past: leave it empty to start now"
        starts_at = max(starts_at, now)
    except ValueError as exc:
        errors["starts_at"] = str(exc)
    raw_end = str(data.get("ends_at", "") or "").strip()
    if not raw_end:
        errors["ends_at"] = "say until when, such as 2026-12-11T18:00 (UTC)"
    else:
        try:
            ends_at = parse_moment(raw_end, what="the end")
            if ends_at <= now:
                errors["ends_at"] = "is in the past: choose a moment after now"
            elif ends_at <= starts_at:
                errors["ends_at"] = "must be after the start"
            elif ends_at - starts_at > timedelta(days=max_days):
                errors["ends_at"] = (
                    f"a grant lasts at most {max_days} days: end it sooner, and ask again "
                    "near its end to extend it"
                )
        except ValueError as exc:
            errors["ends_at"] = str(exc)
    reason = str(data.get("reason", "") or "").strip()
    if not reason:
        errors["reason"] = "say what it is for (a deadline, a run, a demo): admins decide on it"
    elif len(reason) > 500:
        errors["reason"] = f"keep it to 500 characters (it has {len(reason)})"
    if errors:
        raise InvalidInput(errors)
    return Ask(str(data.get("pool", "") or "").strip(), gpus, limit, starts_at, ends_at, reason)


def window(grant: QuotaGrant | Ask) -> str:
    """ "from 2026-12-08 09:00 until 2026-12-11 18:00 UTC"."""
    start = grant.starts_at.strftime("%Y-%m-%d %H:%M")
    end = (grant.end if isinstance(grant, QuotaGrant) else grant.ends_at).strftime("%Y-%m-%d %H:%M")
    return f"from {start} until {end} UTC"


def describe(grant: QuotaGrant | Ask, pool: Pool) -> str:
    where = "" if pool.is_default else f" in pool {pool.name}"
    return f"+{format_hundredths(grant.gpu_centi)} GPU{where} {window(grant)}"


def _pool_of(session: Session, org: Org, team: Team, name: str) -> Pool:
    """The pool a grant is asked in: the default pool, or another the team holds quota in."""
    if not name:
        return org.default_pool
    held = {pool.name: pool for pool in team.quota_by_pool()}
    if name not in held:
        raise InvalidInput(
            {"pool": f"{team.name} holds no quota in a pool named {name!r}: ask there first"}
        )
    return held[name]


def ask(session: Session, *, actor: User, team: Team, asked: Ask, now: datetime) -> QuotaGrant:
    """Ask for a grant; it waits for an admin. One grant at a time per team and pool:
    a window overlapping another open grant is refused with it named."""
    if team.status != TeamStatus.READY:
        raise Conflict(f"team {team.name} is {team.status}: grants are possible once it is ready")
    org = repo.get_org(session)
    pool = _pool_of(session, org, team, asked.pool)
    for other in repo.open_grants(session, team.id, pool.id):
        if other.starts_at < asked.ends_at and asked.starts_at < other.end:
            raise InvalidInput(
                {
                    "starts_at": f"overlaps grant #{other.id} ({describe(other, pool)}): end "
                    "that one first, or choose a window after it"
                }
            )
    grant = QuotaGrant(
        team_id=team.id,
        pool_id=pool.id,
        gpu_centi=asked.gpu_centi,
        limit_centi=asked.limit_centi,
        starts_at=asked.starts_at,
        ends_at=asked.ends_at,
        reason=asked.reason,
        requested_by_id=actor.id,
        created_at=now,
        decision_reason="",
    )
    session.add(grant)
    session.flush()
    events.record(
        session,
        Event.GRANT_SUBMITTED,
        actor=actor,
        team=team,
        summary=f"asked for grant #{grant.id} for {team.name}: {describe(grant, pool)} "
        f"({asked.reason})",
        facts=_facts(grant, pool),
    )
    return grant


def _facts(grant: QuotaGrant, pool: Pool) -> dict[str, object]:
    return {
        "grant_id": grant.id,
        "gpus": format_hundredths(grant.gpu_centi),
        "pool": "" if pool.is_default else pool.name,
        "window": window(grant),
        "reason": grant.reason,
    }


def budget_of(org: Org, pool: Pool) -> int:
    """What teams may be guaranteed in ``pool``, in hundredths of a GPU."""
    return org.gpus_centi if pool.is_default else pool.capacity.get("gpu", 0)


def approved_in(session: Session, pool_id: int, *, since: datetime) -> list[QuotaGrant]:
    """The approved grants of ``pool_id`` not over before ``since``."""
    return [g for g in repo.approved_grants(session, pool_id) if g.end > since]


def peak(grants: Iterable[QuotaGrant], start: datetime, end: datetime) -> tuple[int, datetime]:
    """The most GPU the grants add at once within [start, end), and the first moment it
    is reached (the sum changes only where a grant starts)."""
    found = [g for g in grants if g.starts_at < end and start < g.end]
    best, when = 0, start
    for moment in sorted({start, *(g.starts_at for g in found if g.starts_at > start)}):
        total = sum(g.gpu_centi for g in found if g.starts_at <= moment < g.end)
        if total > best:
            best, when = total, moment
    return best, when


def base_committed(session: Session, org: Org, pool: Pool, *, exclude_team_id: int | None) -> int:
    """The pool's guarantees without the grants applied now: every team's base."""
    committed = repo.committed_by_pool(session, org.id, exclude_team_id=exclude_team_id)
    running = repo.applied_grants(session, pool.id, exclude_team_id=exclude_team_id)
    applied = sum(g.gpu_centi for g in running)
    return committed.get(pool.id, 0) - applied


@dataclass(frozen=True)
class Fit:
    """A grant's window against its pool: the most guaranteed at once in it (every team's
    base plus the approved grants active then, this one included), when first, and the
    pool's budget."""

    committed_centi: int
    at: datetime
    budget_centi: int
    grant_centi: int

    @property
    def fits(self) -> bool:
        return self.committed_centi <= self.budget_centi

    @property
    def free_centi(self) -> int:
        """What is free at that moment for this grant (the rest of it committed)."""
        return max(0, self.budget_centi - (self.committed_centi - self.grant_centi))


def window_fit(session: Session, org: Org, pool: Pool, grant: QuotaGrant, now: datetime) -> Fit:
    start = max(now, grant.starts_at)
    others = [g for g in approved_in(session, pool.id, since=start) if g.id != grant.id]
    added, at = peak([*others, grant], start, grant.end)
    base = base_committed(session, org, pool, exclude_team_id=None)
    return Fit(base + added, at, budget_of(org, pool), grant.gpu_centi)


def check_window(session: Session, org: Org, pool: Pool, grant: QuotaGrant, now: datetime) -> None:
    """The grant fits the pool at every moment of its window (the org is locked)."""
    fit = window_fit(session, org, pool, grant, now)
    if not fit.fits:
        where = "the pool" if pool.is_default else f"pool {pool.name}"
        raise Conflict(
            f"approving grant #{grant.id} ({describe(grant, pool)}) would commit "
            f"{format_hundredths(fit.committed_centi)} of {where}'s "
            f"{format_hundredths(fit.budget_centi)} GPU at {fit.at.strftime('%Y-%m-%d %H:%M')} "
            f"UTC, with the other grants approved then; {format_hundredths(fit.free_centi)} "
            "GPU is free at that moment. Reject it with a shorter or later window in mind, "
            "or raise the pool first."
        )


def future_peak(session: Session, pool: Pool, now: datetime) -> int:
    """The most GPU approved grants add to the pool at once from now on."""
    grants = approved_in(session, pool.id, since=now)
    if not grants:
        return 0
    return peak(grants, now, max(g.end for g in grants))[0]


def applied_centi(session: Session, team_id: int, pool_id: int) -> tuple[int, int]:
    """The guarantee and limit the team's applied grants add in the pool now."""
    found = repo.applied_grants(session, pool_id, team_id=team_id)
    return sum(g.gpu_centi for g in found), sum(g.limit_centi for g in found)


def with_grants(values: Quota, added: tuple[int, int]) -> Quota:
    """``values`` (base) with the applied grants' guarantee and limit added back."""
    gpu, limit = added
    if not gpu and not limit:
        return values
    line = values.gpu
    return values.replace(
        "gpu",
        guarantee=(line.guarantee or 0) + gpu,
        limit=line.limit + limit if line.limit is not None else None,
    )


def without_grants(values: Quota, added: tuple[int, int]) -> Quota:
    """The team's lines (``values``) without what its applied grants add: its base."""
    gpu, limit = added
    if not gpu and not limit:
        return values
    line = values.gpu
    guarantee = max(0, (line.guarantee or 0) - gpu)
    return values.replace(
        "gpu",
        guarantee=guarantee,
        limit=max(guarantee, line.limit - limit) if line.limit is not None else None,
    )


def get_grant(session: Session, grant_id: int) -> QuotaGrant:
    grant = repo.get_grant(session, grant_id)
    if grant is None:
        raise NotFound(f"no grant #{grant_id}")
    return grant


def approve(session: Session, *, actor: User, grant_id: int, now: datetime) -> QuotaGrant:
    """Approve a waiting grant if it fits its pool at every moment of its window; one
    whose start has come is applied at once."""
    org = repo.lock_org(session, repo.get_org(session).id)
    grant = get_grant(session, grant_id)
    session.refresh(grant)
    team = repo.get_team(session, grant.team_id)
    if grant.status != GrantStatus.SUBMITTED:
        raise Conflict(f"grant #{grant.id} is {grant.status}: only a waiting grant is decided")
    if grant.ends_at <= now:
        raise Conflict(f"grant #{grant.id} ended before a decision: the lead may ask again")
    check_window(session, org, grant.pool, grant, now)
    grant.status, grant.decided_by_id, grant.decided_at = GrantStatus.APPROVED, actor.id, now
    events.record(
        session,
        Event.GRANT_APPROVED,
        actor=actor,
        team=team,
        summary=f"approved grant #{grant.id} for {team.name}: {describe(grant, grant.pool)}",
        facts=_facts(grant, grant.pool),
        requester_id=grant.requested_by_id,
    )
    tick(session, now)
    return grant


def reject(session: Session, *, actor: User, grant_id: int, reason: str, now: datetime) -> None:
    reason = parse_reason(reason, required=True)
    grant = get_grant(session, grant_id)
    if grant.status != GrantStatus.SUBMITTED:
        raise Conflict(f"grant #{grant.id} is {grant.status}: only a waiting grant is decided")
    team = repo.get_team(session, grant.team_id)
    grant.status, grant.decided_by_id, grant.decided_at = GrantStatus.REJECTED, actor.id, now
    grant.decision_reason = reason
    events.record(
        session,
        Event.GRANT_REJECTED,
        actor=actor,
        team=team,
        summary=f"rejected grant #{grant.id} for {team.name}: {reason}",
        facts={**_facts(grant, grant.pool), "reason": reason},
        requester_id=grant.requested_by_id,
    )


def end(session: Session, *, actor: User, grant: QuotaGrant, now: datetime) -> None:
    """End a grant before its window does (a lead of its team or an admin): a waiting one
    is withdrawn, an approved one ends now and is taken back at once."""
    repo.lock_org(session, repo.get_org(session).id)
    session.refresh(grant)
    team = repo.get_team(session, grant.team_id)
    if grant.status == GrantStatus.SUBMITTED:
        grant.status = GrantStatus.WITHDRAWN
        grant.ended_by_id, grant.ended_early_at = actor.id, now
        events.record(
            session,
            Event.GRANT_ENDED,
            actor=actor,
            team=team,
            summary=f"withdrew grant #{grant.id} for {team.name} before a decision",
            facts=_facts(grant, grant.pool),
        )
        return
    if grant.status != GrantStatus.APPROVED or grant.released_at is not None or grant.end <= now:
        raise Conflict(f"grant #{grant.id} has already ended")
    grant.ended_early_at, grant.ended_by_id = now, actor.id
    tick(session, now, actor=actor)


def tick(session: Session, now: datetime, *, actor: User | None = None) -> int:
    """Apply every approved grant whose start has come and release every one whose end
    has passed (also one never applied: its whole window passed while the portal was
    down); the caller holds the org's lock or takes it here. Returns how many changed."""
    repo.lock_org(session, repo.get_org(session).id)
    changed = 0
    for grant in repo.due_grants(session, now):
        team = repo.get_team(session, grant.team_id)
        if grant.end <= now or team.status in GONE:
            _release(session, grant, team, now, actor)
        elif grant.applied_at is None:
            _apply(session, grant, team, now)
        else:
            continue
        changed += 1
    return changed


def _apply(session: Session, grant: QuotaGrant, team: Team, now: datetime) -> None:
    pool = grant.pool
    held = team.quota_in(pool)
    team.set_quota(pool, with_grants(held, (grant.gpu_centi, grant.limit_centi)))
    grant.applied_at = now
    _changed(team, now)
    events.record(
        session,
        Event.GRANT_STARTED,
        actor=None,
        team=team,
        summary=f"grant #{grant.id} started: {team.name}'s guarantee"
        f"{'' if pool.is_default else ' in pool ' + pool.name} is "
        f"{format_hundredths(team.quota_in(pool).gpu.guarantee or 0)} GPU until "
        f"{grant.end.strftime('%Y-%m-%d %H:%M')} UTC",
        facts=_facts(grant, pool),
    )


def _release(
    session: Session, grant: QuotaGrant, team: Team, now: datetime, actor: User | None
) -> None:
    pool = grant.pool
    applied = grant.applied_at is not None
    if applied and team.status not in GONE:
        held = team.quota_in(pool)
        team.set_quota(pool, without_grants(held, (grant.gpu_centi, grant.limit_centi)))
        _changed(team, now)
    grant.released_at = now
    how = "ended early" if grant.ended_early_at is not None else "ended"
    if team.status in GONE:
        how = "ended with the team's cluster"
    elif not applied:
        how = "passed while the portal was not running: never applied"
    events.record(
        session,
        Event.GRANT_ENDED,
        actor=actor,
        team=team,
        summary=f"grant #{grant.id} {how}: {team.name}'s guarantee"
        f"{'' if pool.is_default else ' in pool ' + pool.name} is back to "
        f"{format_hundredths(team.quota_in(pool).gpu.guarantee or 0)} GPU",
        facts=_facts(grant, pool),
    )


def _changed(team: Team, now: datetime) -> None:
    """The team's queue is wanted with new values: the next pass applies them (a change
    the portal made, never a repair), as soon as it can (whatever clock ``now`` is of)."""
    team.desired_generation += 1
    team.next_attempt_at = min(now, utcnow())


def remind(session: Session, now: datetime, *, hours: int) -> int:
    """Tell each team once, ``hours`` before a grant of it ends."""
    told = 0
    for grant in repo.unreminded_grants(session):
        if grant.end - timedelta(hours=hours) > now:
            continue
        team = repo.get_team(session, grant.team_id)
        grant.reminded_at = now
        events.record(
            session,
            Event.GRANT_ENDING,
            actor=None,
            team=team,
            summary=f"grant #{grant.id} of {team.name} ends at "
            f"{grant.end.strftime('%Y-%m-%d %H:%M')} UTC",
            facts={**_facts(grant, grant.pool), "ends": grant.end.strftime("%Y-%m-%d %H:%M")},
        )
        told += 1
    return told


def of_team(session: Session, team_id: int, *, since: datetime) -> list[QuotaGrant]:
    """The team's grants still open or ended after ``since``, newest window first."""
    return [g for g in repo.grants_of(session, team_id) if _shown(g, since)]


def of_org(session: Session, *, since: datetime) -> list[QuotaGrant]:
    """Every grant waiting, running or still to come, and those ended after ``since``."""
    return [g for g in reversed(repo.grants_of(session)) if _shown(g, since)]


def shown(found: Iterable[QuotaGrant], *, since: datetime) -> list[QuotaGrant]:
    """Of ``found``, those waiting, running or to come, or ended after ``since``."""
    return [g for g in found if _shown(g, since)]


def _shown(grant: QuotaGrant, since: datetime) -> bool:
    """Waiting, running or to come; or over, but after ``since``."""
    return (grant.status in OPEN and grant.released_at is None) or grant.end >= since


def base(session: Session, team: Team, pool: Pool) -> Quota:
    """The team's own quota in ``pool``: its lines without its grants applied now (what a
    quota change asks and approves)."""
    return without_grants(team.quota_in(pool), applied_centi(session, team.id, pool.id))


def base_pools(session: Session, team: Team) -> dict[Pool, Quota]:
    """``base`` in each pool but the default the team holds quota in."""
    return {pool: base(session, team, pool) for pool in team.quota_by_pool()}


def waiting(session: Session) -> list[QuotaGrant]:
    """The grants waiting for an admin, oldest first."""
    return [g for g in reversed(repo.grants_of(session)) if g.status == GrantStatus.SUBMITTED]


def team_of(session: Session, grant: QuotaGrant) -> Team:
    return repo.get_team(session, grant.team_id)
