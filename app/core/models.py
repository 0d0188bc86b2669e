"""The portal's tables.

GPU amounts and weights are stored as integer hundredths (0.33 GPU -> 33) so that sums
are exact on every database; CPU is stored in millicores and memory in megabytes, which
are also KAI's units.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime, timedelta
from enum import StrEnum
from typing import Any, Generic, NamedTuple, Self, TypeVar, cast, overload

from sqlalchemy import (
    JSON,
    REAL,
    BigInteger,
    Boolean,
    CheckConstraint,
    DateTime,
    Enum,
    Float,
    ForeignKey,
    Index,
    Integer,
    String,
    Text,
    UniqueConstraint,
    event,
    false,
    select,
    text,
)
from sqlalchemy.orm import Mapped, declared_attr, mapped_column, relationship
from sqlalchemy.types import TypeDecorator

from app.core.db import Base
from app.core.quota import PRIORITY_DEFAULT, Quota

# Lengths of the text columns people and providers fill; validation reads them from here.
EMAIL_MAX = 254
DISPLAY_NAME_MAX = 120
SUBJECT_MAX = 255
TOKEN_NAME_MAX = 100


def utcnow() -> datetime:
    return datetime.now(UTC)


class UTCDateTime(TypeDecorator[datetime]):
    """Timezone-aware datetimes on every database (SQLite drops the zone)."""

    impl = DateTime(timezone=True)
    cache_ok = True

    def process_bind_param(self, value: datetime | None, dialect: Any) -> datetime | None:
        if value is not None and value.tzinfo is None:
            raise ValueError("naive datetime")
        return value

    def process_result_value(self, value: datetime | None, dialect: Any) -> datetime | None:
        if value is not None and value.tzinfo is None:
            return value.replace(tzinfo=UTC)
        return value


V = TypeVar("V")


class TeamStatus(StrEnum):
    SUBMITTED = "submitted"
    REJECTED = "rejected"
    APPROVED = "approved"
    PROVISIONING = "provisioning"
    READY = "ready"
    FAILED = "failed"
    DECOMMISSIONING = "decommissioning"
    DECOMMISSIONED = "decommissioned"


class Sleep(StrEnum):
    """Where a team's vCluster is on its way between running and paused (as `vcluster
    pause`/`resume` pause and resume it); the reconciler brings the cluster there."""

    AWAKE = "awake"
    FALLING_ASLEEP = "falling_asleep"  # to be paused
    ASLEEP = "asleep"  # seen paused: no control plane, no pods; queue and state kept
    WAKING = "waking"  # to be resumed, until its API answers

    @property
    def wanted_asleep(self) -> bool:
        return self in (Sleep.FALLING_ASLEEP, Sleep.ASLEEP)


# Teams in these states hold their guarantee in the pool.
COMMITTED_STATUSES = (
    TeamStatus.APPROVED,
    TeamStatus.PROVISIONING,
    TeamStatus.READY,
    TeamStatus.FAILED,
    TeamStatus.DECOMMISSIONING,
)
# Teams whose name is taken.
LIVE_STATUSES = (TeamStatus.SUBMITTED, *COMMITTED_STATUSES)


class RequestKind(StrEnum):
    CREATE = "create"
    QUOTA_CHANGE = "quota_change"


class RequestStatus(StrEnum):
    SUBMITTED = "submitted"
    APPROVED = "approved"
    REJECTED = "rejected"
    APPLIED = "applied"
    CANCELLED = "cancelled"


class MemberRole(StrEnum):
    LEAD = "lead"
    MEMBER = "member"


class MemberSource(StrEnum):
    PORTAL = "portal"  # added by a lead, or by requesting the cluster
    GROUPS = "groups"  # from the provider's group claim, re-synchronised at every sign-in


class Outcome(StrEnum):
    APPROVED = "approved"
    REJECTED = "rejected"


# How long past its time a scheduled retry still counts as coming (a worker's pass).
RETRY_DUE_GRACE = timedelta(seconds=60)


class Step(StrEnum):
    QUEUE = "queue"
    NAMESPACE = "namespace"
    VCLUSTER = "vcluster"
    ADMISSION_POLICY = "admission_policy"
    KUBECONFIG = "kubeconfig"


# The order in which a team's steps are applied (and, reversed, removed).
STEP_ORDER = (Step.QUEUE, Step.NAMESPACE, Step.VCLUSTER, Step.ADMISSION_POLICY, Step.KUBECONFIG)


class StepStatus(StrEnum):
    PENDING = "pending"
    PROGRESSING = "progressing"
    DONE = "done"
    FAILED = "failed"
    REMOVED = "removed"


class RolloutState(StrEnum):
    RUNNING = "running"
    STOPPED = "stopped"


class PortalRole(StrEnum):
    """What a person is in the portal, for a team's cluster."""

    ADMIN = "admin"
    LEAD = "lead"
    MEMBER = "member"


class PersonalChannel(StrEnum):
    INAPP = "inapp"
    EMAIL = "email"


class WebhookKind(StrEnum):
    SLACK = "slack"
    JSON = "json"


class DeliveryChannel(StrEnum):
    EMAIL = "email"
    SLACK = "slack"
    JSON = "json"


class DeliveryStatus(StrEnum):
    PENDING = "pending"
    SENT = "sent"
    FAILED = "failed"  # given up


class Direction(StrEnum):
    """Which way a right-sizing suggestion moves a guarantee."""

    LOWER = "lower"
    RAISE = "raise"


class Resolution(StrEnum):
    """A usage sample's period: raw, an hour's roll-up, a day's."""

    RAW = "raw"
    HOUR = "hour"
    DAY = "day"


def choice(enum: type[StrEnum], length: int) -> Enum:
    """A column holding one of ``enum``'s values, stored as text and refused otherwise:
    by a CHECK constraint on PostgreSQL and by triggers on SQLite (migration 0004)."""
    return Enum(
        enum,
        name=f"{enum.__name__.lower()}_values",
        native_enum=False,
        create_constraint=True,
        length=length,
        validate_strings=True,
        values_callable=lambda e: [m.value for m in e],
    )


class Org(Base):
    """The organisation, its KAI parent queue and its node pools (``pools``)."""

    __tablename__ = "orgs"

    id: Mapped[int] = mapped_column(primary_key=True)
    name: Mapped[str] = mapped_column(String(63), unique=True)
    parent_queue: Mapped[str] = mapped_column(String(63), unique=True)
    # Bumped by every approval: the row lock it takes serialises pool decisions.
    lock_version: Mapped[int] = mapped_column(Integer, default=0)
    # Non-admins must choose a cluster template when they request a cluster.
    require_template: Mapped[bool] = mapped_column(Boolean, default=False, server_default="0")
    # Sleep policy: a team's idle vCluster is paused after this many hours (None: never
    # by policy); a team may choose up to ``sleep_max_hours``.
    sleep_after_hours: Mapped[int | None] = mapped_column(
        Integer,
        CheckConstraint(
            "sleep_after_hours IS NULL OR sleep_after_hours > 0", name="sleep_after_positive"
        ),
        nullable=True,
    )
    sleep_max_hours: Mapped[int] = mapped_column(Integer, default=168, server_default="168")
    # Quiet hours (migration 0022): daily windows ("22:00-07:00, 12:00-13:00") and the
    # weekends, in ``time_zone``, when an idle cluster sleeps after an hour.
    sleep_quiet_hours: Mapped[str] = mapped_column(String(200), default="", server_default="")
    sleep_weekends: Mapped[bool] = mapped_column(Boolean, default=False, server_default=false())
    time_zone: Mapped[str] = mapped_column(String(64), default="UTC", server_default="UTC")
    # The month ("2026-12") and its cluster-seconds asleep so far, counted up to
    # ``slept_counted_at`` by the sleep job.
    slept_month: Mapped[str] = mapped_column(String(7), default="", server_default="")
    slept_seconds: Mapped[int] = mapped_column(BigInteger, default=0, server_default="0")
    slept_counted_at: Mapped[datetime | None] = mapped_column(UTCDateTime, nullable=True)
    # The newest drift repair an admin acknowledged (its audit id): the overview lists
    # the repairs after it.
    repairs_seen_id: Mapped[int] = mapped_column(Integer, default=0, server_default="0")
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)

    # Read once a session (a few rows; the identity map keeps them).
    pools: Mapped[list[Pool]] = relationship(
        lazy="select", back_populates="org", order_by="Pool.id", cascade="all, delete-orphan"
    )

    @classmethod
    def with_pool(cls, name: str, capacity: Mapping[str, int], **fields: Any) -> Org:
        """A new org (its parent queue named after it) with its default pool."""
        org = cls(name=name, parent_queue=fields.pop("parent_queue", name), **fields)
        org.set_capacity(capacity)
        return org

    @property
    def default_pool(self) -> Pool:
        """The pool KAI's default shard serves (nodes without a node-pool label): the one
        pool of an org that has not set up others."""
        for pool in self.pools:
            if pool.is_default:
                return pool
        pool = Pool(name=DEFAULT_POOL, is_default=True)
        self.pools.append(pool)
        return pool

    @property
    def capacity(self) -> dict[str, int]:
        """The default pool's amount of each resource, in storage units (for an org read
        for showing, detached: the amounts read with it, ``known_capacity``)."""
        known: dict[str, int] | None = self.__dict__.get("_known_capacity")
        if known is not None:
            return dict(known)
        return self.default_pool.capacity

    def known_capacity(self, amounts: Mapping[str, int]) -> None:
        self.__dict__["_known_capacity"] = dict(amounts)

    def set_capacity(self, amounts: Mapping[str, int]) -> None:
        self.__dict__.pop("_known_capacity", None)
        self.default_pool.set_capacity(amounts)

    @property
    def gpus_centi(self) -> int:
        """The default pool's GPUs (hundredths)."""
        return self.capacity.get(GPU_RESOURCE, 0)


DEFAULT_POOL = "default"


class StoredValues(NamedTuple):
    """A line's values read as columns (``core.quota.StoredLine``)."""

    resource: str
    guarantee: int | None
    quota_limit: int | None
    weight: int


def default_pool_ids() -> Any:
    """The default pools' ids, for a statement's join to the lines held there (one row
    an org: read once by the statement, not per line)."""
    return select(Pool.id).where(Pool.is_default)


def in_pool(queue: str, pool: str) -> str:
    """A queue's name in another pool than the default (the team's, the org's): the
    default pool's name and the pool's ("team-nlp-l40s"), as queue names tell pools apart
    (KAI's queue metrics carry no pool)."""
    return f"{queue}-{pool}"


GPU_RESOURCE = "gpu"  # ``core.quota.GPU.key``: the resource the share divides
RESOURCE_MAX = 32  # a resource's key (KAI's name of it)


class Pool(Base):
    """A node pool: the nodes one KAI scheduler shard serves, and what teams may be
    guaranteed in it (its capacity, a line per resource)."""

    __tablename__ = "pools"
    __table_args__ = (
        UniqueConstraint("org_id", "name", name="uq_pools_org_id_name"),
        Index("uq_pools_org_id_label_value", "org_id", "label_value", unique=True),
        CheckConstraint("price_centi >= 0", name="price_not_negative"),
        # One default pool an org (KAI's default shard: nodes without the label).
        Index(
            "uq_pools_default",
            "org_id",
            unique=True,
            sqlite_where=text("is_default"),
            postgresql_where=text("is_default"),
        ),
    )

    id: Mapped[int] = mapped_column(primary_key=True)
    org_id: Mapped[int] = mapped_column(ForeignKey("orgs.id"))
    name: Mapped[str] = mapped_column(String(63))  # in queue names: a DNS label
    is_default: Mapped[bool] = mapped_column(Boolean, default=False)
    # The value of the node-pool label (PORTAL_NODE_POOL_LABEL_KEY) on the pool's nodes
    # and on its queues and pods; the default pool's: none, its nodes carry no label.
    label_value: Mapped[str] = mapped_column(String(63), default="", server_default="")
    gpu_type: Mapped[str] = mapped_column(String(100), default="", server_default="")
    # Price per GPU-hour, hundredths of the org's currency (None: no price set).
    price_centi: Mapped[int | None] = mapped_column(Integer, nullable=True)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)

    org: Mapped[Org] = relationship(lazy="raise", back_populates="pools")
    capacities: Mapped[list[PoolCapacity]] = relationship(
        lazy="select", cascade="all, delete-orphan", back_populates="pool"
    )

    @property
    def capacity(self) -> dict[str, int]:
        return {line.resource: line.amount for line in self.capacities}

    def queue_of_org(self, org_queue: str) -> str:
        """The org's queue in this pool: the org's own in the default pool."""
        return org_queue if self.is_default else in_pool(org_queue, self.name)

    def set_capacity(self, amounts: Mapping[str, int]) -> None:
        by_resource = {line.resource: line for line in self.capacities}
        for resource, amount in amounts.items():
            line = by_resource.get(resource)
            if line is None:
                self.capacities.append(PoolCapacity(resource=resource, amount=amount))
            else:
                line.amount = amount


class PoolCapacity(Base):
    """How much of one resource a pool holds for guarantees (storage units)."""

    __tablename__ = "pool_capacities"
    __table_args__ = (CheckConstraint("amount >= 0", name="amount_not_negative"),)

    pool_id: Mapped[int] = mapped_column(ForeignKey("pools.id"), primary_key=True)
    resource: Mapped[str] = mapped_column(String(RESOURCE_MAX), primary_key=True)
    amount: Mapped[int] = mapped_column(Integer)

    pool: Mapped[Pool] = relationship(lazy="raise", back_populates="capacities")


class QuotaLine:
    """One resource's quota in one pool, in storage units (``core.quota``): the
    guarantee (None: none asked), the limit (None: unlimited) and the over-quota weight.
    Each owner (team, request, decision) keeps its lines in a table of its own."""

    pool_id: Mapped[int] = mapped_column(ForeignKey("pools.id"), primary_key=True)
    resource: Mapped[str] = mapped_column(String(RESOURCE_MAX), primary_key=True)
    guarantee: Mapped[int | None] = mapped_column(Integer, nullable=True)
    quota_limit: Mapped[int | None] = mapped_column(Integer, nullable=True)  # "limit": SQL's
    weight: Mapped[int] = mapped_column(Integer, default=100)

    @declared_attr
    def pool(cls) -> Mapped[Pool]:
        # Read with the line (a pool is a short row): which pool a line is in.
        return relationship(Pool, lazy="joined")


def _line_checks() -> tuple[CheckConstraint, ...]:
    return (
        CheckConstraint("guarantee >= 0", name="guarantee_not_negative"),
        CheckConstraint("quota_limit >= 0", name="limit_not_negative"),
        CheckConstraint("weight >= 0", name="weight_not_negative"),
    )


class QuotaOwner:
    """A team, request or decision: its quota in a pool is its lines there."""

    quota_lines: Any  # the owner's lines (a relationship of each owner)
    priority: Any
    line_class: type[QuotaLine]

    @property
    def quota(self) -> Quota:
        """The quota held in the default pool (the one pool of a single-pool org); for
        an owner read for showing, detached, the quota read with it (``known_quota``)."""
        known: Quota | None = self.__dict__.get("_known_quota")
        if known is not None:
            return known
        lines = [line for line in self.quota_lines if line.pool.is_default]
        return Quota.from_lines(lines, self.priority or PRIORITY_DEFAULT)

    def known_quota(self, value: Quota) -> None:
        """The default pool's quota, read with the owner (not through its lines)."""
        self.__dict__["_known_quota"] = value

    def quota_in(self, pool: Pool) -> Quota:
        """The quota held in ``pool`` (none: a 0 GPU guarantee and limit)."""
        lines = [line for line in self.quota_lines if _in(line, pool)]
        return Quota.from_lines(lines, self.priority or PRIORITY_DEFAULT)

    def set_quota(self, pool: Pool, value: Quota) -> None:
        """Hold ``value`` in ``pool``: its lines updated in place, added or removed."""
        self.__dict__.pop("_known_quota", None)
        self.priority = value.priority
        mine = {line.resource: line for line in self.quota_lines if _in(line, pool)}
        for key, line in value.stored():
            row = mine.pop(key, None)
            if row is None:
                row = self.line_class()
                row.pool, row.resource = pool, key
                self.quota_lines.append(row)
            row.guarantee, row.quota_limit, row.weight = line.guarantee, line.limit, line.weight
        for gone in mine.values():
            self.quota_lines.remove(gone)

    def quota_by_pool(self) -> dict[Pool, Quota]:
        """The quota held in each pool but the default, in pool-name order."""
        pools = {id(line.pool): line.pool for line in self.quota_lines if not line.pool.is_default}
        ordered = sorted(pools.values(), key=lambda pool: pool.name)
        return {pool: self.quota_in(pool) for pool in ordered}

    def other_pools(self) -> dict[str, Quota]:
        """The quota held in each pool but the default, by pool name."""
        return {pool.name: value for pool, value in self.quota_by_pool().items()}

    def set_other_pools(self, pools: Mapping[Pool, Quota]) -> None:
        """Hold exactly ``pools`` beside the default pool: lines in any other pool go."""
        for line in list(self.quota_lines):
            if not line.pool.is_default and line.pool not in pools:
                _drop(self, line.pool)
        for pool, value in pools.items():
            self.set_quota(pool, value)


def _drop(owner: QuotaOwner, pool: Pool) -> None:
    """Remove every line ``owner`` holds in ``pool``."""
    for line in [line for line in owner.quota_lines if _in(line, pool)]:
        owner.quota_lines.remove(line)


def _in(line: QuotaLine, pool: Pool) -> bool:
    """Whether ``line`` is held in ``pool`` (by its key once both are stored)."""
    if pool.id is not None and line.pool_id is not None:
        return line.pool_id == pool.id
    return line.pool is pool


class TeamQuotaLine(QuotaLine, Base):
    __tablename__ = "team_quota_lines"
    __table_args__ = _line_checks()

    team_id: Mapped[int] = mapped_column(ForeignKey("teams.id"), primary_key=True)


class RequestQuotaLine(QuotaLine, Base):
    __tablename__ = "request_quota_lines"
    __table_args__ = _line_checks()

    request_id: Mapped[int] = mapped_column(ForeignKey("cluster_requests.id"), primary_key=True)


class DecisionQuotaLine(QuotaLine, Base):
    __tablename__ = "decision_quota_lines"
    __table_args__ = _line_checks()

    decision_id: Mapped[int] = mapped_column(ForeignKey("decisions.id"), primary_key=True)


class User(Base):
    __tablename__ = "users"

    id: Mapped[int] = mapped_column(primary_key=True)
    email: Mapped[str] = mapped_column(String(EMAIL_MAX), unique=True)
    # The identity provider's subject; None for users known only by e-mail so far.
    subject: Mapped[str | None] = mapped_column(String(SUBJECT_MAX), unique=True, nullable=True)
    display_name: Mapped[str] = mapped_column(String(DISPLAY_NAME_MAX))
    is_admin: Mapped[bool] = mapped_column(Boolean, default=False)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
    last_sign_in_at: Mapped[datetime | None] = mapped_column(UTCDateTime, nullable=True)


# The teams a chart rollout counts (they hold a vCluster of a known chart version) and,
# of them, those whose installed template is not the one wanted: index predicates.
CHART_HOLDERS = "status IN ('ready', 'failed', 'provisioning') AND vcluster_version IS NOT NULL"
TEMPLATE_BEHIND = (
    "template_version_id IS NOT NULL"
    " AND (template_installed_id IS NULL OR template_installed_id <> template_version_id)"
)


class _Scheduled(Generic[V]):
    """A field of the team's schedule (``TeamSchedule``), read and written on the team."""

    def __set_name__(self, owner: type, name: str) -> None:
        self.name = name

    @overload
    def __get__(self, team: None, owner: type) -> Self: ...
    @overload
    def __get__(self, team: Team, owner: type) -> V | None: ...
    def __get__(self, team: Team | None, owner: type) -> Self | V | None:
        if team is None:
            return self
        schedule = team.schedule
        return None if schedule is None else cast(V | None, getattr(schedule, self.name))

    def __set__(self, team: Team, value: V | None) -> None:
        setattr(team.scheduled(), self.name, value)


class Team(QuotaOwner, Base):
    """A team's cluster: its lifecycle and the quota the portal wants in the cluster."""

    __tablename__ = "teams"
    __table_args__ = (
        Index(
            "uq_teams_live_name",
            "name",
            unique=True,
            sqlite_where=text("status NOT IN ('rejected', 'decommissioned')"),
            postgresql_where=text("status NOT IN ('rejected', 'decommissioned')"),
            # With the ids (PostgreSQL): a page of the overview far down the list, and the
            # count of live teams, read from the index alone (no sort of every team).
            postgresql_include=["id"],
        ),
        # Every team by name, then id (the order the API pages every team in).
        Index("ix_teams_name_id", "name", "id"),
        # Teams by status (the worker's schedule is in ``team_schedules``).
        Index("ix_teams_status", "status"),
        # The sleeping teams alone (the overview counts them on every view).
        Index(
            "ix_teams_sleeping",
            "sleep",
            sqlite_where=text("sleep <> 'awake'"),
            postgresql_where=text("sleep <> 'awake'"),
        ),
        # Teams behind a chart rollout, found without counting every team: their chart
        # version (a range either side of the wanted one) and, almost always empty, those
        # whose installed template is not the wanted one. The predicates are written as
        # the rollout's query writes them, in constants (app/provisioning/repository.py).
        Index(
            "ix_teams_chart_version",
            "vcluster_version",
            sqlite_where=text(CHART_HOLDERS),
            postgresql_where=text(CHART_HOLDERS),
        ),
        Index(
            "ix_teams_template_behind",
            "id",
            sqlite_where=text(f"{CHART_HOLDERS} AND {TEMPLATE_BEHIND}"),
            postgresql_where=text(f"{CHART_HOLDERS} AND {TEMPLATE_BEHIND}"),
        ),
    )

    id: Mapped[int] = mapped_column(primary_key=True)
    org_id: Mapped[int] = mapped_column(ForeignKey("orgs.id"))
    name: Mapped[str] = mapped_column(String(63))
    status: Mapped[TeamStatus] = mapped_column(choice(TeamStatus, 20), default=TeamStatus.SUBMITTED)
    purpose: Mapped[str] = mapped_column(Text, default="")
    # The approved, desired quota (none until approved): its lines in ``quota_lines``.
    priority: Mapped[int] = mapped_column(Integer, default=100)
    line_class = TeamQuotaLine
    created_by_id: Mapped[int | None] = mapped_column(ForeignKey("users.id"), nullable=True)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
    updated_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow, onupdate=utcnow)
    ready_at: Mapped[datetime | None] = mapped_column(UTCDateTime, nullable=True)
    # Reconciler bookkeeping.
    desired_generation: Mapped[int] = mapped_column(Integer, default=0)
    observed_generation: Mapped[int] = mapped_column(Integer, default=0)
    attempts: Mapped[int] = mapped_column(Integer, default=0)
    last_error: Mapped[str | None] = mapped_column(Text, nullable=True)
    # The vCluster chart version last seen installed.
    vcluster_version: Mapped[str | None] = mapped_column(String(64), nullable=True)
    # The cluster template the team's vCluster is wanted with (None: a plain vCluster),
    # the lead's parameter values, and the version its vCluster was last installed with.
    # (Template version ids carry no foreign key: see migration 0013.)
    template_version_id: Mapped[int | None] = mapped_column(Integer, nullable=True)
    template_parameters: Mapped[dict[str, str]] = mapped_column(
        JSON, default=dict, server_default="{}"
    )
    template_installed_id: Mapped[int | None] = mapped_column(Integer, nullable=True)
    # What of the template was missing inside the vCluster when last checked (None: all in
    # place), and when that was.
    template_drift: Mapped[str | None] = mapped_column(Text, nullable=True)
    template_checked_at: Mapped[datetime | None] = mapped_column(UTCDateTime, nullable=True)
    # Sleep and wake (migration 0021): where the vCluster is on its way, since when it
    # sleeps, a lead's "keep awake until", the last use the portal saw, the team's choice.
    sleep: Mapped[Sleep] = mapped_column(
        choice(Sleep, 20), default=Sleep.AWAKE, server_default=Sleep.AWAKE.value
    )
    asleep_since: Mapped[datetime | None] = mapped_column(UTCDateTime, nullable=True)
    sleep_asked_at: Mapped[datetime | None] = mapped_column(UTCDateTime, nullable=True)
    sleep_reason: Mapped[str] = mapped_column(Text, default="", server_default="")
    awake_until: Mapped[datetime | None] = mapped_column(UTCDateTime, nullable=True)
    active_at: Mapped[datetime | None] = mapped_column(UTCDateTime, nullable=True)
    sleep_after_hours: Mapped[int | None] = mapped_column(
        Integer,
        CheckConstraint(
            "sleep_after_hours IS NULL OR sleep_after_hours > 0", name="sleep_after_positive"
        ),
        nullable=True,
    )

    org: Mapped[Org] = relationship(lazy="raise")
    # The quota's lines, by pool and resource (read with the teams, one query a load).
    quota_lines: Mapped[list[TeamQuotaLine]] = relationship(
        lazy="selectin", cascade="all, delete-orphan"
    )
    steps: Mapped[list[ProvisioningStep]] = relationship(
        lazy="raise", order_by="ProvisioningStep.position"
    )
    # When the worker next looks at the team and who holds it meanwhile, loaded with the
    # team (``next_attempt_at`` and the others below read and write it).
    schedule: Mapped[TeamSchedule | None] = relationship(
        lazy="joined", cascade="all, delete-orphan", back_populates="team"
    )
    # The collector's right-sizing suggestion, if it made one (loaded with the team's pages).
    suggestion: Mapped[RightsizingSuggestion | None] = relationship(lazy="raise", viewonly=True)
    # Read when shown (one row per version, kept by the session's identity map).
    template_version: Mapped[TemplateVersion | None] = relationship(
        primaryjoin="foreign(Team.template_version_id) == TemplateVersion.id",
        viewonly=True,
        lazy="select",
    )

    def scheduled(self) -> TeamSchedule:
        """The team's schedule row, made when first written."""
        if self.schedule is None:
            self.schedule = TeamSchedule()
        return self.schedule

    # Read and written as the team's own (None while nothing is scheduled).
    next_attempt_at = _Scheduled[datetime]()  # when the worker next looks at it
    last_reconciled_at = _Scheduled[datetime]()
    lease_owner = _Scheduled[str]()
    lease_until = _Scheduled[datetime]()

    @property
    def retrying(self) -> bool:
        """Failed, with the next automatic try to come (or due this minute, the worker
        about to take it): shown as retrying, not as a final failure. A try overdue by
        longer means nobody is retrying (no worker runs): a failure."""
        return (
            self.status == TeamStatus.FAILED
            and self.next_attempt_at is not None
            and self.next_attempt_at > utcnow() - RETRY_DUE_GRACE
        )

    @property
    def vcluster_name(self) -> str:
        return self.name

    @property
    def template_label(self) -> str:
        """ "kubeflow-training v2", or "" for a plain vCluster (reads its version row)."""
        version = self.template_version
        return version.label if version is not None else ""

    @property
    def namespace(self) -> str:
        return f"vcluster-{self.name}"

    @property
    def queue_name(self) -> str:
        return f"team-{self.name}"

    def queue_in(self, pool: Pool) -> str:
        """The team's queue in ``pool``: its queue in the default pool, one of its own in
        each other (a Queue belongs to one scheduler shard)."""
        return self.queue_name if pool.is_default else in_pool(self.queue_name, pool.name)


class GrantStatus(StrEnum):
    SUBMITTED = "submitted"  # waits for an admin
    APPROVED = "approved"  # applied from its start to its end (or an early end)
    REJECTED = "rejected"
    WITHDRAWN = "withdrawn"  # the lead took it back before a decision


class QuotaGrant(Base):
    """A temporary raise of a team's GPU guarantee (and limit) in one pool, for a window:
    asked by a lead, reviewed like a quota change, added to the team's quota at its start
    and taken back at its end (``applied_at`` / ``released_at``: when the portal did each,
    level-triggered by the clock; an end passed while the portal was down is applied at
    its next pass)."""

    __tablename__ = "quota_grants"
    __table_args__ = (
        Index("ix_quota_grants_team", "team_id", "starts_at"),
        Index("ix_quota_grants_due", "status", "released_at", "starts_at"),
        CheckConstraint("ends_at > starts_at", name="ends_after_start"),
        CheckConstraint("gpu_centi > 0 AND limit_centi >= 0", name="amounts_positive"),
    )

    id: Mapped[int] = mapped_column(primary_key=True)
    team_id: Mapped[int] = mapped_column(ForeignKey("teams.id"))
    pool_id: Mapped[int] = mapped_column(ForeignKey("pools.id"))
    gpu_centi: Mapped[int] = mapped_column(Integer)  # the guarantee added
    limit_centi: Mapped[int] = mapped_column(Integer)  # the limit added (unlimited: kept)
    starts_at: Mapped[datetime] = mapped_column(UTCDateTime)
    ends_at: Mapped[datetime] = mapped_column(UTCDateTime)
    reason: Mapped[str] = mapped_column(Text, default="")
    status: Mapped[GrantStatus] = mapped_column(
        choice(GrantStatus, 20), default=GrantStatus.SUBMITTED
    )
    requested_by_id: Mapped[int | None] = mapped_column(ForeignKey("users.id"), nullable=True)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
    decided_by_id: Mapped[int | None] = mapped_column(ForeignKey("users.id"), nullable=True)
    decided_at: Mapped[datetime | None] = mapped_column(UTCDateTime, nullable=True)
    decision_reason: Mapped[str] = mapped_column(Text, default="")
    applied_at: Mapped[datetime | None] = mapped_column(UTCDateTime, nullable=True)
    released_at: Mapped[datetime | None] = mapped_column(UTCDateTime, nullable=True)
    ended_early_at: Mapped[datetime | None] = mapped_column(UTCDateTime, nullable=True)
    ended_by_id: Mapped[int | None] = mapped_column(ForeignKey("users.id"), nullable=True)
    reminded_at: Mapped[datetime | None] = mapped_column(UTCDateTime, nullable=True)

    team: Mapped[Team] = relationship(lazy="raise")
    pool: Mapped[Pool] = relationship(lazy="joined")

    @property
    def end(self) -> datetime:
        """When it ends (or ended): its window's end, or an earlier end by hand."""
        early = self.ended_early_at
        return early if early is not None and early < self.ends_at else self.ends_at

    def active_at(self, at: datetime) -> bool:
        """Approved and inside its window at ``at``."""
        return self.status == GrantStatus.APPROVED and self.starts_at <= at < self.end


class GpuBudget(Base):
    """A team's GPU-hour budget in one pool for one calendar month (UTC): the burn is what
    KAI allocated to its queue there, summed from the usage history. ``alerted``: the
    highest threshold (percent) its people were told of; with ``stop_borrowing``, at
    100 % its limit there is lowered to its guarantee until the month ends
    (``limit_before`` kept to put back on the 1st)."""

    __tablename__ = "gpu_budgets"
    __table_args__ = (
        UniqueConstraint("team_id", "pool_id", "month", name="uq_gpu_budgets_team_pool_month"),
        CheckConstraint("gpu_hours_centi > 0", name="budget_positive"),
    )

    id: Mapped[int] = mapped_column(primary_key=True)
    team_id: Mapped[int] = mapped_column(ForeignKey("teams.id"))
    pool_id: Mapped[int] = mapped_column(ForeignKey("pools.id"))
    month: Mapped[str] = mapped_column(String(7))  # YYYY-MM
    gpu_hours_centi: Mapped[int] = mapped_column(Integer)
    stop_borrowing: Mapped[bool] = mapped_column(Boolean, default=False)
    alerted: Mapped[int] = mapped_column(Integer, default=0)
    limited_at: Mapped[datetime | None] = mapped_column(UTCDateTime, nullable=True)
    limit_before: Mapped[int | None] = mapped_column(Integer, nullable=True)
    restored_at: Mapped[datetime | None] = mapped_column(UTCDateTime, nullable=True)
    set_by_id: Mapped[int | None] = mapped_column(ForeignKey("users.id"), nullable=True)
    set_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)

    pool: Mapped[Pool] = relationship(lazy="joined")


class WorkloadEventKind(StrEnum):
    EVICTED = "evicted"  # KAI's Evict event on one of the team's PodGroups
    WAITED = "waited"  # a workload KAI kept waiting long


class WorkloadEvent(Base):
    """What KAI did to a team's work, kept for its history: an eviction (``Evict`` event:
    the action, the pods evicted together, the team whose work it was for, the GPUs and
    how long the work had run) or a long wait (KAI's reason). ``key`` makes each one
    recorded once per team (the event's uid; the wait's PodGroup and start).
    ``notified_at``: when the team was told (evictions come in bursts: one notice each)."""

    __tablename__ = "workload_events"
    __table_args__ = (
        UniqueConstraint("team_id", "key", name="uq_workload_events_team_key"),
        Index("ix_workload_events_at", "at"),
    )

    id: Mapped[int] = mapped_column(primary_key=True)
    team_id: Mapped[int] = mapped_column(ForeignKey("teams.id"))
    kind: Mapped[WorkloadEventKind] = mapped_column(choice(WorkloadEventKind, 16))
    key: Mapped[str] = mapped_column(String(200))
    pool: Mapped[str] = mapped_column(String(63), default="")  # label value; "": default
    workload: Mapped[str] = mapped_column(String(320), default="")  # namespace/name inside
    at: Mapped[datetime] = mapped_column(UTCDateTime)
    action: Mapped[str] = mapped_column(String(32), default="")  # KAI's, or its reason
    pods: Mapped[int] = mapped_column(Integer, default=1)
    gpu_centi: Mapped[int | None] = mapped_column(Integer, nullable=True)
    ran_seconds: Mapped[int | None] = mapped_column(Integer, nullable=True)
    by_team_id: Mapped[int | None] = mapped_column(ForeignKey("teams.id"), nullable=True)
    details: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)
    notified_at: Mapped[datetime | None] = mapped_column(UTCDateTime, nullable=True)

    @property
    def lost_gpu_hours(self) -> float | None:
        """The GPU-hours of work the eviction threw away (its GPUs times how long it had
        run), where both are known."""
        if self.gpu_centi is None or self.ran_seconds is None:
            return None
        return self.gpu_centi / 100 * self.ran_seconds / 3600


class TeamSchedule(Base):
    """The worker's bookkeeping of a team: when it next looks at it, who holds its lease
    and until when, when it last finished a pass. Apart from the team's row: the drift
    re-check writes these for every ready team every resync interval (33 teams a second
    at 10,000 teams), and in the team's row each re-check was two new versions of a wide
    row under six indexes, which left the overview's name index and count reading the
    table as well (a count of live teams became a scan of every team). A team without a
    row here has nothing scheduled."""

    __tablename__ = "team_schedules"
    __table_args__ = (Index("ix_team_schedules_due", "next_attempt_at"),)

    team_id: Mapped[int] = mapped_column(ForeignKey("teams.id"), primary_key=True)
    next_attempt_at: Mapped[datetime | None] = mapped_column(UTCDateTime, nullable=True)
    last_reconciled_at: Mapped[datetime | None] = mapped_column(UTCDateTime, nullable=True)
    lease_owner: Mapped[str | None] = mapped_column(String(64), nullable=True)
    lease_until: Mapped[datetime | None] = mapped_column(UTCDateTime, nullable=True)

    team: Mapped[Team] = relationship(lazy="raise", back_populates="schedule")


class ClusterTemplate(Base):
    """A kind of cluster admins offer (e.g. "Kubeflow training"): what a vCluster of the
    kind comes with is in its versions; teams choose one when they request a cluster."""

    __tablename__ = "cluster_templates"

    id: Mapped[int] = mapped_column(primary_key=True)
    name: Mapped[str] = mapped_column(String(40), unique=True)
    description: Mapped[str] = mapped_column(Text, default="")
    # Listed first and chosen unless a lead chooses another.
    is_default: Mapped[bool] = mapped_column(Boolean, default=False)
    # A new version reaches a team only once one of its leads accepts it.
    leads_accept: Mapped[bool] = mapped_column(Boolean, default=False)
    created_by_id: Mapped[int | None] = mapped_column(ForeignKey("users.id"), nullable=True)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)


class TemplateVersion(Base):
    """One published version of a template: its checked spec (``catalog.rules``), never
    changed once written; a change is the next version."""

    __tablename__ = "template_versions"
    __table_args__ = (Index("uq_template_versions_number", "template_id", "number", unique=True),)

    id: Mapped[int] = mapped_column(primary_key=True)
    template_id: Mapped[int] = mapped_column(ForeignKey("cluster_templates.id"))
    number: Mapped[int] = mapped_column(Integer)
    spec: Mapped[dict[str, Any]] = mapped_column(JSON)
    note: Mapped[str] = mapped_column(Text, default="")
    created_by_id: Mapped[int | None] = mapped_column(ForeignKey("users.id"), nullable=True)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)

    template: Mapped[ClusterTemplate] = relationship(lazy="joined")

    @property
    def label(self) -> str:
        """ "kubeflow-training v2", as people read a template version."""
        return f"{self.template.name} v{self.number}"


class ChartRollout(Base):
    """Moving every team's vCluster to one chart version, one team at a time.

    ``team_id`` holds the turn (the team being upgraded); a failed or stuck upgrade stops
    the rollout until an admin resumes it."""

    __tablename__ = "chart_rollouts"

    version: Mapped[str] = mapped_column(String(64), primary_key=True)
    state: Mapped[RolloutState] = mapped_column(
        choice(RolloutState, 16), default=RolloutState.RUNNING
    )
    team_id: Mapped[int | None] = mapped_column(
        ForeignKey("teams.id", ondelete="SET NULL"), nullable=True
    )
    started_at: Mapped[datetime | None] = mapped_column(UTCDateTime, nullable=True)
    error: Mapped[str | None] = mapped_column(Text, nullable=True)
    upgraded: Mapped[int] = mapped_column(Integer, default=0)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
    updated_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow, onupdate=utcnow)


class TeamMember(Base):
    __tablename__ = "team_members"
    # A user's memberships (every signed-in request reads them): not a walk of the whole
    # primary key, which leads with the team.
    __table_args__ = (Index("ix_team_members_user", "user_id", "team_id"),)

    team_id: Mapped[int] = mapped_column(ForeignKey("teams.id"), primary_key=True)
    user_id: Mapped[int] = mapped_column(ForeignKey("users.id"), primary_key=True)
    role: Mapped[MemberRole] = mapped_column(choice(MemberRole, 10), default=MemberRole.LEAD)
    source: Mapped[MemberSource] = mapped_column(
        choice(MemberSource, 10), default=MemberSource.PORTAL, server_default="portal"
    )
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)


class KubeconfigGrant(Base):
    """One personal kubeconfig handed out: who, for which team, with which role inside the
    vCluster, until when. The token itself is never stored. ``revoked_at`` is when the
    portal decided it must stop working; ``removed_at`` when its ServiceAccount was seen
    gone from the vCluster (a revocation is pending in between)."""

    __tablename__ = "kubeconfig_grants"
    __table_args__ = (Index("ix_kubeconfig_grants_team_removed", "team_id", "removed_at"),)

    id: Mapped[int] = mapped_column(primary_key=True)
    team_id: Mapped[int] = mapped_column(ForeignKey("teams.id"))
    user_id: Mapped[int] = mapped_column(ForeignKey("users.id"), index=True)
    portal_role: Mapped[PortalRole] = mapped_column(choice(PortalRole, 10))
    cluster_role: Mapped[str] = mapped_column(String(253))
    account: Mapped[str] = mapped_column(String(63))
    token_id: Mapped[str] = mapped_column(String(64), default="")
    simulated: Mapped[bool] = mapped_column(Boolean, default=False)
    issued_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
    expires_at: Mapped[datetime] = mapped_column(UTCDateTime)
    revoked_at: Mapped[datetime | None] = mapped_column(UTCDateTime, nullable=True)
    revoked_reason: Mapped[str] = mapped_column(Text, default="")
    removed_at: Mapped[datetime | None] = mapped_column(UTCDateTime, nullable=True)
    # When its holder was told it expires within a day (long-lived ones only).
    expiry_told_at: Mapped[datetime | None] = mapped_column(UTCDateTime, nullable=True)


class Notification(Base):
    """Something a person should hear about (a request to decide, a decision, a cluster
    ready or failed, being added to a team), written in the transaction of the change
    itself; shown in the portal's bell until read."""

    __tablename__ = "notifications"
    __table_args__ = (Index("ix_notifications_user_read", "user_id", "read_at", "id"),)

    id: Mapped[int] = mapped_column(primary_key=True)
    user_id: Mapped[int] = mapped_column(ForeignKey("users.id"))
    team_id: Mapped[int | None] = mapped_column(ForeignKey("teams.id"), nullable=True)
    event: Mapped[str] = mapped_column(String(40))
    title: Mapped[str] = mapped_column(String(300))
    link: Mapped[str] = mapped_column(String(300), default="")
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
    read_at: Mapped[datetime | None] = mapped_column(UTCDateTime, nullable=True)


class NotificationMute(Base):
    """A person's "not this event on this channel" (everything is on until muted)."""

    __tablename__ = "notification_mutes"

    user_id: Mapped[int] = mapped_column(ForeignKey("users.id"), primary_key=True)
    event: Mapped[str] = mapped_column(String(40), primary_key=True)
    channel: Mapped[PersonalChannel] = mapped_column(choice(PersonalChannel, 10), primary_key=True)


class Webhook(Base):
    """Where a team's (or, without a team, the whole org's) events are posted: a
    Slack-compatible incoming webhook or a signed JSON webhook. The URL (a Slack URL is
    itself a credential) and the signing secret are stored sealed, never in clear."""

    __tablename__ = "webhooks"
    __table_args__ = (Index("uq_webhooks_scope_kind", "scope", "kind", unique=True),)

    id: Mapped[int] = mapped_column(primary_key=True)
    scope: Mapped[str] = mapped_column(String(20))  # "org" or "team:<id>"
    team_id: Mapped[int | None] = mapped_column(ForeignKey("teams.id"), nullable=True)
    kind: Mapped[WebhookKind] = mapped_column(choice(WebhookKind, 10))
    url_sealed: Mapped[str] = mapped_column(Text)
    url_hint: Mapped[str] = mapped_column(String(300))  # scheme://host/… for pages
    secret_sealed: Mapped[str] = mapped_column(Text, default="")
    created_by_id: Mapped[int] = mapped_column(ForeignKey("users.id"))
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)


class Delivery(Base):
    """One message to send on one channel: an e-mail for one person's notification, or
    one post of an event to one webhook. Written in the transaction of the change; sent by
    whichever portal process leases it; retried with back-off, given up after a limit."""

    __tablename__ = "deliveries"
    __table_args__ = (
        Index("ix_deliveries_due", "status", "next_attempt_at"),
        Index("ix_deliveries_status_id", "status", "id"),
    )

    id: Mapped[int] = mapped_column(primary_key=True)
    channel: Mapped[DeliveryChannel] = mapped_column(choice(DeliveryChannel, 10))
    notification_id: Mapped[int | None] = mapped_column(
        ForeignKey("notifications.id"), nullable=True
    )
    webhook_id: Mapped[int | None] = mapped_column(
        ForeignKey("webhooks.id", ondelete="SET NULL"), nullable=True
    )
    team_id: Mapped[int | None] = mapped_column(ForeignKey("teams.id"), nullable=True)
    event: Mapped[str] = mapped_column(String(40))
    title: Mapped[str] = mapped_column(String(300))
    # The message's text for its channel (the e-mail's, the chat line), from the event's
    # template; the title where empty.
    body: Mapped[str] = mapped_column(Text, default="", server_default="")
    link: Mapped[str] = mapped_column(String(300), default="")
    status: Mapped[DeliveryStatus] = mapped_column(
        choice(DeliveryStatus, 10), default=DeliveryStatus.PENDING
    )
    attempts: Mapped[int] = mapped_column(Integer, default=0)
    next_attempt_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
    lease_owner: Mapped[str | None] = mapped_column(String(100), nullable=True)
    lease_until: Mapped[datetime | None] = mapped_column(UTCDateTime, nullable=True)
    last_error: Mapped[str] = mapped_column(String(500), default="")
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
    sent_at: Mapped[datetime | None] = mapped_column(UTCDateTime, nullable=True)


class DigestRun(Base):
    """A weekly digest written (ISO week, e.g. 2026-W49): the key makes it once per week
    whichever portal process gets there first."""

    __tablename__ = "digest_runs"

    week: Mapped[str] = mapped_column(String(10), primary_key=True)
    written_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)


class RightsizingSuggestion(Base):
    """A team's guarantee that its usage history says is too large (idle) or too small
    (its work waited), recomputed by the collector; amounts in hundredths of a GPU."""

    __tablename__ = "rightsizing_suggestions"

    team_id: Mapped[int] = mapped_column(ForeignKey("teams.id"), primary_key=True)
    # The node pool the guarantee is in, by name ("": the org's default pool).
    pool: Mapped[str] = mapped_column(String(17), primary_key=True, default="", server_default="")
    direction: Mapped[Direction] = mapped_column(choice(Direction, 8))
    guarantee_centi: Mapped[int] = mapped_column(Integer)
    average_centi: Mapped[int] = mapped_column(Integer)
    p95_centi: Mapped[int] = mapped_column(Integer)
    demand_p95_centi: Mapped[int] = mapped_column(Integer)
    waiting_share: Mapped[float] = mapped_column(Float)
    suggested_centi: Mapped[int] = mapped_column(Integer)
    days: Mapped[int] = mapped_column(Integer)
    computed_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)


class ClusterRequest(QuotaOwner, Base):
    """A request for a new cluster or for a quota change, with the values asked for."""

    __tablename__ = "cluster_requests"
    __table_args__ = (
        Index("ix_cluster_requests_status", "status", "created_at"),
        # One open request per team, whoever races to submit.
        Index(
            "uq_cluster_requests_open",
            "team_id",
            unique=True,
            sqlite_where=text("status = 'submitted'"),
            postgresql_where=text("status = 'submitted'"),
        ),
    )

    id: Mapped[int] = mapped_column(primary_key=True)
    team_id: Mapped[int] = mapped_column(ForeignKey("teams.id"), index=True)
    kind: Mapped[RequestKind] = mapped_column(choice(RequestKind, 20))
    status: Mapped[RequestStatus] = mapped_column(
        choice(RequestStatus, 20), default=RequestStatus.SUBMITTED
    )
    purpose: Mapped[str] = mapped_column(Text, default="")
    requested_by_id: Mapped[int | None] = mapped_column(ForeignKey("users.id"), nullable=True)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
    priority: Mapped[int] = mapped_column(Integer)
    line_class = RequestQuotaLine
    # The cluster template asked for (a create request) and its parameter values.
    template_version_id: Mapped[int | None] = mapped_column(Integer, nullable=True)
    template_parameters: Mapped[dict[str, str]] = mapped_column(
        JSON, default=dict, server_default="{}"
    )

    team: Mapped[Team] = relationship(lazy="raise")
    quota_lines: Mapped[list[RequestQuotaLine]] = relationship(
        lazy="selectin", cascade="all, delete-orphan"
    )
    # Who asked: loaded with the lists that show it (the review card, the API); else from
    # the session's identity map, or one read.
    requester: Mapped[User | None] = relationship(
        foreign_keys=[requested_by_id], viewonly=True, lazy="select"
    )
    # Read when shown (one row per version, kept by the session's identity map).
    template_version: Mapped[TemplateVersion | None] = relationship(
        primaryjoin="foreign(ClusterRequest.template_version_id) == TemplateVersion.id",
        viewonly=True,
        lazy="select",
    )


class Decision(QuotaOwner, Base):
    """An admin's decision on a request: the approved values or the reason for rejecting."""

    __tablename__ = "decisions"

    id: Mapped[int] = mapped_column(primary_key=True)
    request_id: Mapped[int] = mapped_column(ForeignKey("cluster_requests.id"), unique=True)
    actor_id: Mapped[int | None] = mapped_column(ForeignKey("users.id"), nullable=True)
    outcome: Mapped[Outcome] = mapped_column(choice(Outcome, 20))
    reason: Mapped[str] = mapped_column(Text, default="")
    decided_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
    # The approved quota (a rejection has none): the priority and the lines.
    priority: Mapped[int | None] = mapped_column(Integer, nullable=True)
    line_class = DecisionQuotaLine
    quota_lines: Mapped[list[DecisionQuotaLine]] = relationship(
        lazy="selectin", cascade="all, delete-orphan"
    )
    # The template approved (a create request), when a template was asked for or chosen.
    template_version_id: Mapped[int | None] = mapped_column(Integer, nullable=True)
    template_parameters: Mapped[dict[str, str]] = mapped_column(
        JSON, default=dict, server_default="{}"
    )
    # Field -> [asked, approved] for every value the admin changed.
    changes: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)
    # Read when shown (one row per version, kept by the session's identity map).
    template_version: Mapped[TemplateVersion | None] = relationship(
        primaryjoin="foreign(Decision.template_version_id) == TemplateVersion.id",
        viewonly=True,
        lazy="select",
    )


class ProvisioningStep(Base):
    """One condition per provisioning step of a team."""

    __tablename__ = "provisioning_steps"

    team_id: Mapped[int] = mapped_column(ForeignKey("teams.id"), primary_key=True)
    step: Mapped[Step] = mapped_column(choice(Step, 30), primary_key=True)
    position: Mapped[int] = mapped_column(Integer)
    status: Mapped[StepStatus] = mapped_column(choice(StepStatus, 20), default=StepStatus.PENDING)
    message: Mapped[str] = mapped_column(Text, default="")
    updated_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
    # Once in place (the page's progress counts it while it is retried or re-applied).
    reached: Mapped[bool] = mapped_column(Boolean, default=False, server_default=false())


class AuditEvent(Base):
    """Append-only record of who did what, when."""

    __tablename__ = "audit_events"
    __table_args__ = (
        Index("ix_audit_events_team_at", "team_id", "at"),
        # The newest events of one action (e.g. the overview's drift list), read backwards.
        Index("ix_audit_events_action_id", "action", "id"),
    )

    id: Mapped[int] = mapped_column(primary_key=True)
    at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow, index=True)
    actor_id: Mapped[int | None] = mapped_column(ForeignKey("users.id"), nullable=True)
    actor: Mapped[str] = mapped_column(String(254))
    action: Mapped[str] = mapped_column(String(60))
    team_id: Mapped[int | None] = mapped_column(ForeignKey("teams.id"), nullable=True)
    summary: Mapped[str] = mapped_column(Text, default="")
    details: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)


class WebSession(Base):
    """A signed-in browser. The cookie holds a random id; only its hash is stored."""

    __tablename__ = "web_sessions"

    id: Mapped[int] = mapped_column(primary_key=True)
    token_hash: Mapped[str] = mapped_column(String(64), unique=True)
    user_id: Mapped[int] = mapped_column(ForeignKey("users.id"), index=True)
    method: Mapped[str] = mapped_column(String(20))
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
    last_seen_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
    expires_at: Mapped[datetime] = mapped_column(UTCDateTime)
    revoked_at: Mapped[datetime | None] = mapped_column(UTCDateTime, nullable=True)


class ApiToken(Base):
    """A personal API token: shown once, stored only as a hash, acting with its owner's rights."""

    __tablename__ = "api_tokens"

    id: Mapped[int] = mapped_column(primary_key=True)
    user_id: Mapped[int] = mapped_column(ForeignKey("users.id"), index=True)
    name: Mapped[str] = mapped_column(String(TOKEN_NAME_MAX))
    prefix: Mapped[str] = mapped_column(String(16))
    token_hash: Mapped[str] = mapped_column(String(64), unique=True)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
    expires_at: Mapped[datetime] = mapped_column(UTCDateTime)
    last_used_at: Mapped[datetime | None] = mapped_column(UTCDateTime, nullable=True)
    revoked_at: Mapped[datetime | None] = mapped_column(UTCDateTime, nullable=True)


class UsageSample(Base):
    """A team's GPU use over one period: raw samples for a day, hourly roll-ups for a
    week (the sparkline), daily roll-ups after that (showback)."""

    __tablename__ = "usage_samples"

    team_id: Mapped[int] = mapped_column(ForeignKey("teams.id"), primary_key=True)
    # The node pool the GPUs were used in, by name ("": the org's default pool).
    pool: Mapped[str] = mapped_column(String(17), primary_key=True, default="", server_default="")
    resolution: Mapped[Resolution] = mapped_column(choice(Resolution, 4), primary_key=True)
    at: Mapped[datetime] = mapped_column(UTCDateTime, primary_key=True)  # period start
    seconds: Mapped[int] = mapped_column(Integer)
    # Averages over the period, in GPUs (single precision: 0.01 GPU is far above its error).
    allocated_gpu: Mapped[float] = mapped_column(REAL)
    requested_gpu: Mapped[float] = mapped_column(REAL)
    quota_gpu: Mapped[float] = mapped_column(REAL)
    # GPU-seconds within the guarantee and above it (borrowed), summed on roll-up.
    guaranteed_gpu_s: Mapped[float] = mapped_column(Float)
    borrowed_gpu_s: Mapped[float] = mapped_column(Float)


@event.listens_for(Org, "refresh")
@event.listens_for(Org, "expire")
def _forget_capacity(target: Org | None, *_: Any) -> None:
    """An org read again forgets the amounts it was told (``known_capacity``); one no
    longer referenced has nothing to forget."""
    if target is not None:
        target.__dict__.pop("_known_capacity", None)


def _forget_quota(target: QuotaOwner | None, *_: Any) -> None:
    """An owner read again forgets the quota it was told (``known_quota``)."""
    if target is not None:
        target.__dict__.pop("_known_quota", None)


for _owner in (Team, ClusterRequest, Decision):
    event.listen(_owner, "refresh", _forget_quota)
    event.listen(_owner, "expire", _forget_quota)
