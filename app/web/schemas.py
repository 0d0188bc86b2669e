"""JSON API bodies (the OpenAPI document is generated from these)."""

from __future__ import annotations

from datetime import datetime
from decimal import Decimal
from typing import TYPE_CHECKING, Annotated, Any, Literal

from pydantic import AfterValidator, BaseModel, BeforeValidator, ConfigDict, Field, create_model

from app.core import quota
from app.core.models import EMAIL_MAX, TOKEN_NAME_MAX
from app.core.quantities import QUANTITY_MAX, is_plain_number, parse_hundredths
from app.core.quota import PRIORITY_MAX, PRIORITY_MIN, Quota
from app.teams.rules import PURPOSE_MAX, REASON_MAX


def _plain_number(value: object) -> object:
    """JSON true is not 1, and "0_1" or other scripts' digits are not amounts."""
    if isinstance(value, bool):
        raise ValueError("use a number such as 0.33, not true or false")
    if isinstance(value, str) and not is_plain_number(value):
        raise ValueError("use digits with at most one dot, e.g. 0.33")
    return value


def _two_decimals(value: Decimal) -> Decimal:
    """As the forms: at most two decimals (hundredths are what is stored)."""
    parse_hundredths(format(value, "f"), what="the amount")
    return value


def _hundredths(value: Decimal) -> int:
    return int(value * 100)


Amount = Annotated[
    Decimal,
    BeforeValidator(_plain_number),
    Field(ge=0, le=QUANTITY_MAX, allow_inf_nan=False),
    AfterValidator(_two_decimals),
]


def _quota_fields(*, answer: bool) -> dict[str, Any]:
    """The quota's fields, one per line of the declaration (``core.quota``): a body's
    (``answer`` False) or an answer's (amounts as the forms write them)."""
    fields: dict[str, Any] = {}
    for res in quota.RESOURCES:
        what = f"{res.in_sentence} ({res.unit})" if res.unit != res.name else f"{res.unit}s"
        amount: Any = str if answer else Amount
        if res.required:
            fields[res.guarantee_field] = (
                amount,
                Field(description=f"Guaranteed {what} (fractions to two decimals)."),
            )
        else:
            fields[res.guarantee_field] = (
                amount | None,
                Field(default=None, description=f"Guaranteed {what}; none if left out."),
            )
        if res.limited:
            fields[res.limit_field] = (
                amount,
                Field(description=f"Most {what} the team may use, guarantee included."),
            )
    fields[quota.WEIGHT_FIELD] = (
        str if answer else Amount,
        Field(
            default=Decimal(1) if not answer else ...,
            description="Share of idle resources relative to other teams.",
        ),
    )
    fields[quota.PRIORITY_FIELD] = (
        int,
        Field(
            default=quota.PRIORITY_DEFAULT if not answer else ...,
            ge=PRIORITY_MIN,
            le=PRIORITY_MAX,
            strict=True,
            description=f"KAI queue priority ({PRIORITY_MIN}-{PRIORITY_MAX}).",
        )
        if not answer
        else Field(),
    )
    return fields


class QuotaLineOut(BaseModel):
    """One resource's quota in one pool, as the forms write amounts (null: none asked,
    or no limit)."""

    guarantee: str | None
    limit: str | None
    weight: str


PoolQuotas = dict[str, dict[str, QuotaLineOut]]

if TYPE_CHECKING:  # built from the declaration below; a plain model to the type checker
    QuotaFields = BaseModel
    PoolQuotaIn = BaseModel
    QuotaOut = BaseModel
else:
    QuotaFields = create_model(
        "QuotaFields", __config__=ConfigDict(extra="forbid"), **_quota_fields(answer=False)
    )
    # A pool's quota: the same fields but the priority (the team's, one for all its queues).
    PoolQuotaIn = create_model(
        "PoolQuotaIn",
        __config__=ConfigDict(extra="forbid"),
        **{
            name: spec
            for name, spec in _quota_fields(answer=False).items()
            if name != quota.PRIORITY_FIELD
        },
    )
    QuotaOut = create_model(
        "QuotaOut",
        **_quota_fields(answer=True),
        pools=(
            PoolQuotas,
            Field(
                default_factory=dict,
                description="Every line by node pool and resource (KAI's names: gpu, cpu, "
                "memory); the fields above are the default pool's.",
            ),
        ),
    )


class QuotaIn(QuotaFields):
    purpose: str = Field(default="", max_length=PURPOSE_MAX, description="What the team will run.")
    pools: dict[Annotated[str, Field(max_length=63)], PoolQuotaIn] | None = Field(
        default=None,
        max_length=50,
        description="The quota in node pools other than the default, by pool name "
        "(`GET /api/v1/pools`); the fields above are the default pool's. A quota change "
        "that leaves this out keeps the team's other pools; a pool left out of it (or "
        "given no guarantee and a limit of 0) is left.",
    )

    def values(self) -> Quota:
        """The validated body as the services take it (storage units): no second parse."""
        data = self.model_dump()
        return _quota_of(data, data[quota.PRIORITY_FIELD])

    def pool_values(self) -> dict[str, Quota] | None:
        """The other pools' quotas as the services take them (None: left out)."""
        if self.pools is None:
            return None
        priority = self.model_dump()[quota.PRIORITY_FIELD]
        return {name: _quota_of(body.model_dump(), priority) for name, body in self.pools.items()}


def _quota_of(data: dict[str, Any], priority: int) -> Quota:
    weight = _hundredths(data[quota.WEIGHT_FIELD])
    lines = []
    for res in quota.RESOURCES:
        guarantee = data.get(res.guarantee_field)
        limit = data.get(res.limit_field) if res.limited else None
        lines.append(
            quota.Line(
                None if guarantee is None else _hundredths(guarantee) * res.scale,
                None if limit is None else _hundredths(limit) * res.scale,
                weight,
            )
        )
    return Quota(tuple(lines), priority)


TemplateId = Annotated[int, Field(ge=1, le=2**31 - 1, strict=True)]
Parameters = Annotated[
    dict[Annotated[str, Field(max_length=31)], Annotated[str, Field(max_length=200)]],
    Field(max_length=50),
]


class ClusterRequestIn(QuotaIn):
    name: str = Field(
        max_length=63, description="Team name: a DNS-1123 label of at most 40 characters."
    )
    template_id: TemplateId | None = Field(
        default=None,
        description="The cluster template (`GET /api/v1/templates`); left out: a plain "
        "vCluster, unless the org requires a template.",
    )
    parameters: Parameters = Field(
        default_factory=dict, description="The template's parameters (the defaults if left out)."
    )


class TemplateIn(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: str = Field(max_length=40, description="A DNS-1123 label, e.g. kubeflow-training.")
    description: str = Field(default="", max_length=2000)
    spec: dict[str, Any] = Field(
        description="Version 1: `manifests` (YAML), `charts`, `vcluster_values`, "
        "`parameters`, `default_quota`, `repair_drift`."
    )
    is_default: bool = Field(default=False, strict=True)
    leads_accept: bool = Field(
        default=False,
        strict=True,
        description="A new version reaches a team once one of its leads accepts it.",
    )


class TemplateSettingsIn(BaseModel):
    model_config = ConfigDict(extra="forbid")

    description: str | None = Field(default=None, max_length=2000)
    is_default: bool | None = Field(default=None, strict=True)
    leads_accept: bool | None = Field(default=None, strict=True)


class TemplatesRequiredOut(BaseModel):
    model_config = ConfigDict(extra="forbid")

    required: bool = Field(
        strict=True, description="Non-admins must choose a cluster template to request."
    )


class TemplateVersionIn(BaseModel):
    model_config = ConfigDict(extra="forbid")

    spec: dict[str, Any]
    note: str = Field(default="", max_length=500, description="What changed (audit trail).")


class TemplateRefOut(BaseModel):
    template_id: int
    name: str
    version: int
    version_id: int
    parameters: dict[str, str]


class TemplateVersionOut(BaseModel):
    id: int
    number: int
    note: str
    created_at: datetime
    spec: dict[str, Any]


class TemplateOut(BaseModel):
    id: int
    name: str
    description: str
    is_default: bool
    leads_accept: bool
    latest: TemplateVersionOut
    teams: int
    versions: list[TemplateVersionOut] | None = None


class DecisionIn(BaseModel):
    model_config = ConfigDict(extra="forbid")

    adjusted: QuotaIn | None = Field(
        default=None, description="Approve with these values instead of the requested ones."
    )
    template_id: TemplateId | Literal[0] | None = Field(
        default=None,
        description="Approve with this cluster template instead of the one asked for "
        "(0: a plain vCluster; left out: as asked).",
    )
    parameters: Parameters = Field(
        default_factory=dict, description="The parameters of `template_id`."
    )
    reason: str = Field(
        default="", max_length=REASON_MAX, description="Why (kept in the audit trail)."
    )


class RejectIn(BaseModel):
    model_config = ConfigDict(extra="forbid")

    reason: str = Field(
        min_length=1, max_length=REASON_MAX, description="Why the request is rejected."
    )


class PoolIn(BaseModel):
    model_config = ConfigDict(extra="forbid")

    gpus: Amount
    cpu_cores: Amount | None = Field(
        default=None, description="left out: the pool keeps its CPU cores"
    )
    memory_gb: Amount | None = Field(
        default=None, description="left out: the pool keeps its memory"
    )
    below_committed: bool = Field(
        default=False,
        description="confirm a pool below the GPUs already guaranteed to teams (GPUs were "
        "lost); without it such a pool is refused with 422",
    )


class NodePoolIn(BaseModel):
    """A pool to add: the nodes labelled ``label_value`` (PORTAL_NODE_POOL_LABEL_KEY)."""

    model_config = ConfigDict(extra="forbid")

    label_value: str = Field(max_length=63, description="the node label's value")
    name: str | None = Field(
        default=None, max_length=63, description="left out: the label value, lowercased"
    )
    gpus: Amount = Field(description="the budget: GPUs teams may be guaranteed in the pool")
    cpu_cores: Amount | None = None
    memory_gb: Amount | None = None
    gpu_type: str | None = Field(default=None, max_length=100)
    price: Amount | None = Field(default=None, description="price a GPU-hour")


class NodePoolChangeIn(BaseModel):
    """What to change of a pool; a field left out keeps its value, an empty price
    removes it."""

    model_config = ConfigDict(extra="forbid")

    gpus: Amount | None = None
    cpu_cores: Amount | None = None
    memory_gb: Amount | None = None
    gpu_type: str | None = Field(default=None, max_length=100)
    price: Amount | Literal[""] | None = None
    below_committed: bool = Field(
        default=False,
        description="confirm a budget below the GPUs already guaranteed there",
    )


class NodesOut(BaseModel):
    nodes: int
    gpus: float
    gpu_product: str
    shard: bool | None = Field(description="a KAI scheduler shard serves it (null: unknown)")


class NodePoolOut(BaseModel):
    id: int
    name: str
    default: bool
    label_value: str = Field(description="empty for the default pool: nodes without the label")
    gpu_type: str
    price: str | None = Field(description="a GPU-hour; null: not set")
    budget: dict[str, str] = Field(description="what teams may be guaranteed, per resource")
    guaranteed_gpus: str
    cluster: NodesOut | None = Field(description="what the nodes hold; null: none found")
    no_nodes: bool
    over_cluster: bool


class GpuShareOut(BaseModel):
    guaranteed: float
    limit: float
    allocated: float | None
    requested: float | None
    borrowed: float
    pool: float
    fair_now: float | None = Field(default=None, description="KAI's fair share right now.")
    usable_now: float | None = Field(
        default=None, description="What of the fair share the team can use (limit, demand)."
    )
    if_all_busy: float | None = Field(
        default=None,
        description="Its share if every team of the org were busy and the rest of the "
        "cluster idle (idle GPUs beyond the pool lent).",
    )
    within_pool: float | None = Field(
        default=None,
        description="Its share if every team of the org were busy and the rest of the "
        "cluster too: the pool's GPUs alone divided, what KAI reclaims for it.",
    )
    idle_in_cluster: float | None = Field(
        default=None,
        description="GPUs of the cluster no queue holds or asks for now (null: unknown).",
    )
    fair_without_history: float | None = Field(
        default=None,
        description="KAI's time-based fairshare: the fair share now without the team's "
        "past usage, where that usage moved it (else null).",
    )
    usage_error: str | None = Field(
        default=None,
        description="Why usage or a figure's inputs could not be read (the page shows the "
        "same), else null.",
    )


class StepOut(BaseModel):
    step: str
    status: str
    message: str
    updated_at: datetime


class SleepOut(BaseModel):
    state: str = Field(description="awake, falling_asleep, asleep or waking")
    asleep_since: datetime | None
    reason: str = Field(description="Why it sleeps or wakes, in people's words")
    asked_at: datetime | None = Field(description="When the last sleep or wake was asked")
    awake_until: datetime | None = Field(description="A lead's keep-awake: not asleep before")
    sleep_after_hours: int | None = Field(
        description="The team's own idle hours before sleep (null: the org's policy)"
    )


class SleepIn(BaseModel):
    model_config = ConfigDict(extra="forbid")

    awake_until: datetime | None = Field(
        default=None, description="Keep the cluster awake until then (null: no longer)"
    )
    sleep_after_hours: int | None = Field(
        default=None,
        description="Idle hours before sleep, within the org's bounds (null: the org's)",
    )


class SleepPolicyIn(BaseModel):
    model_config = ConfigDict(extra="forbid")

    sleep_after_hours: int | None = Field(
        description="Idle hours before a team's cluster sleeps (null: nothing sleeps by policy)"
    )
    sleep_max_hours: int = Field(default=168, description="The most idle hours a team may choose")
    sleep_quiet_hours: str = Field(
        default="",
        max_length=200,
        description="Daily windows when an idle cluster sleeps after an hour: 22:00-07:00, "
        "several separated by commas (empty: none)",
    )
    sleep_weekends: bool = Field(default=False, description="Saturdays and Sundays are quiet")
    sleep_time_zone: str = Field(
        default="UTC", max_length=64, description="The quiet hours' time zone (tz database name)"
    )


class SleepPolicyOut(BaseModel):
    sleep_after_hours: int | None
    sleep_max_hours: int
    sleep_quiet_hours: str
    sleep_weekends: bool
    sleep_time_zone: str


class TeamOut(BaseModel):
    id: int
    name: str
    status: str
    purpose: str
    queue: str
    namespace: str
    vcluster: str
    quota: QuotaOut
    last_error: str | None
    attempts: int
    next_attempt_at: datetime | None
    created_at: datetime
    ready_at: datetime | None
    gpu_share: GpuShareOut | None = None
    steps: list[StepOut] | None = None
    template: TemplateRefOut | None = None
    sleep: SleepOut | None = None


class DecisionOut(BaseModel):
    outcome: str
    reason: str
    decided_at: datetime
    changes: dict[str, Any]
    approved: QuotaOut | None
    template: TemplateRefOut | None = None


class RequestOut(BaseModel):
    id: int
    team_id: int
    team: str
    kind: str
    status: str
    purpose: str
    created_at: datetime
    requested_by: str | None = Field(
        description="The email of who asked (null: made by the portal itself, or the "
        "person was removed)"
    )
    requested: QuotaOut
    template: TemplateRefOut | None = None
    decision: DecisionOut | None = None


class PoolOut(BaseModel):
    name: str
    parent_queue: str
    gpus: str
    cpu_cores: str
    memory_gb: str
    committed_gpus: str
    free_gpus: str


class AuditEventOut(BaseModel):
    id: int
    at: datetime
    actor: str
    action: str
    team_id: int | None
    summary: str
    details: dict[str, Any]


class ProblemOut(BaseModel):
    detail: str
    errors: dict[str, str] | None = None


class MemberIn(BaseModel):
    model_config = ConfigDict(extra="forbid")

    email: str = Field(
        max_length=EMAIL_MAX, description="Their e-mail address at the identity provider."
    )
    role: Literal["lead", "member"] = Field(default="member", description="`lead` or `member`.")


class MemberOut(BaseModel):
    user_id: int
    email: str
    name: str
    role: str
    source: str = Field(description="`portal` (added here) or `groups` (from the provider).")


class MeOut(BaseModel):
    email: str
    name: str
    admin: bool
    lead_of: list[int]
    member_of: list[int]


PROBLEMS: dict[int | str, dict[str, object]] = {
    400: {"model": ProblemOut, "description": "Malformed request (e.g. a bad Host header)"},
    401: {"model": ProblemOut, "description": "Not signed in"},
    403: {"model": ProblemOut, "description": "Not allowed, or CSRF token missing"},
    404: {"model": ProblemOut, "description": "No such object (or not yours)"},
    405: {
        "model": ProblemOut,
        "description": "Method not allowed (OPTIONS included): the Allow header lists the "
        "methods of the path",
    },
    409: {"model": ProblemOut, "description": "Conflicts with the current state"},
    413: {
        "model": ProblemOut,
        "description": "The body is larger than this kind of request takes: `detail` says "
        "the limit",
    },
    422: {"model": ProblemOut, "description": "Invalid input: `errors` says what to change"},
    429: {
        "model": ProblemOut,
        "description": "A per-person bound is reached (live kubeconfigs): `detail` says what "
        "frees one",
    },
    502: {"model": ProblemOut, "description": "The identity provider or the cluster failed"},
}


class UsagePointOut(BaseModel):
    at: datetime
    allocated: float
    requested: float
    quota: float


class ShowbackOut(BaseModel):
    team: str
    month: str
    guaranteed_gpu_hours: float
    borrowed_gpu_hours: float
    pool: str = Field(description="the node pool the hours were used in")
    gpu_type: str = Field(description="the pool's GPU type, as people read it")
    price_per_gpu_hour: str | None = Field(description="the pool's price today (none: not set)")
    cost: str | None = Field(description="the hours at that price (none: no price set)")
    budget_gpu_hours: str | None = Field(
        default=None, description="the team's GPU-hour budget there that month (none: none set)"
    )
    budget_used_percent: float | None = Field(
        default=None, description="the share of that budget used"
    )


class TokenIn(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: str = Field(
        min_length=1,
        max_length=TOKEN_NAME_MAX,
        description="What the token is for, e.g. ci-pipeline.",
    )
    days: int = Field(
        default=30,
        ge=1,
        le=3650,
        strict=True,
        description="Lifetime in days (at most the portal's limit).",
    )


class TokenOut(BaseModel):
    id: int
    name: str
    prefix: str
    created_at: datetime
    expires_at: datetime
    last_used_at: datetime | None
    revoked: bool


class NewTokenOut(TokenOut):
    token: str = Field(description="The secret: shown this once, never again.")


class TeamImpactOut(BaseModel):
    team_id: int
    team: str
    subject: bool = Field(description="The team the decision is about.")
    guarantee_before: float
    guarantee_after: float
    if_all_busy_before: float | None = Field(
        description="Its share if every team were busy and the rest of the cluster idle."
    )
    if_all_busy_after: float | None
    within_pool_before: float | None = Field(
        default=None,
        description="Its share if every team were busy and the rest of the cluster too "
        "(the pool's GPUs alone).",
    )
    within_pool_after: float | None = None
    fair_now_before: float | None = Field(description="KAI's fair share with today's demand.")
    fair_now_after: float | None


class ImpactOut(BaseModel):
    pool_before: float
    pool_after: float
    teams: list[TeamImpactOut] = Field(description="Every team of the org, in team order.")


class HolderOut(BaseModel):
    user_id: int
    email: str
    portal_role: str
    cluster_role: str
    expires_at: datetime


class TemplateAcceptIn(BaseModel):
    model_config = ConfigDict(extra="forbid")

    parameters: dict[str, str] = Field(
        default_factory=dict,
        max_length=50,
        description=(
            "Values for what the newest version adds or no longer allows, by parameter "
            "name; the team's other values carry over."
        ),
    )


class RevokeIn(BaseModel):
    everyone: bool = Field(
        default=False,
        strict=True,
        description="Everyone's kubeconfigs (leads and admins) instead of yours.",
    )


class RevokedOut(BaseModel):
    people: int = Field(description="How many people's kubeconfigs were revoked.")


class NotificationOut(BaseModel):
    id: int
    event: str
    title: str
    link: str
    team_id: int | None
    created_at: datetime
    read: bool


class NotificationsOut(BaseModel):
    unread: int
    items: list[NotificationOut]


class ReadOut(BaseModel):
    marked: int = Field(description="How many notifications were unread.")


class SuggestionOut(BaseModel):
    team_id: int
    team: str
    pool: str = Field(description="the node pool the guarantee is in")
    direction: str = Field(description="lower (idle guarantee) or raise (work waited)")
    days: int
    guarantee_gpu: float
    average_gpu: float = Field(description="GPUs in use on average over the period")
    p95_gpu: float = Field(description="p95 of GPUs in use")
    demand_p95_gpu: float = Field(description="p95 of GPUs requested by the team's pods")
    waiting_share: float = Field(description="share of the period in which work waited")
    suggested_gpu: float
    computed_at: datetime


class RightsizingOut(BaseModel):
    idle_gpu: float = Field(description="guaranteed-but-idle GPUs: what lowering would free")
    wanted_gpu: float = Field(description="GPUs the starved teams' suggestions add")
    suggestions: list[SuggestionOut]


class GrantIn(BaseModel):
    """A temporary grant as a lead asks for it: GPU amounts as strings of at most two
    decimals ("2", "0.5"), moments in ISO 8601 (UTC unless an offset is given)."""

    model_config = ConfigDict(extra="forbid")

    gpus: str = Field(description="GPUs added to the guarantee, such as 2")
    limit: str = Field(default="", description="GPUs added to the limit (empty: as many)")
    pool: str = Field(default="", description="A node pool's name (empty: the default pool)")
    starts_at: str = Field(default="", description="From (empty: now)")
    ends_at: str = Field(description="Until, such as 2026-12-11T18:00:00Z")
    reason: str = Field(description="What it is for")


class GrantDecisionIn(BaseModel):
    model_config = ConfigDict(extra="forbid")

    reason: str = Field(default="", description="Why it is rejected (required to reject)")


class GrantOut(BaseModel):
    id: int
    team_id: int
    pool: str = Field(description="The node pool's name (empty: the default pool)")
    gpus: str = Field(description="GPUs added to the guarantee")
    limit: str = Field(description="GPUs added to the limit")
    starts_at: datetime
    ends_at: datetime = Field(description="The window's end, or an earlier end by hand")
    reason: str
    status: str = Field(description="submitted, approved, rejected or withdrawn")
    state: str = Field(
        description="waiting, to come, running, ended or not granted (rejected, withdrawn)"
    )
    decision_reason: str = ""


class BudgetIn(BaseModel):
    model_config = ConfigDict(extra="forbid")

    gpu_hours: str = Field(description="GPU-hours for the month, such as 500")
    month: str = Field(default="", description="YYYY-MM (empty: this month, UTC)")
    pool: str = Field(default="", description="A node pool's name (empty: the default pool)")
    at_limit: str = Field(
        default="alert",
        description="What happens once spent: alert, or stop_borrowing (the limit lowered "
        "to the guarantee until the month ends)",
    )


class BudgetOut(BaseModel):
    team_id: int
    pool: str
    month: str
    gpu_hours: str
    used_gpu_hours: float = Field(description="What KAI allocated this month, summed")
    percent: float
    reaches_100_at: datetime | None = Field(description="At this month's rate (null: not)")
    at_limit: str
    borrowing_stopped: bool


class QueueFiguresOut(BaseModel):
    """A queue's GPU figures as KAI wrote them with its decision (null: not written;
    "unlimited" where it has no limit)."""

    queue: str = Field(description="KAI's queue (the team's, or its org's parent queue)")
    guarantee: str | None = Field(description="What KAI holds for it (deserved)")
    allocated: str | None
    allocated_non_preemptible: str | None
    limit: str | None
    asked: str | None = Field(description="The workload's own request")


class WaitReasonOut(BaseModel):
    kai_reason: str = Field(
        description="KAI's reason (OverLimit, NonPreemptibleOverQuota, ...); empty where it "
        "wrote only a message, or nothing"
    )
    said: str = Field(description="The reason in the team's words")
    remedy: str = Field(description="What would let it start")
    message: str = Field(description="KAI's own message")
    node_pool: str = Field(description="KAI's node pool of the verdict")
    figures: QueueFiguresOut | None


class WorkloadOut(BaseModel):
    namespace: str = Field(description="Inside the team's vCluster")
    name: str
    pool: str = Field(description="The node pool's name (empty: the default pool)")
    queue: str
    gpus: str
    state: str = Field(description="running or waiting")
    since: datetime = Field(description="Running since, or waiting since KAI's verdict")
    preemptible: bool
    reasons: list[WaitReasonOut] = Field(description="Why it waits (empty while it runs)")


class WorkloadEventOut(BaseModel):
    id: int
    team_id: int
    team: str
    kind: str = Field(description="evicted, or waited (a long wait)")
    at: datetime = Field(description="When KAI evicted it, or since when it waited")
    workload: str = Field(description="namespace/name inside the vCluster (empty: not known)")
    pool: str = Field(description="The node pool's name (empty: the default pool)")
    action: str = Field(description="KAI's action (reclaim, preempt, consolidation) or reason")
    pods: int = Field(description="Pods evicted together")
    gpus: str | None
    by_team: str | None = Field(description="The team whose work the GPUs went to")
    lost_gpu_hours: str | None = Field(description="Its GPUs times how long it had run")
    said: str = Field(description="What happened, in people's words")
    why: str = Field(description="The shares that made KAI choose it, where KAI wrote them")


class ReclaimPairOut(BaseModel):
    by_team: str = Field(description="The team that got the GPUs ('' where KAI named none)")
    from_team: str
    evictions: int
    gpus: str = Field(description="GPUs evicted, where known")
