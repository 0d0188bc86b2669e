"""Every query of the usage domain: the quotas fair share is computed over, and the
bounded usage history."""

from __future__ import annotations

import itertools
from collections.abc import Collection, Iterable, Iterator, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import (
    BigInteger,
    ColumnElement,
    Float,
    ScalarSelect,
    bindparam,
    cast,
    delete,
    func,
    literal_column,
    select,
)
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.orm import InstrumentedAttribute, Session, aliased, join, outerjoin, selectinload

from app.core.models import (
    COMMITTED_STATUSES,
    DigestRun,
    GpuBudget,
    Pool,
    PoolCapacity,
    RightsizingSuggestion,
    Team,
    TeamQuotaLine,
    TeamStatus,
    UsageSample,
    WorkloadEvent,
    WorkloadEventKind,
)
from app.core.quota import RESOURCES, WEIGHT_DEFAULT
from app.core.together import Read, read
from app.teams.repository import GPU_LINE, PoolLine, line_of_team, team_pool_lines, with_pools
from app.usage.model import DEFAULT_KEY, ShareKey
from app.usage.service import TeamQuota

# Any other key's line, as statements join it (the default key's is ``GPU_LINE``).
KEY_LINE = aliased(TeamQuotaLine, name="key_line")


def _created_seconds(session: Session) -> ColumnElement[int]:
    """A team's creation time as whole seconds, computed by the database."""
    if session.get_bind().dialect.name == "postgresql":
        return cast(func.floor(func.extract("epoch", Team.created_at)), BigInteger)
    # SQLite's own reading of the seconds rounds to the millisecond: 30.9999 is 31.
    return cast(func.strftime("%s", func.substr(Team.created_at, 1, 19)), BigInteger)


def _holding_a_queue(org_id: int) -> ColumnElement[bool]:
    return (Team.org_id == org_id) & Team.status.in_(COMMITTED_STATUSES)


def _line_of(key: ShareKey) -> type[TeamQuotaLine]:
    return GPU_LINE if key.is_default else KEY_LINE


def _quota_columns(
    session: Session, key: ShareKey = DEFAULT_KEY
) -> tuple[ColumnElement[Any] | InstrumentedAttribute[Any], ...]:
    """What fair share is computed over, per team (``TeamQuota``'s fields in order): the
    amounts of ``key``'s line in hundredths of what people read (a GPU's are stored so;
    a core's and a GB's are ``scale`` storage units each)."""
    line, scale = _line_of(key), key.resource.scale
    guarantee: Any = line.guarantee if scale == 1 else line.guarantee // scale
    limit: Any = line.quota_limit if scale == 1 else line.quota_limit // scale
    # No limit: KAI's unlimited (-1), where the resource takes none.
    unlimited = 0 if key.resource.limited else -100
    return (
        Team.id,
        Team.name,
        func.coalesce(guarantee, 0),
        func.coalesce(limit, unlimited),
        func.coalesce(line.weight, WEIGHT_DEFAULT),
        Team.priority,
        _created_seconds(session),
        Team.status == TeamStatus.READY,
    )


def _with_line(joined: Any, key: ShareKey = DEFAULT_KEY) -> Any:
    """``joined`` (the teams) with each team's line of ``key``. In the default pool every
    team holds a queue (no line: none of the resource); in another only the teams with a
    line there do."""
    line = _line_of(key)
    on = line_of_team(line, key.resource.key, key.pool_id)
    return outerjoin(joined, line, on) if key.pool_id is None else join(joined, line, on)


def other_keys(
    session: Session, team_id: int, lines: Sequence[PoolLine] | None = None
) -> list[ShareKey]:
    """The keys beyond the default one where the team holds a line of a divided resource
    (another pool's GPUs, another divided resource): one gauge each, in pool order
    (``lines``: the team's ``team_pool_lines``, when read already)."""
    divided = {res.key: res for res in RESOURCES if res.divided}
    if lines is None:
        lines = read(session, team_pool_lines(team_id))
    keys = [
        ShareKey(
            divided[resource],
            None if pool.is_default else pool.id,
            pool.name,
            pool.label_value or "",
        )
        for pool, resource, _held in lines
        if resource in divided
    ]
    return [key for key in keys if not key.is_default]


def other_pools(session: Session, org_id: int) -> list[Pool]:
    """The org's pools beside the default one, by name, with their amounts."""
    return list(
        session.scalars(
            select(Pool)
            .where(Pool.org_id == org_id, ~Pool.is_default)
            .options(selectinload(Pool.capacities))
            .order_by(Pool.name)
        )
    )


def holds_other_keys(session: Session, org_id: int) -> bool:
    """Whether any team of the org holds a line beyond the default key's (another pool's,
    or another divided resource's): without one, no team has a gauge more."""
    divided = [res.key for res in RESOURCES if res.divided]
    other = ~(Pool.is_default & (TeamQuotaLine.resource == DEFAULT_KEY.resource.key))
    found = session.scalar(
        select(TeamQuotaLine.team_id)
        .join(Pool, Pool.id == TeamQuotaLine.pool_id)
        .where(Pool.org_id == org_id, TeamQuotaLine.resource.in_(divided), other)
        .limit(1)
    )
    return found is not None


def pool_capacity(session: Session, key: ShareKey, org_id: int) -> int:
    """``key``'s pool's amount of its resource, in hundredths of what people read."""
    pool = Pool.is_default if key.pool_id is None else Pool.id == key.pool_id
    amount = session.scalar(
        select(PoolCapacity.amount)
        .join(Pool, Pool.id == PoolCapacity.pool_id)
        .where(Pool.org_id == org_id, pool, PoolCapacity.resource == key.resource.key)
    )
    return (amount or 0) // key.resource.scale


def get_quota_rows(session: Session, org_id: int, key: ShareKey = DEFAULT_KEY) -> list[TeamQuota]:
    """The quotas of every team holding a queue, in ``key``'s resource and pool: what
    fair share is computed over. Read as plain values (the creation time as whole
    seconds and readiness as a boolean, both computed by the database), not through the
    ORM: the view refresher reads every team's row every few seconds, and the ORM's
    datetime and enum conversions about doubled what that costs the portal."""
    statement = (
        select(*_quota_columns(session, key))
        .select_from(_with_line(Team, key))
        .where(_holding_a_queue(org_id))
        .order_by(Team.id)
    )
    if session.autoflush:  # as the ORM's own execute would: pending teams count
        session.flush()
    pool = "" if key.pool_id is None else key.pool_name
    return _team_quotas(session.connection().execute(statement), pool)


def _team_quotas(rows: Iterable[Sequence[Any]], pool: str = "") -> list[TeamQuota]:
    """``TeamQuota`` values from rows of ``_quota_columns`` (a row without a team's id,
    as an outer join gives, is skipped)."""
    return [
        TeamQuota(team_id, name, quota, limit, weight, priority, int(at), bool(ready), pool)
        for team_id, name, quota, limit, weight, priority, at, ready in rows
        if team_id is not None
    ]


@dataclass(frozen=True)
class QuotaRows:
    """An org's quota rows and PostgreSQL's digest of them (None on SQLite)."""

    org_id: int
    digest: str | None
    rows: list[TeamQuota]


def quota_rows_since(session: Session, org_id: int, kept: QuotaRows | None) -> QuotaRows:
    """``kept`` itself while nothing ``get_quota_rows`` reads moved, else the rows read
    again. On PostgreSQL one statement reads a digest of every value (md5 over each one
    quoted, in id order) and, only when it differs from ``kept``'s, the rows too: one
    short row back when nothing moved (the database's time, where reading the rows
    costs the portal's), and the rows and their digest always from one snapshot. On
    SQLite, the development database, the rows are read every time."""
    if session.get_bind().dialect.name != "postgresql":
        return QuotaRows(org_id, None, get_quota_rows(session, org_id))
    columns = _quota_columns(session)
    # Every value quoted: a name cannot pass for two fields.
    line = func.concat_ws(",", *(func.quote_nullable(c) for c in columns))
    in_order: postgresql.aggregate_order_by[str] = postgresql.aggregate_order_by(
        literal_column("';'"), Team.id
    )
    digest = (
        select(func.md5(func.coalesce(func.string_agg(line, in_order), "")).label("value"))
        .select_from(_with_line(Team))
        .where(_holding_a_queue(org_id))
        .subquery()
    )
    last = kept.digest if kept is not None and kept.org_id == org_id else None
    moved = _holding_a_queue(org_id) & digest.c.value.is_distinct_from(last)
    statement = (
        select(digest.c.value, *columns)
        .select_from(_with_line(digest.outerjoin(Team, moved)))
        .order_by(Team.id)
    )
    if session.autoflush:
        session.flush()
    rows = session.connection().execute(statement).all()
    value = rows[0][0]  # one row with no team's columns when nothing moved
    if kept is not None and last == value:
        return kept
    return QuotaRows(org_id, value, _team_quotas(row[1:] for row in rows))


DEFAULT_POOL = ""  # a sample's pool: the org's default pool


SAMPLES_BATCH = 2000  # rows sent in one statement


def add_samples(session: Session, rows: Iterable[dict[str, object]]) -> int:
    """Insert samples, a batch at a time (never every team's rows held at once); a period
    another process already wrote is left as it is. Returns how many were offered."""
    dialect = session.get_bind().dialect.name
    insert = postgresql.insert if dialect == "postgresql" else sqlite.insert
    statement = insert(UsageSample).on_conflict_do_nothing()
    offered = 0
    source = iter(rows)
    while batch := list(itertools.islice(source, SAMPLES_BATCH)):
        session.execute(statement, batch)
        offered += len(batch)
    return offered


def rolled_up_before(
    session: Session, *, resolution: str, before: datetime, period: str
) -> list[dict[str, object]]:
    """The samples of ``resolution`` older than ``before`` summed per team and ``period``
    (``hour`` or ``day``, UTC) in SQL, as rows of the coarser resolution: the seconds and
    the GPU-seconds added up, allocated and requested averaged weighted by the seconds
    each sample covers, the highest quota. At 10,000 teams an hour of raw samples is
    600,000 rows: they never leave the database, only one row per team and period."""
    start = _period_of(session, period)
    seconds = func.sum(UsageSample.seconds)
    rows = session.execute(
        select(
            UsageSample.team_id,
            UsageSample.pool,
            start.label("start"),
            seconds,
            func.sum(cast(UsageSample.allocated_gpu, Float) * UsageSample.seconds),
            func.sum(cast(UsageSample.requested_gpu, Float) * UsageSample.seconds),
            func.max(UsageSample.quota_gpu),
            func.sum(UsageSample.guaranteed_gpu_s),
            func.sum(UsageSample.borrowed_gpu_s),
        )
        .where(UsageSample.resolution == resolution, UsageSample.at < before)
        .group_by(UsageSample.team_id, UsageSample.pool, start)
    ).all()
    out: list[dict[str, object]] = []
    for team_id, pool, at, total, allocated, requested, quota, guaranteed, borrowed in rows:
        if isinstance(at, str):
            at = datetime.fromisoformat(at)
        out.append(
            {
                "team_id": team_id,
                "pool": pool,
                "resolution": period,
                "at": at.replace(tzinfo=UTC),
                "seconds": int(total),
                "allocated_gpu": float(allocated) / total,
                "requested_gpu": float(requested) / total,
                "quota_gpu": float(quota),
                "guaranteed_gpu_s": float(guaranteed),
                "borrowed_gpu_s": float(borrowed),
            }
        )
    return out


def delete_samples_before(session: Session, *, resolution: str, before: datetime) -> int:
    result = session.execute(
        delete(UsageSample).where(UsageSample.resolution == resolution, UsageSample.at < before)
    )
    return int(getattr(result, "rowcount", 0) or 0)


def _hour_of(session: Session) -> Any:
    return _period_of(session, "hour")


def _period_of(session: Session, period: str) -> Any:
    """The start of a sample's hour or day (UTC), in SQL."""
    if session.get_bind().dialect.name == "postgresql":
        return func.date_trunc(period, func.timezone("UTC", UsageSample.at))
    return func.strftime(
        "%Y-%m-%d %H:00:00" if period == "hour" else "%Y-%m-%d 00:00:00", UsageSample.at
    )


def hourly_points(
    session: Session, team_id: int, *, since: datetime, pool: str = DEFAULT_POOL
) -> list[tuple[datetime, float, float, float]]:
    """(hour, allocated, requested, quota) per hour since ``since``; raw samples are
    averaged per hour in SQL, weighted by the seconds each covers."""
    return usage_points(session, team_id=team_id, since=since, pool=pool)


def usage_points(
    session: Session,
    *,
    team_id: int | None,
    since: datetime,
    period: str = "hour",
    pool: str = DEFAULT_POOL,
    org_id: int | None = None,
) -> list[tuple[datetime, float, float, float]]:
    """(start, allocated, requested, guarantee) per ``period`` (``hour`` or ``day``, UTC)
    since ``since``, every resolution kept averaged in SQL weighted by the seconds each
    sample covers. ``team_id`` None: the org's teams together (``org_id``), each figure
    their sum: the GPU-seconds over the seconds one team was sampled in the period."""
    start = _period_of(session, period)
    resolutions = ("raw", "hour") if period == "hour" else ("raw", "hour", "day")
    weight: Any = cast(func.sum(UsageSample.seconds), Float)
    if team_id is None:  # the seconds of one team's samples: the period's covered time
        weight = weight / func.count(func.distinct(UsageSample.team_id))
    query = (
        select(
            start.label("start"),
            func.sum(UsageSample.allocated_gpu * UsageSample.seconds) / weight,
            func.sum(UsageSample.requested_gpu * UsageSample.seconds) / weight,
            func.sum(UsageSample.quota_gpu * UsageSample.seconds) / weight
            if team_id is None
            else func.max(UsageSample.quota_gpu),
        )
        .where(
            UsageSample.pool == pool,
            UsageSample.resolution.in_(resolutions),
            UsageSample.at >= since,
        )
        .group_by(start)
        .order_by(start)
    )
    if team_id is not None:
        query = query.where(UsageSample.team_id == team_id)
    elif org_id is not None:
        query = query.join(Team, Team.id == UsageSample.team_id).where(Team.org_id == org_id)
    points = []
    for at, allocated, requested, quota in session.execute(query).all():
        if isinstance(at, str):
            at = datetime.fromisoformat(at)
        points.append((at.replace(tzinfo=UTC), float(allocated), float(requested), float(quota)))
    return points


def gpu_seconds_by_month(
    session: Session, *, month: str | None = None
) -> list[tuple[str, str, str, float, float]]:
    """(team, YYYY-MM, pool ("": the default), GPU-seconds within the guarantee, borrowed
    GPU-seconds), by month, team and pool."""
    return [
        (name, m, pool, g, b)
        for name, _id, m, pool, g, b in gpu_seconds_by_team_month(session, month=month)
    ]


def gpu_seconds_by_team_month(
    session: Session, *, month: str | None = None
) -> list[tuple[str, int, str, str, float, float]]:
    """``gpu_seconds_by_month`` with each team's id after its name."""
    dialect = session.get_bind().dialect.name
    month_of = (
        func.to_char(func.timezone("UTC", UsageSample.at), "YYYY-MM")
        if dialect == "postgresql"
        else func.strftime("%Y-%m", UsageSample.at)
    )
    query = (
        select(
            Team.name,
            Team.id,
            month_of.label("month"),
            UsageSample.pool,
            func.sum(UsageSample.guaranteed_gpu_s),
            func.sum(UsageSample.borrowed_gpu_s),
        )
        .join(Team, Team.id == UsageSample.team_id)
        .group_by(Team.name, Team.id, month_of, UsageSample.pool)
        .order_by(month_of, Team.name, Team.id, UsageSample.pool)
    )
    if month:
        query = query.where(month_of == month)
    return [
        (name, int(team_id), m, pool, float(g), float(b))
        for name, team_id, m, pool, g, b in session.execute(query).all()
    ]


def window_samples(
    session: Session,
    *,
    since: datetime,
    team_ids: Collection[int] | None = None,
    pool: str = DEFAULT_POOL,
) -> Iterator[tuple[int, int, float, float]]:
    """(team, seconds, allocated, requested) of every raw and hourly sample since ``since``
    in ``pool`` (a name; "": the default pool), team by team (raw samples cover the last
    day, hourly rows the days before it)."""
    query = (
        select(
            UsageSample.team_id,
            UsageSample.seconds,
            UsageSample.allocated_gpu,
            UsageSample.requested_gpu,
        )
        .where(
            UsageSample.resolution.in_(("raw", "hour")),
            UsageSample.at >= since,
            UsageSample.pool == pool,
        )
        .order_by(UsageSample.team_id)
    )
    if team_ids is not None:
        query = query.where(UsageSample.team_id.in_(team_ids))
    for team_id, seconds, allocated, requested in session.execute(
        query.execution_options(yield_per=5000)
    ):
        yield team_id, int(seconds), float(allocated), float(requested)


def replace_suggestions(session: Session, rows: list[RightsizingSuggestion]) -> None:
    session.execute(delete(RightsizingSuggestion))
    session.add_all(rows)


def get_suggestions(
    session: Session, team_ids: Collection[int] | None = None
) -> list[RightsizingSuggestion]:
    query = select(RightsizingSuggestion).order_by(
        RightsizingSuggestion.team_id, RightsizingSuggestion.pool
    )
    if team_ids is not None:
        query = query.where(RightsizingSuggestion.team_id.in_(team_ids))
    return list(session.scalars(query))


def digest_written(session: Session, week: str) -> bool:
    return session.get(DigestRun, week) is not None


def get_suggestion(
    session: Session, team_id: int, pool: str = DEFAULT_POOL
) -> RightsizingSuggestion | None:
    return session.get(RightsizingSuggestion, (team_id, pool))


def suggestion_totals_columns() -> tuple[ScalarSelect[int], ScalarSelect[int], ScalarSelect[int]]:
    """(idle teams, their guaranteed-but-idle hundredths of a GPU, starved teams), as
    columns of a larger query; one pass over the suggestions (a common table expression
    the three columns read)."""
    lower = RightsizingSuggestion.direction == "lower"
    idle_centi = func.sum(
        RightsizingSuggestion.guarantee_centi - RightsizingSuggestion.suggested_centi
    ).filter(lower)
    totals = select(
        func.count().filter(lower).label("idle"),
        func.coalesce(idle_centi, 0).label("idle_centi"),
        func.count().filter(RightsizingSuggestion.direction == "raise").label("starved"),
    ).cte("suggestion_totals")
    return (
        select(totals.c.idle).scalar_subquery(),
        select(totals.c.idle_centi).scalar_subquery(),
        select(totals.c.starved).scalar_subquery(),
    )


def average_use(session: Session, *, since: datetime) -> dict[int, float]:
    """Team -> GPUs of the default pool in use on average since ``since`` (raw and hourly
    samples, weighted)."""
    weight = func.sum(UsageSample.seconds)
    rows = session.execute(
        select(
            UsageSample.team_id, func.sum(UsageSample.allocated_gpu * UsageSample.seconds) / weight
        )
        .where(
            UsageSample.resolution.in_(("raw", "hour")),
            UsageSample.at >= since,
            UsageSample.pool == DEFAULT_POOL,
        )
        .group_by(UsageSample.team_id)
    )
    return {team_id: float(avg or 0.0) for team_id, avg in rows}


# --- GPU-hour budgets ------------------------------------------------------------------


def budgets_of_month(session: Session, month: str) -> list[GpuBudget]:
    return list(
        session.scalars(select(GpuBudget).where(GpuBudget.month == month).order_by(GpuBudget.id))
    )


def limited_budgets(session: Session) -> list[GpuBudget]:
    """The budgets whose team's borrowing is stopped and not yet put back."""
    return list(
        session.scalars(
            select(GpuBudget).where(
                GpuBudget.limited_at.is_not(None), GpuBudget.restored_at.is_(None)
            )
        )
    )


_TEAM_BUDGETS = (
    select(GpuBudget, Pool)
    .join(Pool, Pool.id == GpuBudget.pool_id)
    .where(GpuBudget.team_id == bindparam("team_id"), GpuBudget.month == bindparam("month"))
    .order_by(Pool.is_default.desc(), Pool.name)
)


def team_budgets_of(team_id: int, month: str) -> Read[list[GpuBudget]]:
    """The team's GPU-hour budgets of ``month`` with their pools (read with the team
    page's other lists)."""
    return Read(_TEAM_BUDGETS, {"team_id": team_id, "month": month}, with_pools)


def team_budgets(session: Session, team_id: int, month: str) -> list[GpuBudget]:
    return read(session, team_budgets_of(team_id, month))


def find_budget(session: Session, team_id: int, pool_id: int, month: str) -> GpuBudget | None:
    return session.scalar(
        select(GpuBudget).where(
            GpuBudget.team_id == team_id, GpuBudget.pool_id == pool_id, GpuBudget.month == month
        )
    )


def all_budgets(session: Session, *, month: str | None = None) -> list[GpuBudget]:
    """Every budget (of one month)."""
    query = select(GpuBudget)
    if month:
        query = query.where(GpuBudget.month == month)
    return list(session.scalars(query))


def evictions_since(
    session: Session, since: datetime, *, team_id: int | None = None, pool: str | None = None
) -> list[WorkloadEvent]:
    """KAI's evictions the portal kept since ``since``, oldest first (the digest's; with
    ``team_id`` and ``pool``, one team's in one pool: its usage history's)."""
    query = select(WorkloadEvent).where(
        WorkloadEvent.kind == WorkloadEventKind.EVICTED, WorkloadEvent.at >= since
    )
    if team_id is not None:
        query = query.where(WorkloadEvent.team_id == team_id)
    if pool is not None:
        query = query.where(WorkloadEvent.pool == pool)
    return list(session.scalars(query.order_by(WorkloadEvent.at)))
