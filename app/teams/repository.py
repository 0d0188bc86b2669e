"""Every query the teams domain needs."""

from __future__ import annotations

import functools
from collections.abc import Collection, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import (
    ColumnElement,
    Integer,
    ScalarSelect,
    Select,
    bindparam,
    func,
    select,
    update,
)
from sqlalchemy.orm import InstrumentedAttribute, Session, aliased, lazyload, selectinload
from sqlalchemy.orm.attributes import set_committed_value

from app.core import quota
from app.core.db import constant, constants
from app.core.errors import NotFound
from app.core.models import (
    COMMITTED_STATUSES,
    GPU_RESOURCE,
    LIVE_STATUSES,
    ClusterRequest,
    ClusterTemplate,
    Decision,
    GrantStatus,
    MemberRole,
    Org,
    Pool,
    PoolCapacity,
    ProvisioningStep,
    QuotaGrant,
    QuotaLine,
    RequestQuotaLine,
    RequestStatus,
    RightsizingSuggestion,
    StoredValues,
    Team,
    TeamMember,
    TeamQuotaLine,
    TeamSchedule,
    TeamStatus,
    TemplateVersion,
    User,
    default_pool_ids,
)
from app.core.quota import PRIORITY_DEFAULT, Quota
from app.core.together import AnySelect, Read, Rows, read

NO_ORG = "no GPU pool is configured yet: run `gpu-portal seed` or create one"


def get_org(session: Session) -> Org:
    """The org, with its default pool's amounts read in the same statement."""
    return read(session, org_with(()))[0]


def _capacity_columns() -> tuple[ScalarSelect[int], ...]:
    """The org's default pool's amount of each resource, as columns of the org's row."""
    return tuple(
        select(PoolCapacity.amount)
        .join(Pool, Pool.id == PoolCapacity.pool_id)
        .where(Pool.org_id == Org.id, Pool.is_default, PoolCapacity.resource == res.key)
        .scalar_subquery()
        for res in quota.RESOURCES
    )


def _with_lines(
    query: AnySelect, line_class: type[QuotaLine], key: str, owner: InstrumentedAttribute[int]
) -> AnySelect:
    """``query`` with the owner's lines in the default pool joined, one per resource of
    the declaration, their values as columns (read by ``_quota_of``)."""
    for i, res in enumerate(quota.RESOURCES):
        line: Any = aliased(line_class, name=f"line_{i}")
        on = (
            (getattr(line, key) == owner)
            & (line.resource == res.key)
            & line.pool_id.in_(default_pool_ids())
        )
        query = query.outerjoin_from(owner.class_, line, on).add_columns(
            line.guarantee, line.quota_limit, line.weight
        )
    return query


def _quota_of(values: Sequence[Any], priority: int | None) -> Quota:
    """A quota from the columns ``_with_lines`` adds (three a resource)."""
    lines = [
        StoredValues(res.key, values[3 * i], values[3 * i + 1], values[3 * i + 2])
        for i, res in enumerate(quota.RESOURCES)
        if values[3 * i + 2] is not None  # a line's weight is never null
    ]
    return Quota.from_lines(lines, priority or PRIORITY_DEFAULT)


@functools.lru_cache(maxsize=8)
def _org_with(columns: tuple[ColumnElement[Any], ...]) -> AnySelect:
    return select(Org, *_capacity_columns(), *columns).order_by(Org.id).limit(1)


def org_with(columns: tuple[ColumnElement[Any], ...]) -> Read[tuple[Org, Sequence[Any]]]:
    """The pool and other figures in the same statement: ``columns`` are scalar columns
    (of any domain). A caller that keeps its tuple reuses the built statement. Run with
    other reads, the pool comes detached."""
    return Read(_org_with(columns), {}, _org_and_figures)


def _org_and_figures(rows: Rows) -> tuple[Org, Sequence[Any]]:
    if not rows:
        raise NotFound(NO_ORG)
    org, values = rows[0][0], rows[0][1:]
    return org, _knowing_capacity(org, values)


def _knowing_capacity(org: Org, values: Sequence[Any]) -> tuple[Any, ...]:
    """The org told its amounts from the columns ``_capacity_columns`` adds first; the
    values after them."""
    count = len(quota.RESOURCES)
    amounts = zip(quota.RESOURCES, values[:count], strict=True)
    org.known_capacity({res.key: int(amount or 0) for res, amount in amounts})
    return tuple(values[count:])


def get_team_org(session: Session, team: Team) -> Org:
    """The team's pool: no query when it was read with the team (``team_for_pages``)."""
    org = session.get(Org, team.org_id)
    if org is None:
        raise NotFound("the GPU pool no longer exists")
    return org


def lock_org(session: Session, org_id: int) -> Org:
    """Take the org row's write lock until the transaction ends.

    An UPDATE locks the row on PostgreSQL and takes SQLite's write lock, so every pool
    decision after this line sees all decisions committed before it.
    """
    session.execute(update(Org).where(Org.id == org_id).values(lock_version=Org.lock_version + 1))
    org = session.get(Org, org_id, populate_existing=True)
    if org is None:
        raise NotFound("the GPU pool no longer exists")
    # Its amounts as they are now the lock is held (another admin may just have changed
    # them).
    amounts = session.execute(
        select(PoolCapacity.resource, PoolCapacity.amount)
        .join(Pool, Pool.id == PoolCapacity.pool_id)
        .where(Pool.org_id == org_id, Pool.is_default)
    ).all()
    org.known_capacity({resource: amount for resource, amount in amounts})
    return org


def committed_gpu_centi(
    session: Session, org_id: int, *, exclude_team_id: int | None = None
) -> int:
    query = (
        select(func.coalesce(func.sum(GPU_LINE.guarantee), 0))
        .select_from(Team)
        .join_from(Team, GPU_LINE, gpu_line_of_team())
        .where(Team.org_id == org_id, Team.status.in_(COMMITTED_STATUSES))
    )
    if exclude_team_id is not None:
        query = query.where(Team.id != exclude_team_id)
    return int(session.scalar(query) or 0)


def get_team(session: Session, team_id: int) -> Team:
    team = session.get(Team, team_id)
    if team is None:
        raise NotFound(f"no team with id {team_id}")
    return team


def _default_suggestion() -> ColumnElement[bool]:
    """A team's right-sizing suggestion in the default pool (the one its rows show)."""
    return (RightsizingSuggestion.team_id == Team.id) & (RightsizingSuggestion.pool == "")


# The team and what its pages show with it, as reads a page can run together with its
# other reads (one statement on PostgreSQL): the team with its pool and suggestion, and
# its steps in order.
# (The org's amounts and the team's quota in the default pool come as columns of it.)
_TEAM_ORG_SUGGESTION = _with_lines(
    select(Team, Org, RightsizingSuggestion, TeamSchedule, *_capacity_columns())
    .join(Org, Org.id == Team.org_id)
    .outerjoin(RightsizingSuggestion, _default_suggestion())
    .outerjoin(TeamSchedule, TeamSchedule.team_id == Team.id)
    .where(Team.id == bindparam("team_id"))
    .options(lazyload(Team.schedule)),  # it is in the row already
    TeamQuotaLine,
    "team_id",
    Team.id,
)
_TEAM_STEPS = (
    select(ProvisioningStep)
    .where(ProvisioningStep.team_id == bindparam("team_id"))
    .order_by(ProvisioningStep.position)
)
TeamForPages = tuple[Team, Org, RightsizingSuggestion | None, TeamSchedule | None] | None


def team_for_pages(team_id: int) -> tuple[Read[TeamForPages], Read[list[ProvisioningStep]]]:
    """The team for its pages as two reads; ``attach_for_pages`` makes the team from their
    values."""
    return (
        Read(_TEAM_ORG_SUGGESTION, {"team_id": team_id}, _first),
        Read(_TEAM_STEPS, {"team_id": team_id}, _firsts),
    )


def _first(rows: Rows) -> TeamForPages:
    if not rows:
        return None
    team, org, suggestion, schedule, *values = rows[0]
    team.known_quota(_quota_of(_knowing_capacity(org, values), team.priority))
    return team, org, suggestion, schedule


def _firsts(rows: Rows) -> list[Any]:
    return [row[0] for row in rows]


def attach_for_pages(
    session: Session, team_id: int, found: TeamForPages, steps: list[ProvisioningStep]
) -> Team:
    """The team read by ``team_for_pages``, in the session: its pool in the identity map
    (``get_team_org`` reads no row), its steps and suggestion loaded, its other
    relationships loading as usual."""
    if found is None:
        raise NotFound(f"no team with id {team_id}")
    team, org, suggestion, schedule = found
    set_committed_value(team, "org", org)
    set_committed_value(team, "steps", steps)
    set_committed_value(team, "suggestion", suggestion)
    set_committed_value(team, "schedule", schedule)
    extra = [i for i in (suggestion, schedule) if i is not None]
    for instance in (org, team, *steps, *extra):
        if instance not in session:
            session.add(instance)
    return team


def get_live_team_by_name(session: Session, name: str) -> Team | None:
    return session.scalars(
        select(Team).where(Team.name == name, Team.status.in_(LIVE_STATUSES))
    ).first()


def get_teams(
    session: Session,
    *,
    team_ids: Sequence[int] | None = None,
    statuses: Sequence[str] | None = None,
    with_steps: bool = False,
    name_contains: str = "",
    limit: int | None = None,
    offset: int = 0,
) -> list[Team]:
    """Teams by name (then id: a stable order to page in)."""
    query = teams_query(team_ids, statuses, name_contains, limit=limit, offset=offset)
    if with_steps:
        query = query.options(selectinload(Team.steps))
    return list(session.scalars(query))


def teams_query(
    team_ids: Sequence[int] | None,
    statuses: Sequence[str] | None,
    name_contains: str,
    *,
    limit: int | None,
    offset: int,
) -> Select[tuple[Team]]:
    """A page of teams by name, then id: read along ix_teams_name_id, not sorted."""
    query = _teams_where(select(Team), team_ids, statuses, name_contains)
    return query.order_by(Team.name, Team.id).offset(offset or None).limit(limit)


def count_teams(session: Session, *, team_ids: Sequence[int] | None = None) -> int:
    query = _teams_where(select(func.count()).select_from(Team), team_ids, None, "")
    return int(session.scalar(query) or 0)


def _teams_where(
    query: Select[Any],
    team_ids: Sequence[int] | None,
    statuses: Sequence[str] | None,
    name_contains: str,
) -> Select[Any]:
    if team_ids is not None:
        query = query.where(Team.id.in_(team_ids))
    if statuses is not None:
        query = query.where(Team.status.in_(_status_constants(statuses)))
    if name_contains:
        query = query.where(Team.name.contains(name_contains.lower(), autoescape=True))
    return query


def _status_constants(statuses: Sequence[str]) -> tuple[ColumnElement[str], ...]:
    """Team statuses written into the statement (``constant``): PostgreSQL's generic plan
    for a status parameter expects an average status's share of the teams, where the
    statuses asked for are few, and it re-planned such lists on every run. Only a
    team status passes (``TeamStatus`` refuses anything else)."""
    return constants(TeamStatus(status).value for status in statuses)


def get_steps(session: Session, team_id: int) -> list[ProvisioningStep]:
    return list(session.scalars(_TEAM_STEPS, {"team_id": team_id}))


def get_request(session: Session, request_id: int, *, fresh: bool = False) -> ClusterRequest:
    request = session.get(
        ClusterRequest,
        request_id,
        options=[selectinload(ClusterRequest.team), selectinload(ClusterRequest.requester)],
        populate_existing=fresh,
    )
    if request is None:
        raise NotFound(f"no request with id {request_id}")
    return request


def get_requests(
    session: Session,
    *,
    status: str | None = None,
    team_ids: Sequence[int] | None = None,
    limit: int | None = 200,
    offset: int = 0,
) -> list[ClusterRequest]:
    """Oldest first (then by id: a stable order to page in)."""
    query = (
        _requests_where(select(ClusterRequest), status, team_ids)
        .options(selectinload(ClusterRequest.team), selectinload(ClusterRequest.requester))
        .order_by(ClusterRequest.created_at, ClusterRequest.id)
        .offset(offset or None)
        .limit(limit)
    )
    return list(session.scalars(query))


def count_requests(
    session: Session, *, status: str | None = None, team_ids: Sequence[int] | None = None
) -> int:
    query = _requests_where(select(func.count()).select_from(ClusterRequest), status, team_ids)
    return int(session.scalar(query) or 0)


def _requests_where(
    query: Select[Any], status: str | None, team_ids: Sequence[int] | None
) -> Select[Any]:
    if status is not None:  # a request status only (checked by its enum), written in
        query = query.where(ClusterRequest.status == constant(RequestStatus(status).value))
    if team_ids is not None:
        query = query.where(ClusterRequest.team_id.in_(team_ids))
    return query


# The team page's statements are built once (building one costs about as much CPU as
# running it); each takes the team's id as a parameter.
_TEAM_REQUESTS_DECIDED = _with_lines(
    select(ClusterRequest, Decision)
    .outerjoin(Decision, Decision.request_id == ClusterRequest.id)
    .where(ClusterRequest.team_id == bindparam("team_id"))
    .order_by(ClusterRequest.id.desc()),
    RequestQuotaLine,
    "request_id",
    ClusterRequest.id,
)
_TEAM_STEPS = (
    select(ProvisioningStep)
    .where(ProvisioningStep.team_id == bindparam("team_id"))
    .order_by(ProvisioningStep.position)
)
_TEAM_MEMBERS = (
    select(User, TeamMember)
    .join(TeamMember, TeamMember.user_id == User.id)
    .where(TeamMember.team_id == bindparam("team_id"))
    .order_by(TeamMember.role, User.email)
)


def team_requests_decided(
    team_id: int,
) -> Read[tuple[list[ClusterRequest], dict[int, Decision]]]:
    """A team's requests, newest first, and the decision on each decided one: one query."""
    return Read(_TEAM_REQUESTS_DECIDED, {"team_id": team_id}, _requests_decided)


def _requests_decided(rows: Rows) -> tuple[list[ClusterRequest], dict[int, Decision]]:
    for request, _, *lines in rows:
        request.known_quota(_quota_of(lines, request.priority))
    return [row[0] for row in rows], {row[1].request_id: row[1] for row in rows if row[1]}


def get_decisions(session: Session, request_ids: Sequence[int]) -> dict[int, Decision]:
    if not request_ids:
        return {}
    rows = session.scalars(select(Decision).where(Decision.request_id.in_(request_ids)))
    return {d.request_id: d for d in rows}


def pending_count_column() -> ScalarSelect[int]:
    """How many requests wait for an admin, as a column of a larger query (the status
    written into the statement, as ``newest_ids_columns`` writes its event name)."""
    return (
        select(func.count())
        .select_from(ClusterRequest)
        .where(ClusterRequest.status == constant(RequestStatus.SUBMITTED.value))
        .scalar_subquery()
    )


def team_members(team_id: int) -> Read[list[tuple[User, TeamMember]]]:
    """A team's members with their accounts, leads first, then by email."""
    return Read(_TEAM_MEMBERS, {"team_id": team_id}, _members)


def _members(rows: Rows) -> list[tuple[User, TeamMember]]:
    return [(u, m) for u, m in rows]


def get_members(session: Session, team_id: int) -> list[tuple[User, TeamMember]]:
    return read(session, team_members(team_id))


def get_member(session: Session, team_id: int, user_id: int) -> TeamMember | None:
    return session.get(TeamMember, (team_id, user_id))


def count_leads(session: Session, team_id: int) -> int:
    return int(
        session.scalar(
            select(func.count())
            .select_from(TeamMember)
            .where(TeamMember.team_id == team_id, TeamMember.role == MemberRole.LEAD)
        )
        or 0
    )


def has_org(session: Session) -> bool:
    return session.scalars(select(Org.id).limit(1)).first() is not None


@dataclass(frozen=True)
class RowSuggestion:
    """The right-sizing suggestion a row shows: made for ``guarantee_centi``."""

    direction: str  # lower | raise
    guarantee_centi: int
    suggested_centi: int


# Each team's GPU line in the default pool, as statements join it (the GPU share and the
# overview read it; other pools and resources are read through ``Team.quota_lines``).
GPU_LINE = aliased(TeamQuotaLine, name="gpu_line")


def gpu_line_of_team() -> ColumnElement[bool]:
    return line_of_team(GPU_LINE, GPU_RESOURCE, None)


def line_of_team(
    line: type[TeamQuotaLine], resource: str, pool_id: int | None
) -> ColumnElement[bool]:
    """The join of a team and its line (``line``: an alias) of ``resource`` in the pool
    ``pool_id`` (None: the org's default pool)."""
    pool = line.pool_id.in_(default_pool_ids()) if pool_id is None else line.pool_id == pool_id
    return (line.team_id == Team.id) & (line.resource == resource) & pool


@dataclass(frozen=True)
class TeamRow:
    """What the pool overview shows of a team (no ORM object per row)."""

    id: int
    name: str
    status: str
    quota_centi: int
    limit_centi: int
    last_error: str | None
    suggestion: RowSuggestion | None = None
    template_label: str = ""  # "kubeflow-training v2" (empty: a plain vCluster)


TEAM_ROW_COLUMNS = (
    Team.id,
    Team.name,
    Team.status,
    func.coalesce(GPU_LINE.guarantee, 0),
    func.coalesce(GPU_LINE.quota_limit, 0),
    Team.last_error,
    RightsizingSuggestion.direction,
    RightsizingSuggestion.guarantee_centi,
    RightsizingSuggestion.suggested_centi,
    ClusterTemplate.name,
    TemplateVersion.number,
)


def _rows_query(*extra: Any) -> Any:
    """The rows' columns (and ``extra``), each team with its suggestion if it has one."""
    return (
        select(*TEAM_ROW_COLUMNS, *extra)
        .select_from(Team)
        .outerjoin_from(Team, GPU_LINE, gpu_line_of_team())
        .outerjoin(RightsizingSuggestion, _default_suggestion())
        .outerjoin(TemplateVersion, TemplateVersion.id == Team.template_version_id)
        .outerjoin(ClusterTemplate, ClusterTemplate.id == TemplateVersion.template_id)
    )


def _team_row(row: Sequence[Any]) -> TeamRow:
    team_id, name, status, quota, limit, error, direction, guarantee, suggested = row[:9]
    template, number = row[9:11]
    suggestion = RowSuggestion(direction, guarantee, suggested) if direction else None
    kind = f"{template} v{number}" if template else ""
    return TeamRow(team_id, name, status, quota, limit, error, suggestion, kind)


# Orders the database can give (the overview's sorts that need no live usage).
SQL_SORTS = {
    "name": (Team.name, Team.id),
    "status": (Team.status, Team.name, Team.id),
    "guarantee": (func.coalesce(GPU_LINE.guarantee, 0).desc(), Team.name, Team.id),
}


# The live teams (whose names are unique): the predicate of the name index
# (uq_teams_live_name), written as it is there, in constants, so that a filter to these
# teams is read from that index (a prepared statement's parameters cannot be matched to
# an index's predicate).
NOT_LIVE = tuple(s.value for s in TeamStatus if s not in LIVE_STATUSES)
_LIVE = Team.status.notin_(constants(NOT_LIVE))


def _team_filter(query: Any, statuses: Sequence[str] | None, name_contains: str) -> Any:
    if statuses is not None:
        if set(statuses) == set(LIVE_STATUSES):
            query = query.where(_LIVE)
        else:
            query = query.where(Team.status.in_(_status_constants(statuses)))
    if name_contains:
        query = query.where(Team.name.contains(name_contains.lower(), autoescape=True))
    return query


def get_team_rows(
    session: Session,
    *,
    statuses: Sequence[str] | None = None,
    name_contains: str = "",
    ids: Sequence[int] | None = None,
) -> list[TeamRow]:
    query = _team_filter(_rows_query().order_by(Team.name, Team.id), statuses, name_contains)
    if ids is not None:
        query = query.where(Team.id.in_(ids))
    return [_team_row(row) for row in session.execute(query).all()]


def get_team_page(
    session: Session,
    *,
    statuses: Sequence[str] | None,
    name_contains: str,
    sort: str,
    offset: int,
    limit: int,
    counted_apart: Sequence[str] = (),
) -> tuple[int, list[TeamRow]]:
    """One page of the overview, filtered, sorted and counted by the database in one
    statement: the count is a subquery run once beside the page (a window over the
    matching rows would sort and join every team of a large org to return 50). The teams
    in ``counted_apart`` statuses are left out of the count: the caller counts them
    (from the ready view)."""
    found = read(session, team_page(statuses, name_contains, sort, offset, limit, counted_apart))
    if found is not None:
        return found
    # Past the last page (or nothing matches): the count on its own.
    _, count = _page_query(*_page_key(statuses, name_contains, sort, counted_apart))
    return int(session.scalar(select(count)) or 0) if offset else 0, []


def team_page(
    statuses: Sequence[str] | None,
    name_contains: str,
    sort: str,
    offset: int,
    limit: int,
    counted_apart: Sequence[str] = (),
) -> Read[tuple[int, list[TeamRow]] | None]:
    """``get_team_page`` as a read, to run with others: None when the page is empty (past
    the last page, or nothing matches), where ``get_team_page`` counts on its own."""
    query, _ = _page_query(*_page_key(statuses, name_contains, sort, counted_apart))
    return Read(query, {"offset": offset, "limit": limit}, _page_rows)


def _page_key(
    statuses: Sequence[str] | None, name_contains: str, sort: str, counted_apart: Sequence[str]
) -> tuple[tuple[str, ...] | None, str, str, tuple[str, ...]]:
    return (
        tuple(statuses) if statuses is not None else None,
        name_contains,
        sort,
        tuple(counted_apart),
    )


def _page_rows(rows: Rows) -> tuple[int, list[TeamRow]] | None:
    return (int(rows[0][-1]), [_team_row(row) for row in rows]) if rows else None


@functools.lru_cache(maxsize=64)
def _page_query(
    statuses: tuple[str, ...] | None,
    name_contains: str,
    sort: str,
    counted_apart: tuple[str, ...] = (),
) -> tuple[Select[Any], ScalarSelect[int]]:
    """The overview page's statement and its count (of the matching teams but those in
    ``counted_apart`` statuses), built once per filter and order (building one costs
    about as much CPU as running it); offset and limit are parameters."""
    counting = select(func.count()).select_from(Team)
    if counted_apart:  # the few others, in constants too: counted along the status index
        others = tuple(  # known statuses only: they are written into the statement
            s.value
            for s in TeamStatus
            if (statuses is None or s.value in statuses) and s.value not in counted_apart
        )
        counting = _team_filter(
            counting.where(Team.status.in_(constants(others))), None, name_contains
        )
    else:
        counting = _team_filter(counting, statuses, name_contains)
    count = counting.correlate(None).scalar_subquery()  # all matching teams, not this row
    order = SQL_SORTS.get(sort, SQL_SORTS["name"])
    if order is SQL_SORTS["name"] and statuses is not None and set(statuses) <= set(LIVE_STATUSES):
        # Live names are unique (uq_teams_live_name): the name alone orders them, read
        # straight from that index (with the id too, the database ran an incremental
        # sort over every row it skipped).
        order = (Team.name,)
    # The page's ids first, from the teams alone (a later page skips its offset along the
    # name index), then only those rows joined: joined first, the database built and
    # sorted every matching team's row to skip them.
    ids = select(Team.id)
    if sort == "guarantee":
        ids = ids.outerjoin_from(Team, GPU_LINE, gpu_line_of_team())
    page = (
        _team_filter(ids, statuses, name_contains)
        .order_by(*order)
        .offset(bindparam("offset", type_=Integer, literal_execute=True))
        .limit(bindparam("limit", type_=Integer, literal_execute=True))
        .subquery("page")
    )
    query = _rows_query(count).join(page, page.c.id == Team.id).order_by(*order)
    return query, count


def get_team_keys(
    session: Session, *, statuses: Sequence[str] | None, name_contains: str
) -> list[tuple[int, str]]:
    """(id, name) of every matching team, for orders that need live usage."""
    query = _team_filter(select(Team.id, Team.name), statuses, name_contains)
    return [(int(i), str(n)) for i, n in session.execute(query).all()]


def count_by_status(session: Session) -> dict[str, int]:
    rows = session.execute(select(Team.status, func.count()).group_by(Team.status)).all()
    return {str(status): int(count) for status, count in rows}


def count_ready(session: Session) -> int:
    return int(session.scalar(select(func.count()).where(Team.status == TeamStatus.READY)) or 0)


def get_team_names(
    session: Session, team_ids: Collection[int], *, decommissioned: bool = False
) -> dict[int, str]:
    """Id -> name of the given teams that are not decommissioned (``decommissioned``:
    those too, for a history that names a team after it is gone)."""
    if not team_ids:
        return {}
    query = select(Team.id, Team.name).where(Team.id.in_(list(team_ids)))
    if not decommissioned:
        query = query.where(Team.status.in_(LIVE_STATUSES))
    return {team_id: name for team_id, name in session.execute(query)}


def get_pools(session: Session, org_id: int) -> list[Pool]:
    """The org's pools, the default first, then by name, with their amounts."""
    return list(
        session.scalars(
            select(Pool)
            .where(Pool.org_id == org_id)
            .options(selectinload(Pool.capacities))
            .order_by(Pool.is_default.desc(), Pool.name)
        )
    )


def get_pool(session: Session, org_id: int, pool_id: int) -> Pool:
    pool = session.scalar(
        select(Pool)
        .where(Pool.org_id == org_id, Pool.id == pool_id)
        .options(selectinload(Pool.capacities))
    )
    if pool is None:
        raise NotFound(f"no pool with id {pool_id}: reload the pools page")
    return pool


def committed_by_pool(
    session: Session, org_id: int, *, exclude_team_id: int | None = None
) -> dict[int, int]:
    """Pool id -> hundredths of a GPU guaranteed there to teams holding a queue."""
    query = (
        select(TeamQuotaLine.pool_id, func.coalesce(func.sum(TeamQuotaLine.guarantee), 0))
        .join(Team, Team.id == TeamQuotaLine.team_id)
        .where(
            Team.org_id == org_id,
            Team.status.in_(COMMITTED_STATUSES),
            TeamQuotaLine.resource == GPU_RESOURCE,
        )
        .group_by(TeamQuotaLine.pool_id)
    )
    if exclude_team_id is not None:
        query = query.where(Team.id != exclude_team_id)
    rows = session.execute(query)
    return {pool_id: int(total or 0) for pool_id, total in rows}


def teams_in_pool(session: Session, pool_id: int) -> list[str]:
    """The names of the teams (not decommissioned) holding a line in the pool."""
    return list(
        session.scalars(
            select(Team.name)
            .join(TeamQuotaLine, TeamQuotaLine.team_id == Team.id)
            .where(TeamQuotaLine.pool_id == pool_id, Team.status != TeamStatus.DECOMMISSIONED)
            .distinct()
            .order_by(Team.name)
        )
    )


def lines_in_pool_of_teams_gone(session: Session, pool_id: int) -> list[TeamQuotaLine]:
    """The lines decommissioned teams still hold in the pool (removed with the pool)."""
    return list(
        session.scalars(
            select(TeamQuotaLine)
            .join(Team, Team.id == TeamQuotaLine.team_id)
            .where(TeamQuotaLine.pool_id == pool_id, Team.status == TeamStatus.DECOMMISSIONED)
        )
    )


def teams_holding_pool(session: Session, pool_id: int) -> list[Team]:
    """The ready teams with a line in the pool (their queues there hang from its queue)."""
    return list(
        session.scalars(
            select(Team)
            .join(TeamQuotaLine, TeamQuotaLine.team_id == Team.id)
            .where(TeamQuotaLine.pool_id == pool_id, Team.status == TeamStatus.READY)
        )
    )


# A team's quota line: its pool, the resource, the guarantee (hundredths).
PoolLine = tuple[Pool, str, int]

_TEAM_POOL_LINES = (
    select(Pool, TeamQuotaLine.resource, func.coalesce(TeamQuotaLine.guarantee, 0))
    .join(TeamQuotaLine, TeamQuotaLine.pool_id == Pool.id)
    .where(TeamQuotaLine.team_id == bindparam("team_id"))
    .order_by(Pool.is_default.desc(), Pool.name, TeamQuotaLine.resource)
)


def team_pool_lines(team_id: int) -> Read[list[PoolLine]]:
    """The team's quota lines with their pools, the default pool first, then by pool name
    and resource (read with the team page's other lists: its gauges and forms)."""
    return Read(_TEAM_POOL_LINES, {"team_id": team_id}, _pool_lines)


def _pool_lines(rows: Rows) -> list[PoolLine]:
    return [(pool, str(resource), int(held)) for pool, resource, held in rows]


def gpu_in_other_pools(
    session: Session, team_id: int, lines: Sequence[PoolLine] | None = None
) -> list[tuple[Pool, int]]:
    """The pools other than the default where the team holds a GPU line, with its
    guarantee there (hundredths), by pool name (``lines``: ``team_pool_lines``' value,
    when read already)."""
    if lines is None:
        lines = read(session, team_pool_lines(team_id))
    return [
        (pool, held)
        for pool, resource, held in lines
        if resource == GPU_RESOURCE and not pool.is_default
    ]


def other_pool_asks(
    session: Session, request_ids: Sequence[int]
) -> dict[int, list[tuple[str, int | None, int | None, int]]]:
    """Per request, what it asks in each pool but the default: (pool, GPU guarantee,
    limit, weight), by pool name; one statement for a page of review cards."""
    if not request_ids:
        return {}
    rows = session.execute(
        select(
            RequestQuotaLine.request_id,
            Pool.name,
            RequestQuotaLine.guarantee,
            RequestQuotaLine.quota_limit,
            RequestQuotaLine.weight,
        )
        .join(Pool, Pool.id == RequestQuotaLine.pool_id)
        .where(
            RequestQuotaLine.request_id.in_(request_ids),
            RequestQuotaLine.resource == GPU_RESOURCE,
            ~Pool.is_default,
        )
        .order_by(RequestQuotaLine.request_id, Pool.name)
    ).all()
    found: dict[int, list[tuple[str, int | None, int | None, int]]] = {}
    for request_id, name, guarantee, limit, weight in rows:
        found.setdefault(request_id, []).append((name, guarantee, limit, weight))
    return found


# --- temporary quota grants ------------------------------------------------------------


def get_grant(session: Session, grant_id: int) -> QuotaGrant | None:
    return session.get(QuotaGrant, grant_id)


def open_grants(session: Session, team_id: int, pool_id: int) -> list[QuotaGrant]:
    """The team's grants in the pool still waiting or not yet taken back."""
    return list(
        session.scalars(
            select(QuotaGrant).where(
                QuotaGrant.team_id == team_id,
                QuotaGrant.pool_id == pool_id,
                QuotaGrant.status.in_((GrantStatus.SUBMITTED, GrantStatus.APPROVED)),
                QuotaGrant.released_at.is_(None),
            )
        )
    )


def approved_grants(session: Session, pool_id: int) -> list[QuotaGrant]:
    """The pool's approved grants not yet taken back (running or to come) of teams that
    hold their guarantees (a decommissioned team's reserve nothing)."""
    return list(
        session.scalars(
            select(QuotaGrant)
            .join(Team, Team.id == QuotaGrant.team_id)
            .where(
                QuotaGrant.pool_id == pool_id,
                QuotaGrant.status == GrantStatus.APPROVED,
                QuotaGrant.released_at.is_(None),
                Team.status.in_(COMMITTED_STATUSES),
            )
        )
    )


def applied_grants(
    session: Session,
    pool_id: int,
    *,
    team_id: int | None = None,
    exclude_team_id: int | None = None,
) -> list[QuotaGrant]:
    """The pool's grants added to their teams' quota now (one team's, or all but one),
    of teams whose guarantees count in the pool."""
    query = (
        select(QuotaGrant)
        .join(Team, Team.id == QuotaGrant.team_id)
        .where(
            QuotaGrant.pool_id == pool_id,
            QuotaGrant.applied_at.is_not(None),
            QuotaGrant.released_at.is_(None),
            Team.status.in_(COMMITTED_STATUSES),
        )
    )
    if team_id is not None:
        query = query.where(QuotaGrant.team_id == team_id)
    if exclude_team_id is not None:
        query = query.where(QuotaGrant.team_id != exclude_team_id)
    return list(session.scalars(query))


def due_grants(session: Session, now: datetime) -> list[QuotaGrant]:
    """The approved grants whose start has come and that are not taken back yet, in the
    order of their starts."""
    return list(
        session.scalars(
            select(QuotaGrant)
            .where(
                QuotaGrant.status == GrantStatus.APPROVED,
                QuotaGrant.released_at.is_(None),
                QuotaGrant.starts_at <= now,
            )
            .order_by(QuotaGrant.starts_at, QuotaGrant.id)
        )
    )


def unreminded_grants(session: Session) -> list[QuotaGrant]:
    """The running grants whose team was not yet told of their end."""
    return list(
        session.scalars(
            select(QuotaGrant).where(
                QuotaGrant.status == GrantStatus.APPROVED,
                QuotaGrant.applied_at.is_not(None),
                QuotaGrant.released_at.is_(None),
                QuotaGrant.reminded_at.is_(None),
            )
        )
    )


def grants_of(session: Session, team_id: int | None = None) -> list[QuotaGrant]:
    """Every grant (of one team), the latest window first."""
    query = select(QuotaGrant).order_by(QuotaGrant.starts_at.desc(), QuotaGrant.id.desc())
    if team_id is not None:
        query = query.where(QuotaGrant.team_id == team_id)
    return list(session.scalars(query))


def open_grants_of_org(session: Session) -> list[QuotaGrant]:
    """Every grant waiting, running or to come (not the ended: a page shows these often)."""
    return list(
        session.scalars(
            select(QuotaGrant)
            .where(
                QuotaGrant.status.in_((GrantStatus.SUBMITTED, GrantStatus.APPROVED)),
                QuotaGrant.released_at.is_(None),
            )
            .order_by(QuotaGrant.starts_at, QuotaGrant.id)
        )
    )


_TEAM_QUOTA_GRANTS = (
    select(QuotaGrant, Pool)
    .join(Pool, Pool.id == QuotaGrant.pool_id)
    .where(QuotaGrant.team_id == bindparam("team_id"))
    .order_by(QuotaGrant.starts_at.desc(), QuotaGrant.id.desc())
    .limit(50)
)


def team_quota_grants(team_id: int) -> Read[list[QuotaGrant]]:
    """A team's temporary grants with their pools, the latest window first (its page's
    list, read with the page's other lists)."""
    return Read(_TEAM_QUOTA_GRANTS, {"team_id": team_id}, with_pools)


def with_pools(rows: Rows) -> list[Any]:
    """Rows of (an entity with a ``pool``, its pool): the entities, each with its pool
    set (a grant's, a budget's), as a read's ``finish``."""
    found = []
    for owner, pool in rows:
        set_committed_value(owner, "pool", pool)
        found.append(owner)
    return found
