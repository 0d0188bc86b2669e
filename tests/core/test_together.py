"""Several reads in one round trip (``app.core.together``): the same values as each read
on its own, on both databases; one statement on PostgreSQL."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from datetime import timedelta
from typing import Any

import pytest
from sqlalchemy import Numeric, cast, event, inspect, select
from sqlalchemy.orm import Session, make_transient_to_detached
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
from app.core.quota import Quota
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
    org = make_org(session, gpus="4")
    lead = make_user(session, "lead@example.org")
    admin = make_user(session, "admin@example.org", admin=True)
    first = submit(session, lead, "nlp")
    team_id = first.team_id
    first.status = RequestStatus.APPROVED
    session.flush()
    second = submit(session, lead, "nlp-more")
    second.team_id = team_id
    decision = Decision(
        request_id=first.id,
        actor_id=admin.id,
        outcome=Outcome.APPROVED,
        reason="fits",
        changes={"gpu_quota": ["0.33", "0.5"]},
    )
    decision.set_quota(org.default_pool, Quota.of_gpu(50, 100))
    session.add(decision)
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


def _entities(value: Any) -> Iterator[Any]:
    if hasattr(value, "__mapper__"):
        yield value
    elif isinstance(value, dict):
        for item in value.values():
            yield from _entities(item)
    elif isinstance(value, list | tuple):
        for item in value:
            yield from _entities(item)


def test_entities_are_detached_as_sqlalchemy_detaches_them(session: Session) -> None:
    """Built without ``make_transient_to_detached`` (13 us an entity): the same state as
    that function leaves on the same values, entity by entity (if a version of
    SQLAlchemy does more there, this says what)."""
    team_id = a_busy_team(session)
    built = list(_entities(read_together(session, *the_reads(team_id))))
    assert len({type(entity) for entity in built}) >= 5, built
    for entity in built:
        twin = type(entity).__mapper__.class_manager.new_instance()
        twin.__dict__.update(
            {k: v for k, v in entity.__dict__.items() if k != "_sa_instance_state"}
        )
        make_transient_to_detached(twin)
        ours, theirs = inspect(entity), inspect(twin)
        assert ours.detached
        assert ours.key == theirs.key
        assert ours.key is not None
        assert ours.key[1] == inspect(entity).mapper.primary_key_from_instance(entity)
        assert (ours.modified, ours.expired) == (theirs.modified, theirs.expired)
        assert dict(ours.committed_state) == dict(theirs.committed_state)
        assert ours.expired_attributes == theirs.expired_attributes
        assert ours.unloaded == theirs.unloaded
        assert dict(ours.callables) == dict(theirs.callables)


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
