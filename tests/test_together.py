"""Several reads in one round trip (``app.core.together``): the same values as each read
on its own, on both databases; one statement on PostgreSQL."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from datetime import timedelta
from typing import Any

import pytest
from sqlalchemy import Numeric, cast, event, inspect, select
from sqlalchemy.orm import Session
from sqlalchemy.orm.exc import DetachedInstanceError

from app.access import repository as access_repo
from app.audit import repository as audit_repo
from app.core.models import (
    AuditEvent,
    Decision,
    KubeconfigGrant,
    MemberRole,
    Outcome,
    PortalRole,
    RequestStatus,
    TeamMember,
    utcnow,
)
from app.core.together import Read, read, read_together
from app.teams import repository as teams_repo
from tests.factories import make_org, make_user, submit


@contextmanager
def statements(session: Session) -> Iterator[list[str]]:
    seen: list[str] = []

    def count(_conn: Any, _cursor: Any, statement: str, *_args: Any) -> None:
        seen.append(statement)

    engine = session.get_bind()
    event.listen(engine, "before_cursor_execute", count)
    try:
        yield seen
    finally:
        event.remove(engine, "before_cursor_execute", count)


def a_busy_team(session: Session) -> int:
    """A team with two requests (one decided, with changes), three members, grants held,
    revoked and held by someone no longer in it, and more events than the page shows."""
    make_org(session, gpus="4")
    lead = make_user(session, "lead@example.org")
    admin = make_user(session, "admin@example.org", admin=True)
    first = submit(session, lead, "nlp")
    team_id = first.team_id
    first.status = RequestStatus.APPROVED
    session.flush()
    second = submit(session, lead, "nlp-more")
    second.team_id = team_id
    session.add(
        Decision(
            request_id=first.id,
            actor_id=admin.id,
            outcome=Outcome.APPROVED,
            reason="fits",
            gpu_quota_centi=50,
            changes={"gpu_quota": ["0.33", "0.5"]},
        )
    )
    member = make_user(session, "member@example.org")
    gone = make_user(session, "gone@example.org")
    session.add(TeamMember(team_id=team_id, user_id=member.id, role=MemberRole.MEMBER))
    now = utcnow()
    for user, role, revoked in (
        (lead, PortalRole.LEAD, None),
        (lead, PortalRole.LEAD, now),
        (member, PortalRole.MEMBER, None),
        (gone, PortalRole.MEMBER, None),
    ):
        session.add(
            KubeconfigGrant(
                team_id=team_id,
                user_id=user.id,
                portal_role=role,
                cluster_role="edit",
                account=f"portal-user-{user.id}",
                simulated=True,
                expires_at=now + timedelta(hours=user.id),
                revoked_at=revoked,
                revoked_reason="no longer allowed" if revoked else "",
            )
        )
    for n in range(25):
        session.add(
            AuditEvent(
                actor="lead@example.org",
                action="team.note",
                team_id=team_id,
                summary=f"note {n}",
                details={"n": n, "nested": {"list": [n, None, True]}},
            )
        )
    session.flush()
    return team_id


def the_reads(team_id: int) -> tuple[Read[Any], Read[Any], Read[Any], Read[Any]]:
    return (
        teams_repo.team_requests_decided(team_id),
        teams_repo.team_members(team_id),
        access_repo.team_grants(team_id),
        audit_repo.team_events(team_id, 20),
    )


def columns_of(value: Any) -> Any:
    """An entity as its columns' values and their types; anything else as it is."""
    if value is None or not hasattr(value, "__mapper__"):
        return value
    return {
        a.key: (getattr(value, a.key), type(getattr(value, a.key)))
        for a in inspect(value).mapper.column_attrs
    }


def plain(value: Any) -> Any:
    if isinstance(value, int | str):
        return value
    if isinstance(value, dict):
        return {k: plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [plain(v) for v in value]
    return columns_of(value)


def test_reads_together_give_what_each_read_gives_alone(session: Session) -> None:
    team_id = a_busy_team(session)
    alone = [read(session, r) for r in the_reads(team_id)]
    session.expunge_all()  # nothing to take from the identity map
    together = read_together(session, *the_reads(team_id))

    assert plain(list(together)) == plain(alone)
    (requests, decisions), members, grants, events = together
    assert [r.id for r in requests] == sorted((r.id for r in requests), reverse=True)
    assert len(requests) == 2
    assert len(decisions) == 1, "an undecided request has no decision"
    assert decisions[requests[-1].id].changes == {"gpu_quota": ["0.33", "0.5"]}
    assert [m.role for _, m in members] == [MemberRole.LEAD, MemberRole.MEMBER]
    assert isinstance(members[0][1].role, MemberRole)
    assert [role for _, _, role in grants].count(None) == 1, "one holder left the team"
    assert len(events) == 20, "limited"
    assert events[0].summary == "note 24", "newest first"
    assert events[0].details == {"n": 24, "nested": {"list": [24, None, True]}}
    assert events[0].at.tzinfo is not None


def test_one_statement_on_postgresql_each_read_alone_elsewhere(session: Session) -> None:
    team_id = a_busy_team(session)
    with statements(session) as seen:
        read_together(session, *the_reads(team_id))
    postgresql = session.get_bind().dialect.name == "postgresql"
    assert len(seen) == (1 if postgresql else 4)
    if postgresql:
        assert seen[0].count("json_build_array") >= 4


def test_entities_read_together_are_for_showing(session: Session) -> None:
    """Detached on both databases alike: a relationship nobody read raises at once."""
    team_id = a_busy_team(session)
    (requests, decisions), _, _, _ = read_together(session, *the_reads(team_id))
    assert inspect(requests[0]).detached
    with pytest.raises(DetachedInstanceError):
        _ = requests[0].template_version
    with pytest.raises(DetachedInstanceError):
        _ = next(iter(decisions.values())).template_version


def test_reads_together_refuse_what_they_cannot_carry(session: Session) -> None:
    team_id = a_busy_team(session)
    with pytest.raises(ValueError, match="'team_id' two values"):
        read_together(
            session, teams_repo.team_members(team_id), access_repo.team_grants(team_id + 1)
        )
    exact = Read(
        select(cast(AuditEvent.id, Numeric)).where(AuditEvent.team_id == team_id),
        {},
        list,
    )
    with pytest.raises(TypeError, match=r"cannot carry a column of type Numeric\(\)"):
        read_together(session, exact, teams_repo.team_members(team_id))
