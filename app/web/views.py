"""What the pages and the API show, built from the domains' repositories and services;
no rule is decided here."""

from __future__ import annotations

import functools
import hashlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from sqlalchemy import ScalarSelect
from sqlalchemy.orm import Session

from app.access import service as access
from app.audit import repository as audit
from app.audit.events import Event
from app.core.config import Settings
from app.core.errors import InvalidInput
from app.core.models import (
    ApiToken,
    AuditEvent,
    ClusterRequest,
    Decision,
    Org,
    ProvisioningStep,
    RequestKind,
    RequestStatus,
    RightsizingSuggestion,
    Team,
    TeamMember,
    TeamStatus,
    User,
)
from app.core.quantities import format_hundredths, gpus, parse_hundredths
from app.provisioning import repository as provisioning
from app.provisioning.repository import RolloutProgress
from app.teams import members as team_members
from app.teams import repository as repo
from app.teams import service as team_service
from app.teams.repository import TeamRow
from app.teams.rules import QuotaValues, parse_quota
from app.usage import repository as usage_repo
from app.usage import rightsizing
from app.usage.impact import Impact, impact
from app.usage.service import GpuShare, OrgView, TeamQuota, UsageCache, share_of
from app.web.schemas import (
    AuditEventOut,
    DecisionOut,
    GpuShareOut,
    ImpactOut,
    MemberOut,
    QuotaOut,
    RequestOut,
    StepOut,
    TeamImpactOut,
    TeamOut,
    TokenOut,
)

STEP_LABELS = {
    "queue": "KAI queue",
    "namespace": "Host namespace",
    "vcluster": "vCluster",
    "admission_policy": "Queue pinning policy",
    "kubeconfig": "Kubeconfig",
}
ACTIVITY_SHOWN = 20


@dataclass
class TeamCard:
    team: Team | TeamRow
    share: GpuShare


@dataclass
class PoolSummary:
    org: Org
    committed_centi: int
    allocated: float | None
    live_teams: int

    @property
    def free_centi(self) -> int:
        return max(0, self.org.gpus_centi - self.committed_centi)

    @property
    def committed_pct(self) -> float:
        return 100 * self.committed_centi / self.org.gpus_centi if self.org.gpus_centi else 0.0

    @property
    def idle(self) -> float | None:
        if self.allocated is None:
            return None
        return max(0.0, gpus(self.org.gpus_centi) - self.allocated)


def org_rows_and_shares(
    session: Session, usage: UsageCache, org: Org
) -> tuple[list[TeamQuota], dict[int, GpuShare]]:
    view = org_view(session, usage, org)
    return view.rows, view.shares


def cards(
    session: Session, teams: Sequence[Team | TeamRow], usage: UsageCache, org: Org
) -> list[TeamCard]:
    return cards_from(session, teams, org_view(session, usage, org), org)


def cards_from(
    session: Session, teams: Sequence[Team | TeamRow], view: OrgView, org: Org
) -> list[TeamCard]:
    """Cards for the shown teams only, with shares from the ready org view."""
    asked = asked_shares(
        session, [t.id for t in teams if t.status == TeamStatus.SUBMITTED], org.gpus_centi
    )
    return [
        TeamCard(t, view.shares.get(t.id) or asked.get(t.id) or share_of(t, None, org.gpus_centi))
        for t in teams
    ]


def asked_shares(session: Session, team_ids: list[int], pool_centi: int) -> dict[int, GpuShare]:
    """A team waiting for approval shows what it asked for, not a guarantee of 0."""
    if not team_ids:
        return {}
    requests = repo.get_requests(session, status=RequestStatus.SUBMITTED, team_ids=team_ids)
    return {
        r.team_id: replace(share_of(r, None, pool_centi), asked=True)
        for r in requests
        if r.kind == RequestKind.CREATE
    }


@dataclass
class TeamDetail:
    team: Team
    org: Org
    share: GpuShare
    steps: list[ProvisioningStep]
    leads: list[User]
    members: list[tuple[User, TeamMember]]
    requests: list[ClusterRequest]
    decisions: dict[int, Decision]
    events: list[AuditEvent]
    usage_error: str | None
    borrowers: list[tuple[str, float]] = field(default_factory=list)
    holders: list[access.Holder] = field(default_factory=list)
    pending: list[access.Pending] = field(default_factory=list)
    suggestion: RightsizingSuggestion | None = None

    @property
    def progress(self) -> int:
        done = sum(1 for s in self.steps if s.status in ("done", "removed"))
        return int(100 * done / len(self.steps)) if self.steps else 0

    @property
    def version(self) -> str:
        """Changes whenever anything the team page shows about the team's state changes."""
        t = self.team
        state = (
            t.status,
            t.gpu_quota_centi,
            t.gpu_limit_centi,
            t.weight_centi,
            t.priority,
            t.cpu_quota_millicores,
            t.memory_quota_mb,
            t.last_error,
            t.attempts,
            tuple((r.id, r.status) for r in self.requests),
            tuple((u.id, m.role) for u, m in self.members),
            self.events[0].id if self.events else 0,
            tuple((h.user_id, h.expires_at) for h in self.holders),
            tuple(p.email for p in self.pending),
            self.suggestion and (self.suggestion.direction, self.suggestion.suggested_centi),
        )
        return hashlib.sha256(repr(state).encode()).hexdigest()[:16]

    @property
    def working(self) -> bool:
        """Whether the page should keep polling."""
        return self.team.status in (
            TeamStatus.APPROVED,
            TeamStatus.PROVISIONING,
            TeamStatus.FAILED,
            TeamStatus.DECOMMISSIONING,
        ) or any(r.status == "approved" for r in self.requests)


@dataclass(frozen=True)
class OverviewFigures:
    """The overview's org-wide figures besides usage: read in one statement."""

    org: Org
    pending_count: int
    rightsizing: tuple[int, int, int]  # idle teams, their idle hundredths, starved teams
    rollout: RolloutProgress | None
    repair_ids: tuple[int, ...]  # the newest drift repairs' audit events, newest first


REPAIRS_SHOWN = 5


@functools.lru_cache(maxsize=4)
def _figure_groups(version: str) -> tuple[tuple[ScalarSelect[Any], ...], ...]:
    # Built once per chart version: the expressions are immutable and shared by requests.
    return (
        (repo.pending_count_column(),),
        usage_repo.suggestion_totals_columns(),
        provisioning.rollout_columns(version),
        audit.newest_ids_columns(Event.DRIFT_REPAIRED, REPAIRS_SHOWN),
    )


@functools.lru_cache(maxsize=4)
def _figure_columns(version: str) -> tuple[ScalarSelect[Any], ...]:
    return tuple(column for group in _figure_groups(version) for column in group)


def overview_figures(session: Session, chart_version: str) -> OverviewFigures:
    org, values = repo.get_org_with(session, _figure_columns(chart_version))
    groups: list[Sequence[Any]] = []
    for group in _figure_groups(chart_version):  # the values, cut back into their groups
        groups.append(values[: len(group)])
        values = values[len(group) :]
    (pending,), (idle, idle_centi, starved), rollout, repairs = groups
    return OverviewFigures(
        org=org,
        pending_count=int(pending),
        rightsizing=(int(idle), int(idle_centi), int(starved)),
        rollout=provisioning.rollout_from(chart_version, rollout),
        repair_ids=tuple(int(i) for i in repairs if i is not None),
    )


def org_view(session: Session, usage: UsageCache, org: Org) -> OrgView:
    return usage.org_view(
        lambda: usage_repo.get_quota_rows(session, org.id),
        pool_centi=org.gpus_centi,
        parent=org.parent_queue,
    )


def team_detail(session: Session, team: Team, usage: UsageCache, settings: Settings) -> TeamDetail:
    """Costs the same whatever the number of teams: the org-wide parts are read ready."""
    org = repo.get_team_org(session, team)
    view = org_view(session, usage, org)
    requests, decisions = repo.get_team_requests_decided(session, team.id)
    people = team_members.get_all(session, team)
    holders, pending = access.holders(session, team, settings)
    return TeamDetail(
        team=team,
        org=org,
        share=view.shares.get(team.id)
        or asked_shares(session, [team.id], org.gpus_centi).get(team.id)
        or share_of(team, None, org.gpus_centi),
        borrowers=view.borrowers,
        steps=list(team.steps),  # loaded with the team (``for_pages``)
        leads=[u for u, m in people if m.role == "lead"],
        members=people,
        requests=requests,
        decisions=decisions,
        events=audit.get_team_events(session, team.id, ACTIVITY_SHOWN),
        usage_error=usage.error,
        holders=holders,
        pending=pending,
        suggestion=rightsizing.current(team.suggestion, team.gpu_quota_centi)
        if team.status == TeamStatus.READY
        else None,
    )


def quota_out(obj: Team | ClusterRequest | Decision) -> QuotaOut:
    cpu, memory = obj.cpu_quota_millicores, obj.memory_quota_mb
    return QuotaOut(
        gpu_quota=format_hundredths(obj.gpu_quota_centi or 0),
        gpu_limit=format_hundredths(obj.gpu_limit_centi or 0),
        over_quota_weight=format_hundredths(obj.weight_centi or 0),
        priority=obj.priority or 0,
        cpu_quota=None if cpu is None else format_hundredths(cpu // 10),
        memory_quota=None if memory is None else format_hundredths(memory // 10),
    )


def team_out(
    team: Team, share: GpuShare | None = None, steps: list[ProvisioningStep] | None = None
) -> TeamOut:
    return TeamOut(
        id=team.id,
        name=team.name,
        status=team.status,
        purpose=team.purpose,
        queue=team.queue_name,
        namespace=team.namespace,
        vcluster=team.vcluster_name,
        quota=quota_out(team),
        last_error=team.last_error,
        attempts=team.attempts,
        next_attempt_at=team.next_attempt_at,
        created_at=team.created_at,
        ready_at=team.ready_at,
        gpu_share=None
        if share is None
        else GpuShareOut(
            guaranteed=share.guaranteed,
            limit=share.limit,
            allocated=share.allocated,
            requested=share.requested,
            borrowed=round(share.borrowed, 2),
            pool=share.pool,
            fair_now=share.fair_now,
            usable_now=share.usable_now,
            if_all_busy=share.if_all_busy,
        ),
        steps=None
        if steps is None
        else [
            StepOut(step=s.step, status=s.status, message=s.message, updated_at=s.updated_at)
            for s in steps
        ],
    )


def request_out(request: ClusterRequest, decision: Decision | None = None) -> RequestOut:
    return RequestOut(
        id=request.id,
        team_id=request.team_id,
        team=request.team.name,
        kind=request.kind,
        status=request.status,
        purpose=request.purpose,
        created_at=request.created_at,
        requested=quota_out(request),
        decision=None
        if decision is None
        else DecisionOut(
            outcome=decision.outcome,
            reason=decision.reason,
            decided_at=decision.decided_at,
            changes=decision.changes,
            approved=quota_out(decision) if decision.outcome == "approved" else None,
        ),
    )


def event_out(event: AuditEvent) -> AuditEventOut:
    return AuditEventOut(
        id=event.id,
        at=event.at,
        actor=event.actor,
        action=event.action,
        team_id=event.team_id,
        summary=event.summary,
        details=event.details,
    )


def member_out(user: User, member: TeamMember) -> MemberOut:
    return MemberOut(
        user_id=user.id,
        email=user.email,
        name=user.display_name,
        role=member.role,
        source=member.source,
    )


def token_out(token: ApiToken) -> TokenOut:
    return TokenOut(
        id=token.id,
        name=token.name,
        prefix=token.prefix,
        created_at=token.created_at,
        expires_at=token.expires_at,
        last_used_at=token.last_used_at,
        revoked=token.revoked_at is not None,
    )


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
    )


def request_impact(
    session: Session, usage: UsageCache, org: Org, request: ClusterRequest
) -> Impact:
    """What approving ``request`` as asked would do to every team."""
    row = quota_row(request.team, team_service.values_of(request))
    return org_impact(session, usage, org, changes={row.id: row})


def impact_out(result: Impact) -> ImpactOut:
    return ImpactOut(
        pool_before=result.pool_before,
        pool_after=result.pool_after,
        teams=[
            TeamImpactOut(
                team_id=t.team_id,
                team=t.name,
                subject=t.is_subject,
                guarantee_before=t.guarantee_before,
                guarantee_after=t.guarantee_after,
                if_all_busy_before=t.busy_before,
                if_all_busy_after=t.busy_after,
                fair_now_before=t.now_before,
                fair_now_after=t.now_after,
            )
            for t in result.teams
        ],
    )


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


@dataclass
class WhatIf:
    pool: str
    pool_error: str | None
    rows: list[WhatIfRow]
    impact: Impact

    @property
    def changes(self) -> list[WhatIfRow]:
        return [row for row in self.rows if row.changed and row.values is not None]

    @property
    def errors(self) -> int:
        return sum(1 for row in self.rows if row.errors) + (1 if self.pool_error else 0)


def _shown(row: TeamQuota) -> dict[str, str]:
    return {
        "q": format_hundredths(row.gpu_quota_centi),
        "l": format_hundredths(row.gpu_limit_centi),
        "w": format_hundredths(row.weight_centi),
        "p": str(row.priority),
    }


def what_if(
    session: Session, usage: UsageCache, org: Org, form: Mapping[str, str] | None
) -> WhatIf:
    """Every live team's quota as the admin typed it, and every team's shares after.
    Only rows whose fields differ from today's values are parsed: a keystroke on a page
    of 1,000 teams costs one parse, and one fair-share computation for "after"."""
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
    changes: dict[int, TeamQuota] = {}
    for row in quota_rows:
        shown = _shown(row)
        inputs = {short: form.get(f"{short}_{row.id}", shown[short]).strip() for short in keys}
        if inputs == shown and pool_centi >= row.gpu_limit_centi:
            rows.append(WhatIfRow(row, inputs, {}, None, False))
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
            changes[row.id] = replace(
                row,
                gpu_quota_centi=values.gpu_quota_centi,
                gpu_limit_centi=values.gpu_limit_centi,
                weight_centi=values.weight_centi,
                priority=values.priority,
            )
        rows.append(WhatIfRow(row, inputs, errors, values, changed))
    result = impact(
        quota_rows,
        usage.get([row.queue_name for row in quota_rows]),
        pool_centi=org.gpus_centi,
        parent=org.parent_queue,
        new_pool_centi=None if pool_centi == org.gpus_centi else pool_centi,
        changes=changes,
        before=shares if usage.fair_override is None else None,
    )
    return WhatIf(pool=pool_text, pool_error=pool_error, rows=rows, impact=result)
