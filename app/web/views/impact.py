"""What a decision would do, as the review cards, the pool-change preview and the
what-if page show it."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace

from sqlalchemy.orm import Session

from app.core.errors import InvalidInput
from app.core.models import (
    ClusterRequest,
    Org,
    RequestKind,
    Team,
    TeamStatus,
)
from app.core.quantities import format_hundredths, parse_hundredths
from app.reads.org import org_rows_and_shares
from app.teams import repository as team_repo
from app.teams import service as team_service
from app.teams.rules import QuotaValues, parse_quota
from app.usage.explain import Level, explain
from app.usage.fairshare import Trace
from app.usage.impact import Impact, TeamImpact, impact
from app.usage.service import TeamQuota, UsageCache, display_name_of
from app.usage.what_if import what_if as usage_what_if


def quota_row(team: Team, values: QuotaValues) -> TeamQuota:
    """A team's quota as fair share sees it, with the values of a request or a what-if."""
    return TeamQuota(
        id=team.id,
        name=team.name,
        gpu_quota_centi=values.gpu_quota_centi,
        gpu_limit_centi=values.gpu_limit_centi,
        weight_centi=values.weight_centi,
        priority=values.priority,
        created=int(team.created_at.timestamp()),
        ready=team.status == TeamStatus.READY,
    )


def org_impact(
    session: Session,
    usage: UsageCache,
    org: Org,
    *,
    changes: dict[int, TeamQuota] | None = None,
    new_pool_centi: int | None = None,
    trace: Trace | None = None,
    busy_trace: Trace | None = None,
) -> Impact:
    """Every team's share now and after the changes, over the whole org. "Now" comes from
    the gauges' cache (one computation per usage read), unless KAI's own figures from
    Prometheus replace the computed ones there: then both sides are computed alike."""
    rows, shares = org_rows_and_shares(session, usage, org)
    return impact(
        rows,
        usage.get([row.queue_name for row in rows]),
        pool_centi=org.gpus_centi,
        parent=org.parent_queue,
        new_pool_centi=new_pool_centi,
        changes=changes,
        before=shares if usage.fair_override is None else None,
        model=usage.model,
        trace=trace,
        busy_trace=busy_trace,
    )


def request_impact(
    session: Session,
    usage: UsageCache,
    org: Org,
    request: ClusterRequest,
    values: QuotaValues | None = None,
    *,
    trace: Trace | None = None,
    busy_trace: Trace | None = None,
) -> Impact:
    """What approving ``request`` with ``values`` (as asked, unless given) would do to
    every team; ``trace``/``busy_trace`` record the divisions after it."""
    row = quota_row(request.team, values or team_service.values_of(request))
    return org_impact(
        session, usage, org, changes={row.id: row}, trace=trace, busy_trace=busy_trace
    )


def own_impact(
    session: Session, usage: UsageCache, org: Org, team: Team, values: QuotaValues
) -> TeamImpact | None:
    """The team's own figures before and after a change of its quota (what its lead may
    see: no other team's numbers)."""
    row = quota_row(team, values)
    imp = org_impact(session, usage, org, changes={row.id: row})
    return next((t for t in imp.teams if t.team_id == team.id), None)


@dataclass(frozen=True)
class Review:
    """What a review card shows of a decision: the values it previews (as asked, the
    largest guarantee that fits, or what the admin typed) and their effect."""

    request: ClusterRequest
    asked: dict[str, str]
    current: dict[str, str] | None
    shown: dict[str, str]  # the previewed values, as the form shows them
    after_centi: int  # the pool's guarantees with the asked guarantee
    free_centi: int  # the largest guarantee that fits
    org_centi: int  # the pool
    impact: Impact | None  # None while a typed value is invalid
    trimmed: bool = False  # the asked guarantee does not fit: the largest that does
    typed: bool = False  # the values are what the admin typed ("approve with changes")
    asked_fits: bool = True  # the asked guarantee fits the pool
    errors: Mapping[str, str] = field(default_factory=dict)  # typed values: field -> fix

    @property
    def fits(self) -> bool:
        return self.after_centi <= self.org_centi


def review(
    session: Session,
    usage: UsageCache,
    org: Org,
    request: ClusterRequest,
    typed: Mapping[str, str] | None = None,
    *,
    trace: Trace | None = None,
    busy_trace: Trace | None = None,
) -> Review:
    """A review card's preview: ``typed`` (the "approve with changes" fields) when given,
    else the asked values, or the largest guarantee that fits when they do not."""
    others = team_repo.committed_gpu_centi(session, org.id, exclude_team_id=request.team_id)
    free = max(0, org.gpus_centi - others)
    asked = team_service.values_of(request)
    current = (
        team_service.values_of(request.team).display()
        if request.kind == RequestKind.QUOTA_CHANGE
        else None
    )
    base = Review(
        request=request,
        asked=asked.display(),
        current=current,
        shown=asked.display(),
        after_centi=others + asked.gpu_quota_centi,
        free_centi=free,
        org_centi=org.gpus_centi,
        impact=None,
    )
    base = replace(base, asked_fits=base.fits)
    if typed is not None:
        shown = {key: str(typed.get(key, "")).strip() for key in asked.display()}
        try:
            values = parse_quota(shown, pool=org)
        except InvalidInput as exc:
            return replace(base, shown=shown, after_centi=others, errors=exc.errors, typed=True)
        return replace(
            base,
            shown=values.display(),
            after_centi=others + values.gpu_quota_centi,
            typed=True,
            impact=request_impact(
                session, usage, org, request, values, trace=trace, busy_trace=busy_trace
            ),
        )
    trimmed = not base.asked_fits
    values = (
        replace(asked, gpu_quota_centi=free, gpu_limit_centi=max(asked.gpu_limit_centi, free))
        if trimmed
        else asked
    )
    return replace(
        base,
        shown=values.display(),
        trimmed=trimmed,
        impact=request_impact(
            session, usage, org, request, values, trace=trace, busy_trace=busy_trace
        ),
    )


@dataclass(frozen=True)
class Account:
    """The step-by-step division behind one team's figures after a decision: with
    today's demand (for a team already running) and if every team were busy."""

    team: str
    now: list[Level]
    busy: list[Level]


def account_of(queue: str, team: str, now: Trace, busy: Trace, running: bool) -> Account:
    """The calculator's own steps for ``queue`` (never a second text that could drift)."""
    return Account(
        team=team,
        now=explain(now, queue, name=display_name_of) if running else [],
        busy=explain(busy, queue, name=display_name_of),
    )


def review_account(
    session: Session,
    usage: UsageCache,
    org: Org,
    request: ClusterRequest,
    typed: Mapping[str, str] | None = None,
) -> tuple[Review, Account | None]:
    """A review card's preview with the account of the requesting team's share after it
    (computed only when the admin opens it)."""
    now: Trace = []
    busy: Trace = []
    shown = review(session, usage, org, request, typed, trace=now, busy_trace=busy)
    if shown.impact is None:
        return shown, None
    team = request.team
    running = request.kind == RequestKind.QUOTA_CHANGE and team.status == TeamStatus.READY
    return shown, account_of(team.queue_name, team.name, now, busy, running)


WHAT_IF_FIELDS = (
    ("q", "gpu_quota", "guarantee"),
    ("l", "gpu_limit", "limit"),
    ("w", "over_quota_weight", "weight"),
    ("p", "priority", "priority"),
)


@dataclass
class WhatIfRow:
    team: TeamQuota
    inputs: dict[str, str]  # short field name -> what is in the form
    errors: dict[str, str]
    values: QuotaValues | None  # parsed, when changed and valid
    changed: bool
    # Time-based fairshare: the team's past use (a share of the cluster) to try, and
    # whether it differs from today's (never sent as a request: it is not a quota).
    usage_input: str = ""
    usage_error: str | None = None
    usage_changed: bool = False


@dataclass
class WhatIf:
    pool: str
    pool_error: str | None
    rows: list[WhatIfRow]
    impact: Impact
    usage_known: bool = False  # KAI's past usage per queue is read (time-based fairshare)
    account: Account | None = None  # the division for the team asked about
    account_id: int | None = None

    @property
    def changes(self) -> list[WhatIfRow]:
        return [row for row in self.rows if row.changed and row.values is not None]

    @property
    def errors(self) -> int:
        rows = sum(1 for row in self.rows if row.errors or row.usage_error)
        return rows + (1 if self.pool_error else 0)


def _shown(row: TeamQuota) -> dict[str, str]:
    return {
        "q": format_hundredths(row.gpu_quota_centi),
        "l": format_hundredths(row.gpu_limit_centi),
        "w": format_hundredths(row.weight_centi),
        "p": str(row.priority),
    }


def what_if(
    session: Session,
    usage: UsageCache,
    org: Org,
    form: Mapping[str, str] | None,
    explain_for: int | None = None,
) -> WhatIf:
    """Every live team's quota as the admin typed it (parsed here, at the edge), and every
    team's shares after (``app.usage.what_if``). Only rows whose fields differ from
    today's values are parsed: a keystroke on a page of 1,000 teams costs one parse, and
    one fair-share computation for "after"; ``explain_for``: the team whose division after
    the changes is told step by step (its steps recorded in that same computation)."""
    form = form or {}
    pool_text = form.get("pool", format_hundredths(org.gpus_centi))
    pool_error: str | None = None
    try:
        pool_centi = parse_hundredths(pool_text, what="the pool")
    except ValueError as exc:
        pool_error, pool_centi = str(exc), org.gpus_centi
    scenario = Org(
        name=org.name,
        parent_queue=org.parent_queue,
        gpus_centi=pool_centi,
        cpu_millicores=0,  # CPU and memory are not edited here
        memory_mb=0,
    )
    quota_rows, shares = org_rows_and_shares(session, usage, org)
    keys = {short: key for short, key, _ in WHAT_IF_FIELDS}
    rows: list[WhatIfRow] = []
    changes: dict[int, QuotaValues] = {}
    model = usage.model
    tried: dict[str, float] = {}  # queue -> past use to try
    tried_ids: set[int] = set()
    for row in quota_rows:
        shown = _shown(row)
        inputs = {short: form.get(f"{short}_{row.id}", shown[short]).strip() for short in keys}
        today_use = f"{model.usage.get(row.queue_name, 0.0):.2f}"
        use_input = form.get(f"u_{row.id}", today_use).strip()
        use_error: str | None = None
        if use_input != today_use:
            try:
                use = float(use_input)
                if not 0 <= use <= 1:
                    raise ValueError
                tried[row.queue_name] = use
                tried_ids.add(row.id)
            except ValueError:
                use_error = "past use is a share of the cluster from 0 to 1, e.g. 0.25"
        use_changed = row.id in tried_ids
        if inputs == shown and pool_centi >= row.gpu_limit_centi:
            rows.append(WhatIfRow(row, inputs, {}, None, False, use_input, use_error, use_changed))
            continue
        errors: dict[str, str] = {}
        values: QuotaValues | None = None
        try:
            values = parse_quota({keys[k]: v for k, v in inputs.items()}, pool=scenario)
        except InvalidInput as exc:
            short_of = {key: short for short, key in keys.items()}
            errors = {short_of.get(k, "q"): v for k, v in exc.errors.items()}
        changed = values is not None and inputs != shown
        if values is not None and changed:
            changes[row.id] = values
        rows.append(
            WhatIfRow(row, inputs, errors, values, changed, use_input, use_error, use_changed)
        )
    now: Trace | None = [] if explain_for is not None else None
    busy: Trace | None = [] if explain_for is not None else None
    result = usage_what_if(
        quota_rows,
        usage.get([row.queue_name for row in quota_rows]),
        pool_centi=org.gpus_centi,
        parent=org.parent_queue,
        changes=changes,
        new_pool_centi=pool_centi,
        before=shares if usage.fair_override is None else None,
        model=model,
        after_model=replace(model, usage={**model.usage, **tried}) if tried else None,
        also_changed=tried_ids,
        trace=now,
        busy_trace=busy,
    )
    subject = next((row for row in quota_rows if row.id == explain_for), None)
    account = (
        account_of(subject.queue_name, subject.name, now, busy, subject.ready)
        if subject is not None and now is not None and busy is not None
        else None
    )
    return WhatIf(
        pool=pool_text,
        pool_error=pool_error,
        rows=rows,
        impact=result,
        usage_known=bool(model.usage),
        account=account,
        account_id=subject.id if account is not None and subject is not None else None,
    )
