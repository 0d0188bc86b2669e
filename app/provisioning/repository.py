"""Every query of the reconciler: leases on due teams."""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import (
    ColumnElement,
    ScalarSelect,
    Select,
    and_,
    case,
    exists,
    func,
    insert,
    literal,
    or_,
    select,
    update,
)
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from app.core.db import constant, constants
from app.core.models import (
    ChartRollout,
    ClusterTemplate,
    RolloutState,
    Sleep,
    Team,
    TeamSchedule,
    TeamStatus,
    TemplateVersion,
    UTCDateTime,
    WorkloadEvent,
    WorkloadEventKind,
)
from app.teams import repository as teams_repo

# Teams the reconciler looks at: everything that holds, or is building or removing, objects.
WORK_STATUSES = (
    TeamStatus.APPROVED,
    TeamStatus.PROVISIONING,
    TeamStatus.FAILED,
    TeamStatus.READY,
    TeamStatus.DECOMMISSIONING,
)


def claim_due(
    session: Session,
    *,
    owner: str,
    now: datetime,
    until: datetime,
    limit: int,
    due_by: datetime | None = None,
    exclude: Collection[int] = (),
) -> list[int]:
    """Lease up to ``limit`` teams that are due (by ``due_by``, else ``now``) and not
    leased by anyone else: read along the schedule's due index, in the order they were
    due (a team with nothing scheduled is never due). Only the schedule rows are locked
    and written."""
    query = (
        select(TeamSchedule.team_id)
        .join(Team, Team.id == TeamSchedule.team_id)
        .where(
            TeamSchedule.next_attempt_at <= (now if due_by is None else due_by),
            or_(TeamSchedule.lease_until.is_(None), TeamSchedule.lease_until < now),
            Team.status.in_(WORK_STATUSES),
        )
        .order_by(TeamSchedule.next_attempt_at)
        .limit(limit)
    )
    if exclude:
        query = query.where(TeamSchedule.team_id.not_in(exclude))
    if session.get_bind().dialect.name == "postgresql":
        query = query.with_for_update(skip_locked=True, of=TeamSchedule)
    due = list(session.scalars(query).all())
    if not due:
        return []
    # One statement leases them all; a team another worker leased meanwhile is skipped.
    claimed = session.scalars(
        update(TeamSchedule)
        .where(
            TeamSchedule.team_id.in_(due),
            or_(TeamSchedule.lease_until.is_(None), TeamSchedule.lease_until < now),
        )
        .values(lease_owner=owner, lease_until=until)
        .returning(TeamSchedule.team_id)
        .execution_options(synchronize_session=False)
    ).all()
    # In the order they were due.
    taken = set(claimed)
    return [team_id for team_id in due if team_id in taken]


def settle_rechecked(
    session: Session,
    *,
    times: Mapping[int, tuple[datetime | None, datetime]],
    owner: str,
    now: datetime,
) -> set[int]:
    """The re-checked teams whose every step was found as recorded (``times``: team ->
    when it was due, as read before the observation, and when next): re-checked at
    ``now``, next at each team's own time, their leases given back, in one statement.
    Only those still ready, settled, without an error or a template, leased to ``owner``
    and still due when they were are written: a decision, a nudge or a lost lease
    meanwhile leaves a team to the full pass. (Every decision sets the team's next
    attempt to now: the schedule row it writes is the one this statement writes, so one
    committed while this waits for the row is seen here.) The ids written."""
    if not times:
        return set()
    settled = select(Team.id).where(
        Team.id.in_(list(times)),
        Team.status == TeamStatus.READY,
        Team.observed_generation == Team.desired_generation,
        Team.attempts == 0,
        Team.last_error.is_(None),
        Team.template_version_id.is_(None),
    )
    unchanged = or_(
        *(
            and_(
                TeamSchedule.team_id == team_id,
                TeamSchedule.next_attempt_at.is_(None)
                if due is None
                else TeamSchedule.next_attempt_at == literal(due, UTCDateTime()),
            )
            for team_id, (due, _) in times.items()
        )
    )
    written = session.scalars(
        update(TeamSchedule)
        .where(TeamSchedule.team_id.in_(settled), TeamSchedule.lease_owner == owner, unchanged)
        .values(
            lease_owner=None,
            lease_until=None,
            last_reconciled_at=now,
            next_attempt_at=case(
                {team_id: literal(at, UTCDateTime()) for team_id, (_, at) in times.items()},
                value=TeamSchedule.team_id,
            ),
        )
        .returning(TeamSchedule.team_id)
        .execution_options(synchronize_session=False)
    ).all()
    return set(written)


def release(session: Session, *, team_id: int, owner: str) -> None:
    session.execute(
        update(TeamSchedule)
        .where(TeamSchedule.team_id == team_id, TeamSchedule.lease_owner == owner)
        .values(lease_owner=None, lease_until=None)
    )


def release_owned(session: Session, *, owner: str, keep: Collection[int] = ()) -> int:
    """Give back every lease ``owner`` holds but those of ``keep``; how many there were."""
    query = update(TeamSchedule).where(TeamSchedule.lease_owner == owner)
    if keep:
        query = query.where(TeamSchedule.team_id.not_in(keep))
    result = session.execute(
        query.values(lease_owner=None, lease_until=None).execution_options(
            synchronize_session=False
        )
    )
    return int(getattr(result, "rowcount", 0) or 0)


# --- vCluster chart rollouts -----------------------------------------------------------

# A team in one of these is still upgrading (or retrying its upgrade) when it holds the turn.
HOLDING_STATUSES = (TeamStatus.READY, TeamStatus.FAILED, TeamStatus.PROVISIONING)


def rollout(session: Session, version: str) -> ChartRollout:
    """The rollout to ``version``, created (running) when first needed."""
    found = session.get(ChartRollout, version)
    if found is not None:
        return found
    try:
        with session.begin_nested():
            session.add(ChartRollout(version=version, state="running", upgraded=0))
    except IntegrityError:
        pass  # another worker made it meanwhile
    found = session.get(ChartRollout, version, populate_existing=True)
    assert found is not None
    return found


def take_turn(session: Session, *, version: str, team_id: int, now: datetime) -> str | None:
    """Give ``team_id`` the one upgrade turn of the rollout to ``version``: None when it
    has it, else why it must wait. Atomic across portal processes (conditional update)."""
    row = rollout(session, version)
    if row.state == "stopped":
        return f"the rollout of chart {version} is stopped: {row.error}"
    if row.team_id == team_id:
        return None
    holder = session.get(Team, row.team_id) if row.team_id is not None else None
    if holder is not None and holder.status in HOLDING_STATUSES:
        return f"waiting for its turn to upgrade to {version} ({holder.name} is upgrading)"
    taken = session.execute(
        update(ChartRollout)
        .where(
            ChartRollout.version == version,
            ChartRollout.state == "running",
            ChartRollout.team_id.is_(None)
            if row.team_id is None
            else ChartRollout.team_id == row.team_id,
        )
        .values(team_id=team_id, started_at=now, updated_at=now)
        .execution_options(synchronize_session=False)
    )
    if getattr(taken, "rowcount", 0) == 1:
        return None
    return f"waiting for its turn to upgrade to {version}"


def finish_turn(session: Session, *, version: str, team_id: int, now: datetime) -> bool:
    """The team's upgrade is done: free the turn. False when it did not hold it."""
    done = session.execute(
        update(ChartRollout)
        .where(ChartRollout.version == version, ChartRollout.team_id == team_id)
        .values(team_id=None, started_at=None, upgraded=ChartRollout.upgraded + 1, updated_at=now)
        .execution_options(synchronize_session=False)
    )
    return getattr(done, "rowcount", 0) == 1


def stop_rollout(session: Session, *, version: str, error: str, now: datetime) -> bool:
    """Stop the rollout (the holder keeps its turn and retries alone). False if it was."""
    stopped = session.execute(
        update(ChartRollout)
        .where(ChartRollout.version == version, ChartRollout.state == "running")
        .values(state="stopped", error=error, updated_at=now)
        .execution_options(synchronize_session=False)
    )
    return getattr(stopped, "rowcount", 0) == 1


def resume_rollout(session: Session, *, version: str, now: datetime) -> bool:
    resumed = session.execute(
        update(ChartRollout)
        .where(ChartRollout.version == version, ChartRollout.state == "stopped")
        .values(state="running", error=None, started_at=now, updated_at=now)
        .execution_options(synchronize_session=False)
    )
    return getattr(resumed, "rowcount", 0) == 1


def turn_holder(session: Session, version: str) -> tuple[int | None, datetime | None]:
    row = session.get(ChartRollout, version)
    return (row.team_id, row.started_at) if row is not None else (None, None)


def _outdated(version: str) -> Select[Any]:
    """The ready teams still on another chart version than ``version``, or not yet on
    their template's version."""
    return select(Team.id).where(
        Team.status == TeamStatus.READY,
        or_(
            Team.vcluster_version.is_(None),
            Team.vcluster_version != version,
            and_(
                Team.template_version_id.is_not(None),
                or_(
                    Team.template_installed_id.is_(None),
                    Team.template_installed_id != Team.template_version_id,
                ),
            ),
        ),
    )


def outdated_count(session: Session, version: str, *, besides: int | None = None) -> int:
    """How many teams a rollout to ``version`` still has to move (``besides``: a team
    whose move is done but not yet written)."""
    query = _outdated(version)
    if besides is not None:
        query = query.where(Team.id != besides)
    found = session.scalar(select(func.count()).select_from(query.subquery()))
    return int(found or 0)


def nudge_outdated(session: Session, *, version: str, now: datetime) -> None:
    """Teams still on another chart or template version look again now (one of them
    takes the turn)."""
    outdated = _outdated(version)
    session.execute(
        update(TeamSchedule)
        .where(TeamSchedule.team_id.in_(outdated))
        .values(next_attempt_at=now)
        .execution_options(synchronize_session=False)
    )
    # And those with nothing scheduled (a team written past the models, e.g. seeded).
    unscheduled = outdated.where(~exists().where(TeamSchedule.team_id == Team.id))
    session.execute(
        insert(TeamSchedule).from_select(
            ["team_id", "next_attempt_at"], unscheduled.add_columns(literal(now, UTCDateTime()))
        )
    )


@dataclass(frozen=True)
class RolloutProgress:
    version: str
    total: int  # teams with a vCluster whose version is known
    upgraded: int  # of them, at ``version``
    state: str  # running | stopped
    holder: str | None  # the team being upgraded
    started_at: datetime | None
    error: str | None
    asleep: int = 0  # of those behind, asleep: upgraded once woken (a paused one stays so)

    @property
    def behind(self) -> int:
        return self.total - self.upgraded

    @property
    def percent(self) -> int:
        return round(100 * self.upgraded / self.total) if self.total else 100


# The teams a rollout counts, written as ix_teams_chart_version's predicate is.
_HOLDERS = (Team.status.in_(constants(HOLDING_STATUSES)), Team.vcluster_version.is_not(None))
# Of them, those whose installed template is not the wanted one (ix_teams_template_behind).
_TEMPLATE_BEHIND = (
    Team.template_version_id.is_not(None),
    or_(
        Team.template_installed_id.is_(None),
        Team.template_installed_id != Team.template_version_id,
    ),
)


def rollout_columns(version: str) -> tuple[ColumnElement[Any], ...]:
    """Where the move to ``version`` stands, as columns of a larger query: teams with a
    known version, of them at ``version``, and the rollout's state, start, error and the
    name of the team whose turn it is (NULL when there is no rollout row).

    The two counts read every team, so they are read only when the page shows them: when
    a team is behind (found along two indexes, without counting) or the rollout is
    stopped. Otherwise both are 0 (nothing to show); the database evaluates a subquery
    only where the CASE takes it."""

    # The version and the state written into the statement (``constant``): the overview
    # runs it as a prepared statement, whose generic plan PostgreSQL keeps only when the
    # skewed version column is not a parameter.
    wanted = constant(version)

    def of_row(column: Any) -> ScalarSelect[Any]:
        return select(column).where(ChartRollout.version == wanted).scalar_subquery()

    # Both counts in one pass over the teams: a common table expression that the two
    # columns read (PostgreSQL computes a CTE used twice once).
    at_wanted = and_(
        Team.vcluster_version == wanted,
        or_(
            Team.template_version_id.is_(None),
            Team.template_installed_id == Team.template_version_id,
        ),
    )
    counts = (
        select(
            func.count().label("total"),
            # At the chart version and, with a template, installed at its wanted version.
            func.count().filter(at_wanted).label("upgraded"),
            # Behind and asleep: a paused vCluster is upgraded once woken, not before.
            func.count()
            .filter(~at_wanted, Team.__table__.c.sleep != constant(Sleep.AWAKE.value))
            .label("asleep"),
        )
        .where(*_HOLDERS)
        .cte("rollout_counts")
    )
    # Another version either side of the wanted one: two ranges of the version index.
    other_version = or_(Team.vcluster_version < wanted, Team.vcluster_version > wanted)
    shown = (
        select(
            or_(
                exists().where(*_HOLDERS, other_version),
                exists().where(*_HOLDERS, *_TEMPLATE_BEHIND),
                of_row(ChartRollout.state) != constant(RolloutState.RUNNING.value),
            ).label("shown")
        )
        .cte("rollout_shown")
        .c.shown
    )
    return (
        case((select(shown).scalar_subquery(), select(counts.c.total).scalar_subquery()), else_=0),
        case(
            (select(shown).scalar_subquery(), select(counts.c.upgraded).scalar_subquery()),
            else_=0,
        ),
        case(
            (select(shown).scalar_subquery(), select(counts.c.asleep).scalar_subquery()),
            else_=0,
        ),
        of_row(ChartRollout.state),
        of_row(ChartRollout.started_at),
        of_row(ChartRollout.error),
        select(Team.name)
        .join(ChartRollout, ChartRollout.team_id == Team.id)
        .where(ChartRollout.version == wanted)
        .scalar_subquery(),
    )


def rollout_from(version: str, values: Sequence[Any]) -> RolloutProgress | None:
    """The rollout's progress from the values of ``rollout_columns``; None when no team
    runs another version and no rollout is stopped."""
    total, upgraded, asleep, state, started_at, error, holder = values
    if total == upgraded and state in (None, "running"):
        return None
    return RolloutProgress(
        version=version,
        total=int(total),
        upgraded=int(upgraded),
        state=state or "running",
        holder=holder,
        started_at=started_at,
        error=error,
        asleep=int(asleep or 0),
    )


@dataclass(frozen=True)
class RolloutDetail:
    """What a shown rollout moves, and which teams: read only when the card is shown."""

    chart_from: tuple[str, ...]  # the other chart versions teams run now
    templates: tuple[str, ...]  # "name vN" of the template versions teams move to
    waiting: tuple[str, ...]  # teams behind, by name (at most ``ROLLOUT_NAMES``)
    waiting_more: int  # behind beyond those named
    done: tuple[str, ...]  # teams already moved, by name (at most ``ROLLOUT_NAMES``)
    done_more: int


ROLLOUT_NAMES = 8


def rollout_detail(session: Session, version: str) -> RolloutDetail:
    """The chart versions and template versions a rollout to ``version`` moves teams
    from and to, and the teams behind and done (a few names each, then a count)."""
    behind = or_(Team.vcluster_version != version, and_(*_TEMPLATE_BEHIND))
    chart_from = session.scalars(
        select(Team.vcluster_version).where(*_HOLDERS, Team.vcluster_version != version).distinct()
    ).all()
    templates = session.execute(
        select(ClusterTemplate.name, TemplateVersion.number)
        .join(TemplateVersion, TemplateVersion.template_id == ClusterTemplate.id)
        .join(Team, Team.template_version_id == TemplateVersion.id)
        .where(*_HOLDERS, *_TEMPLATE_BEHIND)
        .distinct()
        .order_by(ClusterTemplate.name)
    ).all()

    def names(where: Any) -> tuple[tuple[str, ...], int]:
        found = session.scalars(
            select(Team.name).where(*_HOLDERS, where).order_by(Team.name).limit(ROLLOUT_NAMES + 1)
        ).all()
        if len(found) <= ROLLOUT_NAMES:
            return tuple(found), 0
        total = session.scalar(select(func.count()).select_from(Team).where(*_HOLDERS, where))
        return tuple(found[:ROLLOUT_NAMES]), int(total or 0) - ROLLOUT_NAMES

    waiting, waiting_more = names(behind)
    done, done_more = names(~behind)
    return RolloutDetail(
        chart_from=tuple(sorted(str(v) for v in chart_from if v)),
        templates=tuple(f"{name} v{number}" for name, number in templates),
        waiting=waiting,
        waiting_more=waiting_more,
        done=done,
        done_more=done_more,
    )


def pause_rollout(session: Session, *, version: str, why: str, now: datetime) -> bool:
    """An admin's pause: the rollout stops (the team upgrading finishes its own move) until
    resumed. False if it was stopped already."""
    rollout(session, version)
    return stop_rollout(session, version=version, error=why, now=now)


def rollout_progress(session: Session, version: str) -> RolloutProgress | None:
    return rollout_from(version, session.execute(select(*rollout_columns(version))).one())


def awake_ready_teams(session: Session) -> Sequence[Team]:
    """The ready teams whose vCluster is awake (the sleep policy's candidates)."""
    return session.scalars(
        select(Team).where(Team.status == TeamStatus.READY, Team.sleep == Sleep.AWAKE)
    ).all()


def count_asleep(session: Session) -> int:
    """The teams whose vCluster sleeps now (from the index of sleeping teams)."""
    return int(session.execute(select(asleep_count_column())).scalar() or 0)


def asleep_count_column() -> ColumnElement[Any]:
    """How many team vClusters sleep now, as a column of the overview's one statement."""
    return (
        select(func.count())
        .select_from(Team)
        .where(
            Team.__table__.c.sleep != constant(Sleep.AWAKE.value),
            Team.__table__.c.sleep == constant(Sleep.ASLEEP.value),
        )
        .scalar_subquery()
    )


# --- what KAI did to the teams' work --------------------------------------------------


def workload_event_keys(session: Session, team_id: int, keys: Collection[str]) -> set[str]:
    """Which of ``keys`` the team's history holds already."""
    if not keys:
        return set()
    found = session.scalars(
        select(WorkloadEvent.key).where(
            WorkloadEvent.team_id == team_id, WorkloadEvent.key.in_([k[:200] for k in keys])
        )
    )
    return set(found)


def add_workload_event(session: Session, row: WorkloadEvent) -> bool:
    """Keep ``row``; False when another process kept the same one first."""
    try:
        with session.begin_nested():
            session.add(row)
            session.flush()
    except IntegrityError:
        return False
    return True


def untold_evictions(session: Session, team_id: int) -> list[WorkloadEvent]:
    return list(
        session.scalars(
            select(WorkloadEvent)
            .where(
                WorkloadEvent.team_id == team_id,
                WorkloadEvent.kind == WorkloadEventKind.EVICTED,
                WorkloadEvent.notified_at.is_(None),
            )
            .order_by(WorkloadEvent.at, WorkloadEvent.id)
        )
    )


def last_told(session: Session, team_id: int) -> datetime | None:
    found = session.scalar(
        select(func.max(WorkloadEvent.notified_at)).where(WorkloadEvent.team_id == team_id)
    )
    return cast_utc(found)


def cast_utc(value: Any) -> datetime | None:
    """A max() over a UTC column comes back naive on SQLite."""
    if value is None:
        return None
    when = datetime.fromisoformat(value) if isinstance(value, str) else value
    assert isinstance(when, datetime)
    return when if when.tzinfo is not None else when.replace(tzinfo=UTC)


def workload_events(
    session: Session,
    *,
    team_id: int | None = None,
    kind: str | None = None,
    since: datetime | None = None,
    offset: int = 0,
    limit: int | None = None,
) -> tuple[list[WorkloadEvent], int]:
    """A team's (or every team's) kept decisions, newest first, and how many there are."""
    where = []
    if team_id is not None:
        where.append(WorkloadEvent.team_id == team_id)
    if kind is not None:
        where.append(WorkloadEvent.kind == kind)
    if since is not None:
        where.append(WorkloadEvent.at >= since)
    total = int(session.scalar(select(func.count()).select_from(WorkloadEvent).where(*where)) or 0)
    query = (
        select(WorkloadEvent)
        .where(*where)
        .order_by(WorkloadEvent.at.desc(), WorkloadEvent.id.desc())
        .offset(offset)
    )
    if limit is not None:
        query = query.limit(limit)
    return list(session.scalars(query)), total


def team_names(session: Session, ids: Collection[int]) -> dict[int, str]:
    """Id -> name of these teams, decommissioned ones too: an eviction's history names
    the team it went to even after."""
    return teams_repo.get_team_names(session, ids, decommissioned=True)


def teams_of_namespaces(session: Session, namespaces: Collection[str]) -> dict[str, int]:
    """The teams whose host namespaces these are (the newest of a name where an old one
    was decommissioned), to name whose work an eviction was for."""
    names = [n.removeprefix("vcluster-") for n in namespaces if n.startswith("vcluster-")]
    if not names:
        return {}
    rows = session.execute(select(Team.id, Team.name).where(Team.name.in_(names)).order_by(Team.id))
    return {Team(name=row.name).namespace: row.id for row in rows}


def awake_ready_team_ids(session: Session) -> list[int]:
    """The ready, awake teams' ids in a stable order (the decisions pass's round robin
    reads ids only, whatever the number of teams)."""
    query = select(Team.id).where(Team.status == TeamStatus.READY, Team.sleep == Sleep.AWAKE)
    return list(session.scalars(query.order_by(Team.id)))


def teams_by_ids(session: Session, ids: Collection[int]) -> list[Team]:
    if not ids:
        return []
    return list(session.scalars(select(Team).where(Team.id.in_(list(ids))).order_by(Team.id)))


def teams_with_untold_evictions(session: Session, ids: Collection[int]) -> set[int]:
    """Which of these teams have evictions not yet told (held back within a burst)."""
    if not ids:
        return set()
    found = session.scalars(
        select(WorkloadEvent.team_id)
        .where(
            WorkloadEvent.team_id.in_(list(ids)),
            WorkloadEvent.kind == WorkloadEventKind.EVICTED,
            WorkloadEvent.notified_at.is_(None),
        )
        .distinct()
    )
    return set(found)


def team_or_none(session: Session, team_id: int) -> Team | None:
    """The team, or None where it is gone since it was chosen."""
    return session.get(Team, team_id)
