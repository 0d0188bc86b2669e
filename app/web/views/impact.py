"""What a decision would do, as the review cards, the pool-change preview and the
what-if page show it."""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace

from sqlalchemy.orm import Session

from app.core import quota
from app.core.errors import InvalidInput
from app.core.models import (
    ClusterRequest,
    Org,
    Pool,
    QuotaGrant,
    RequestKind,
    Team,
    TeamStatus,
    utcnow,
)
from app.core.quantities import format_hundredths, parse_hundredths
from app.core.quota import GPU, Quota
from app.core.text import is_number
from app.reads.org import key_rows, org_view, shares_of
from app.teams import grants
from app.teams import repository as team_repo
from app.teams import service as team_service
from app.teams.rules import parse_pool_fields, parse_quota
from app.usage import repository as usage_repo
from app.usage.division import Division
from app.usage.explain import Level, explain
from app.usage.fairshare import Trace
from app.usage.impact import Impact, TeamImpact, impact
from app.usage.model import Model, ShareKey
from app.usage.service import OrgView, TeamQuota, UsageCache, display_name_of
from app.usage.what_if import what_if as usage_what_if


def quota_row(team: Team, values: Quota, pool: str = "") -> TeamQuota:
    """A team's quota as fair share sees it, with the values of a request or a what-if
    (``pool``: another pool's name, the team's queue there)."""
    return TeamQuota(
        id=team.id,
        name=team.name,
        quota_centi=values.gpu.guarantee or 0,
        limit_centi=values.gpu.limit or 0,
        weight_centi=values.weight,
        priority=values.priority,
        created=int(team.created_at.timestamp()),
        ready=team.status == TeamStatus.READY,
        pool=pool,
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
    every_team: bool = False,
) -> Impact:
    """Every team's share now and after the changes, over the whole org, from the ready
    view: "now" is its division (unless KAI's own figures from Prometheus replace the
    computed ones there: then both sides are computed alike), "after" one division with
    the changes patched in. Computed once per decision input and ready view, whoever
    asks (a review card seen by three admins, or again at the next view, costs nothing);
    a traced computation (the step-by-step account) is never taken from the memo."""
    view = org_view(session, usage, org)
    before = view.division if usage.fair_override is None else None
    names = [row.queue_name for row in (changes or {}).values()] if before is not None else None

    def compute() -> Impact:
        readings = usage.get(names if names is not None else [r.queue_name for r in view.rows])
        return impact(
            view.rows,
            readings,
            pool_centi=org.gpus_centi,
            parent=org.parent_queue,
            new_pool_centi=new_pool_centi,
            changes=changes,
            before=before,
            model=usage.model,
            trace=trace,
            busy_trace=busy_trace,
            every_team=every_team,
        )

    if trace is not None or busy_trace is not None:
        return compute()
    key = (
        "impact",
        org.gpus_centi,
        org.parent_queue,
        tuple(sorted((changes or {}).items())),
        new_pool_centi,
        every_team,
        before is not None,
    )
    result = usage.remembered(view, key, compute)
    return result


def request_impact(
    session: Session,
    usage: UsageCache,
    org: Org,
    request: ClusterRequest,
    values: Quota | None = None,
    *,
    trace: Trace | None = None,
    busy_trace: Trace | None = None,
    every_team: bool = False,
) -> Impact:
    """What approving ``request`` with ``values`` (as asked, unless given) would do to
    every team; ``trace``/``busy_trace`` record the divisions after it."""
    row = quota_row(request.team, values or team_service.values_of(request))
    return org_impact(
        session,
        usage,
        org,
        changes={row.id: row},
        trace=trace,
        busy_trace=busy_trace,
        every_team=every_team,
    )


def own_impact(
    session: Session, usage: UsageCache, org: Org, team: Team, values: Quota
) -> TeamImpact | None:
    """The team's own figures before and after a change of its quota (what its lead may
    see: no other team's numbers)."""
    row = quota_row(team, values)
    imp = org_impact(session, usage, org, changes={row.id: row})
    return next((t for t in imp.teams if t.team_id == team.id), None)


@dataclass(frozen=True)
class PoolReview:
    """One other node pool on a review card or a lead's form: the team's quota there
    before (a quota change) and after (as asked, or as typed), the pool's budget beside
    what the other teams are guaranteed there, and every team's share there before and
    after (the pool's own division, KAI's shard's)."""

    pool: Pool
    before: Quota | None
    after: Quota | None  # None: the team holds nothing there after the decision
    budget_centi: int
    others_centi: int
    impact: Impact | None  # None: no team yet (a new cluster's form)

    @property
    def own(self) -> TeamImpact | None:
        """The team's own figures in the pool (what its lead may see)."""
        if self.impact is None:
            return None
        return next((t for t in self.impact.teams if t.is_subject), None)

    @property
    def after_centi(self) -> int:
        return self.others_centi + (self.after.gpu.guarantee or 0 if self.after else 0)

    @property
    def fits(self) -> bool:
        return self.after_centi <= self.budget_centi

    @property
    def free_centi(self) -> int:
        return max(0, self.budget_centi - self.others_centi)


def pool_reviews(
    session: Session,
    usage: UsageCache,
    org: Org,
    request: ClusterRequest,
    after: Mapping[Pool, Quota] | None = None,
) -> list[PoolReview]:
    """Every other pool the request changes (asked for anew, changed, or left), in name
    order; ``after``: the typed values instead of the asked."""
    team = request.team
    # A change is asked in the team's own values: the grants running now stay apart.
    before = grants.base_pools(session, team) if request.kind == RequestKind.QUOTA_CHANGE else {}
    wanted = request.quota_by_pool() if after is None else dict(after)
    return pool_changes(session, usage, org, team, before, wanted)


def pool_changes(
    session: Session,
    usage: UsageCache,
    org: Org,
    team: Team | None,
    before: Mapping[Pool, Quota],
    after: Mapping[Pool, Quota],
) -> list[PoolReview]:
    """Each other pool whose values go from ``before`` to ``after`` for ``team`` (None: a
    team still to be made, nothing to divide yet), in name order; a pool left as it is
    has nothing to show."""
    pools = sorted(
        (pool for pool in {*before, *after} if before.get(pool) != after.get(pool)),
        key=lambda pool: pool.name,
    )
    if not pools:
        return []
    exclude = team.id if team is not None else None
    others = team_repo.committed_by_pool(session, org.id, exclude_team_id=exclude)
    view = org_view(session, usage, org) if team is not None else None
    return [
        PoolReview(
            pool=pool,
            before=before.get(pool),
            after=after.get(pool),
            budget_centi=pool.capacity.get(GPU.key, 0),
            others_centi=others.get(pool.id, 0),
            impact=_pool_impact(session, usage, org, view, team, pool, after.get(pool))
            if team is not None and view is not None
            else None,
        )
        for pool in pools
    ]


def _pool_impact(
    session: Session,
    usage: UsageCache,
    org: Org,
    view: OrgView,
    team: Team,
    pool: Pool,
    after: Quota | None,
) -> Impact:
    """Every team's share in ``pool`` before and after the team holds ``after`` there
    (None: nothing), once per decision input and ready view."""
    key = ShareKey.of_pool(pool)
    row = quota_row(team, after or Quota.of_gpu(0, 0), pool.name)

    def compute() -> Impact:
        rows = usage_repo.get_quota_rows(session, org.id, key)
        readings = usage.get([*(r.queue_name for r in rows), row.queue_name])
        return impact(
            rows,
            readings,
            pool_centi=pool.capacity.get(GPU.key, 0),
            parent=key.parent_queue(org.parent_queue),
            changes={row.id: row},
            model=Model(top=usage.pool_top(key), k_value=usage.model.k_value),
        )

    return usage.remembered(view, ("pool impact", key, row), compute)


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
    pools: tuple[PoolReview, ...] = ()  # the other pools the decision touches

    @property
    def pools_fit(self) -> bool:
        return all(p.fits for p in self.pools)

    def form_values(self) -> dict[str, str]:
        """The "approve with changes" fields: the default pool's and each other pool's
        (``pools.<pool>.<field>``), as previewed."""
        values = dict(self.shown)
        for p in self.pools:
            if p.after is not None:
                shown = p.after.display()
                for name in (GPU.guarantee_field, GPU.limit_field, quota.WEIGHT_FIELD):
                    values[f"pools.{p.pool.name}.{name}"] = shown[name]
        return values

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
    # The guarantees held by the other teams, from the ready view (a decision refreshes
    # it at once; the approval itself checks the database under its lock).
    view = org_view(session, usage, org)
    held = view.by_id.get(request.team_id)
    others = view.committed_centi - (held.quota_centi if held is not None else 0)
    free = max(0, org.gpus_centi - others)
    asked = team_service.values_of(request)
    current = (
        grants.base(session, request.team, org.default_pool).display()
        if request.kind == RequestKind.QUOTA_CHANGE
        else None
    )
    base = Review(
        request=request,
        asked=asked.display(),
        current=current,
        shown=asked.display(),
        after_centi=others + (asked.gpu.guarantee or 0),
        free_centi=free,
        org_centi=org.gpus_centi,
        impact=None,
    )
    base = replace(base, asked_fits=base.fits)

    def impact_of(values: Quota) -> Impact:
        return request_impact(
            session, usage, org, request, values, trace=trace, busy_trace=busy_trace
        )

    if typed is not None:
        typed_review = _typed_review(base, org, typed, others, impact_of)
        after, pool_errors = _typed_pools(session, org, typed)
        return replace(
            typed_review,
            errors={**typed_review.errors, **pool_errors},
            pools=tuple(pool_reviews(session, usage, org, request, after)),
        )
    base = replace(base, pools=tuple(pool_reviews(session, usage, org, request)))
    trimmed = not base.asked_fits
    values = (
        asked.replace("gpu", guarantee=free, limit=max(asked.gpu.limit or 0, free))
        if trimmed
        else asked
    )
    return replace(base, shown=values.display(), trimmed=trimmed, impact=impact_of(values))


def _typed_pools(
    session: Session, org: Org, typed: Mapping[str, str]
) -> tuple[dict[Pool, Quota] | None, dict[str, str]]:
    """The other pools' values the admin typed (None: the form has no pool fields, the
    asked stand), each checked against its pool's budget; and what is wrong with them."""
    try:
        values = parse_pool_fields(typed)
    except InvalidInput as exc:
        return None, dict(exc.errors)
    if values is None:
        return None, {}
    return team_service.resolve_pools(session, org, values)


def _typed_review(
    base: Review,
    org: Org,
    typed: Mapping[str, str],
    others: int,
    impact_of: Callable[[Quota], Impact],
) -> Review:
    """The card as the admin types "approve with changes": the values checked against
    the pool, or what is wrong with them (and no preview)."""
    shown = {key: str(typed.get(key, "")).strip() for key in base.asked}
    try:
        values = parse_quota(shown, pool=org)
    except InvalidInput as exc:
        return replace(base, shown=shown, after_centi=others, errors=exc.errors, typed=True)
    return replace(
        base,
        shown=values.display(),
        after_centi=others + (values.gpu.guarantee or 0),
        typed=True,
        impact=impact_of(values),
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
    values: Quota | None  # parsed, when changed and valid
    changed: bool
    # Time-based fairshare: the team's past use (a share of the cluster) to try, and
    # whether it differs from today's (never sent as a request: it is not a quota).
    usage_input: str = ""
    usage_error: str | None = None
    usage_changed: bool = False
    today: dict[str, str] = field(default_factory=dict)  # today's values, as the form shows them
    today_use: str = ""


@dataclass
class WhatIf:
    pool: str
    pool_error: str | None
    rows: list[WhatIfRow]  # the rows shown: the changed ones first, then the page's
    impact: Impact
    usage_known: bool = False  # KAI's past usage per queue is read (time-based fairshare)
    account: Account | None = None  # the division for the team asked about
    account_id: int | None = None
    find: str = ""  # the name searched for
    page: int = 1
    pages: int = 1
    matching: int = 0  # teams whose name matches ``find``
    teams: int = 0  # teams in the org (in the pool tried)
    in_pool: str = ""  # the other node pool tried ("": the default pool)
    pools: tuple[str, ...] = ()  # the org's other node pools, to try instead
    pool_label: str = "GPUs in the pool"

    @property
    def changes(self) -> list[WhatIfRow]:
        return [row for row in self.rows if row.changed and row.values is not None]

    @property
    def errors(self) -> int:
        rows = sum(1 for row in self.rows if row.errors or row.usage_error)
        return rows + (1 if self.pool_error else 0)


WHAT_IF_PAGE = 50
_FIELD = re.compile(r"^([qlwpu])_([0-9]{1,12})$")


def _shown(row: TeamQuota) -> dict[str, str]:
    return {
        "q": format_hundredths(row.quota_centi),
        "l": format_hundredths(row.limit_centi),
        "w": format_hundredths(row.weight_centi),
        "p": str(row.priority),
    }


def _page_number(form: Mapping[str, str]) -> int:
    value = str(form.get("page", "1"))
    return int(value) if is_number(value) and len(value) < 7 else 1


@dataclass(frozen=True)
class _Scope:
    """What a what-if divides: the default pool (the ready view) or another node pool
    (its own division, through its shard's top level), with the same rules."""

    name: str  # "": the default pool
    rows: list[TeamQuota]
    by_id: Mapping[int, TeamQuota]
    division: Division | None  # today's, already computed
    pool_centi: int  # the pool's GPUs (the default) or budget (another pool)
    parent: str
    model: Model


def _scope(
    session: Session, usage: UsageCache, org: Org, view: OrgView, form: Mapping[str, str]
) -> tuple[_Scope, tuple[str, ...]]:
    """The pool the what-if tries (``in_pool``: another pool's name; unknown or empty:
    the default pool) and the names of the org's other pools."""
    pools = {pool.name: pool for pool in usage_repo.other_pools(session, org.id)}
    others = tuple(pools)
    wanted = str(form.get("in_pool", "")).strip()
    if wanted not in pools:
        fair = usage.fair_override is None
        default = _Scope(
            "",
            view.rows,
            view.by_id,
            view.division if fair else None,
            org.gpus_centi,
            org.parent_queue,
            usage.model,
        )
        return default, others
    pool = pools[wanted]
    key = ShareKey.of_pool(pool)
    rows = key_rows(session, usage, org, key, view)
    shares = shares_of(session, usage, org, key, view)
    scope = _Scope(
        wanted,
        rows,
        {row.id: row for row in rows},
        shares.division,
        pool.capacity.get(GPU.key, 0),
        key.parent_queue(org.parent_queue),
        Model(top=usage.pool_top(key), k_value=usage.model.k_value),
    )
    return scope, others


def _tried_pool(form: Mapping[str, str], scope: _Scope) -> tuple[str, str | None, int]:
    """The pool the admin tries (as typed, what is wrong with it, in hundredths)."""
    pool_text = str(form.get("pool", format_hundredths(scope.pool_centi)))
    try:
        return pool_text, None, parse_hundredths(pool_text, what="the pool")
    except ValueError as exc:
        return pool_text, str(exc), scope.pool_centi


def _window(
    rows: list[TeamQuota], form: Mapping[str, str]
) -> tuple[str, int, int, int, list[TeamQuota]]:
    """The page of teams whose name matches ``find``: (find, how many match, the page,
    how many pages, its rows)."""
    find = str(form.get("find", "")).strip()[:100]
    matching = [row for row in rows if find.lower() in row.name.lower()] if find else rows
    count = len(matching)
    pages = max(1, -(-count // WHAT_IF_PAGE))
    page = min(_page_number(form), pages)
    return find, count, page, pages, matching[(page - 1) * WHAT_IF_PAGE : page * WHAT_IF_PAGE]


class _Judge:
    """One what-if's rows as the admin typed them: their values parsed at the edge (the
    GPU pool tried as the pool), the changed ones and the past use tried collected."""

    def __init__(self, form: Mapping[str, str], model: Model, pool_centi: int) -> None:
        self.form, self.model, self.pool_centi = form, model, pool_centi
        self.keys = {short: key for short, key, _ in WHAT_IF_FIELDS}
        self.tried: dict[str, float] = {}  # queue -> past use to try
        self.tried_ids: set[int] = set()
        self.changes: dict[int, Quota] = {}

    def row(self, row: TeamQuota) -> WhatIfRow:
        shown = _shown(row)
        inputs = {s: str(self.form.get(f"{s}_{row.id}", shown[s])).strip() for s in self.keys}
        today_use = f"{self.model.usage.get(row.queue_name, 0.0):.2f}"
        use_input = str(self.form.get(f"u_{row.id}", today_use)).strip()
        use_error = self._use(row, use_input) if use_input != today_use else None
        use_changed = row.id in self.tried_ids
        if inputs == shown and self.pool_centi >= row.limit_centi:
            return WhatIfRow(
                row, inputs, {}, None, False, use_input, use_error, use_changed, shown, today_use
            )
        errors: dict[str, str] = {}
        values: Quota | None = None
        try:
            typed = {self.keys[k]: v for k, v in inputs.items()}
            values = quota.parse(typed, capacity={GPU.key: self.pool_centi})
        except InvalidInput as exc:
            short_of = {key: short for short, key in self.keys.items()}
            errors = {short_of.get(k, "q"): v for k, v in exc.errors.items()}
        changed = values is not None and inputs != shown
        if values is not None and changed:
            self.changes[row.id] = values
        return WhatIfRow(
            row,
            inputs,
            errors,
            values,
            changed,
            use_input,
            use_error,
            use_changed,
            shown,
            today_use,
        )

    def _use(self, row: TeamQuota, typed: str) -> str | None:
        """A past use tried for ``row`` (kept), or what is wrong with it."""
        try:
            use = float(typed)
            if not 0 <= use <= 1:
                raise ValueError
        except ValueError:
            return "past use is a share of the cluster from 0 to 1, e.g. 0.25"
        self.tried[row.queue_name] = use
        self.tried_ids.add(row.id)
        return None


def _impact_after(
    usage: UsageCache,
    view: OrgView,
    scope: _Scope,
    judge: _Judge,
    pool_centi: int,
    now: Trace | None,
    busy: Trace | None,
) -> Impact:
    """Every team's shares today and after the judged changes and the pool tried."""
    model, tried = scope.model, judge.tried
    after_model = replace(model, usage={**model.usage, **tried}) if tried else None
    before = scope.division

    def compute() -> Impact:
        return usage_what_if(
            scope.rows,
            # Readings: in the ready division already, unless both sides are computed here.
            usage.get([] if before is not None else [row.queue_name for row in scope.rows]),
            pool_centi=scope.pool_centi,
            parent=scope.parent,
            changes=judge.changes,
            new_pool_centi=pool_centi,
            before=before,
            model=model,
            after_model=after_model,
            also_changed=judge.tried_ids,
            trace=now,
            busy_trace=busy,
            fill=WHAT_IF_PAGE,
            by_id=scope.by_id,
        )

    # Nothing changed (every admin's first view of the page, or values typed back to
    # today's): once per ready view, as a review card's impact. A typed change is
    # computed each time: the memo would otherwise hold one result per keystroke.
    unchanged = not judge.changes and not tried and pool_centi == scope.pool_centi
    if unchanged and now is None:
        key = ("what-if, unchanged", scope.name, scope.pool_centi, scope.parent, before is not None)
        return usage.remembered(view, key, compute)
    return compute()


def what_if(
    session: Session,
    usage: UsageCache,
    org: Org,
    form: Mapping[str, str] | None,
    explain_for: int | None = None,
) -> WhatIf:
    """The teams the admin changed (parsed here, at the edge) and every team's shares
    after them (``app.usage.what_if``), from the ready view. Only the teams named in the
    form are read (a browser sends the fields that differ from today's; without
    JavaScript, the page's fields): a keystroke at 10,000 teams costs its own rows'
    parse and one division after the changes, never a form of every team. The rows
    shown are the changed ones, then a page of the teams whose name matches ``find``.
    ``explain_for``: the team whose division after the changes is told step by step."""
    form = form or {}
    view = org_view(session, usage, org)
    scope, others = _scope(session, usage, org, view, form)
    pool_text, pool_error, pool_centi = _tried_pool(form, scope)
    by_id = scope.by_id
    model = scope.model
    named = {int(m[2]) for k in form if (m := _FIELD.match(k)) is not None}
    # A smaller pool may leave a team's limit above it: those rows are judged too.
    if pool_centi < scope.pool_centi:
        named |= {row.id for row in scope.rows if row.limit_centi > pool_centi}
    judge = _Judge(form, model, pool_centi)
    judged = [judge.row(by_id[i]) for i in sorted(named) if i in by_id]
    first = [r for r in judged if r.changed or r.errors or r.usage_error or r.usage_changed]
    find, count, page, pages, window = _window(scope.rows, form)
    on_top = {r.team.id for r in first}
    rows = first + [judge.row(row) for row in window if row.id not in on_top]
    now: Trace | None = [] if explain_for is not None else None
    busy: Trace | None = [] if explain_for is not None else None
    result = _impact_after(usage, view, scope, judge, pool_centi, now, busy)
    subject = by_id.get(explain_for) if explain_for is not None else None
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
        find=find,
        page=page,
        pages=pages,
        matching=count,
        teams=len(scope.rows),
        in_pool=scope.name,
        pools=others,
        pool_label=f"GPUs to guarantee in pool {scope.name}" if scope.name else "GPUs in the pool",
    )


@dataclass(frozen=True)
class GrantReview:
    """A waiting temporary grant on the Requests page: its fit over its window, and what
    it does to every team's share while it runs (with today's other quotas)."""

    grant: QuotaGrant
    team: str
    fit: grants.Fit
    impact: Impact | None  # the default pool's; None for a grant in another pool


def grant_reviews(session: Session, usage: UsageCache, org: Org) -> list[GrantReview]:
    now = utcnow()
    found = []
    for grant in grants.waiting(session):
        team = team_repo.get_team(session, grant.team_id)
        impact = None
        if grant.pool.is_default:
            raised = grants.with_grants(team.quota, (grant.gpu_centi, grant.limit_centi))
            row = quota_row(team, raised)
            impact = org_impact(session, usage, org, changes={row.id: row})
        fit = grants.window_fit(session, org, grant.pool, grant, now)
        found.append(GrantReview(grant, team.name, fit, impact))
    return found
