"""What the team pages show: a team's card and its whole page, built from the domains'
repositories and services; no rule is decided here."""

from __future__ import annotations

import functools
import hashlib
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from typing import cast

from sqlalchemy.orm import Session

from app.access import repository as access_repo
from app.access import service as access
from app.audit import repository as audit
from app.catalog import repository as catalog_repo
from app.catalog import service as catalog
from app.catalog.rules import Parameter, carry_parameters, deploy_values
from app.core.config import Settings
from app.core.models import (
    AuditEvent,
    ClusterRequest,
    Decision,
    GpuBudget,
    KubeconfigGrant,
    Org,
    Pool,
    ProvisioningStep,
    QuotaGrant,
    RequestKind,
    RequestStatus,
    RightsizingSuggestion,
    Sleep,
    Team,
    TeamMember,
    TeamStatus,
    TemplateVersion,
    User,
    utcnow,
)
from app.core.together import Read, read_all
from app.provisioning import sleep
from app.reads.org import KeyShare, org_view, other_shares
from app.teams import grants as quota_grants
from app.teams import repository as repo
from app.teams.repository import PoolLine, TeamRow
from app.usage import budgets as budget_service
from app.usage import rightsizing
from app.usage.explain import Level, explain
from app.usage.fairshare import Trace
from app.usage.service import (
    GpuLine,
    GpuShare,
    OrgView,
    UsageCache,
    display_name_of,
    share_of,
    shares_for,
)

ACTIVITY_SHOWN = 20


@dataclass
class TeamCard:
    team: Team | TeamRow
    share: GpuShare


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
        TeamCard(
            t,
            view.shares.get(t.id)
            or asked.get(t.id)
            or share_of(t if isinstance(t, TeamRow) else GpuLine.of(t), None, org.gpus_centi),
        )
        for t in teams
    ]


def asked_shares(session: Session, team_ids: list[int], pool_centi: int) -> dict[int, GpuShare]:
    """A team waiting for approval shows what it asked for, not a guarantee of 0."""
    if not team_ids:
        return {}
    requests = repo.get_requests(session, status=RequestStatus.SUBMITTED, team_ids=team_ids)
    return {
        r.team_id: replace(share_of(GpuLine.of(r), None, pool_centi), asked=True)
        for r in requests
        if r.kind == RequestKind.CREATE
    }


@dataclass
class TeamTemplate:
    """The cluster template a team's vCluster is wanted with, as its page shows it."""

    version: TemplateVersion
    parameters: dict[str, str]
    installs: list[str]  # what it puts inside ("Kind name", "chart name version")
    asked: bool  # the request's, not yet approved
    installed: bool  # the vCluster was last installed with this version
    newest: TemplateVersion  # the template's newest version
    drift: str | None = None  # what was missing inside when last checked
    checked_at: datetime | None = None
    repairs: bool = False  # what is missing is put back
    # Every parameter of the newest version, as a lead moving to it may choose it: each at
    # the value it would get (the team's kept, a new one at its default, a refused one
    # at the default until chosen), flagged new or refused.
    choices: tuple[Choice, ...] = ()
    # What the newest version puts inside ("Kind name", "chart name version").
    newest_installs: list[str] = field(default_factory=list)

    @property
    def behind(self) -> bool:
        return self.newest.number > self.version.number


@dataclass(frozen=True)
class Choice:
    parameter: Parameter
    value: str
    refused: str | None = None  # why the team's value does not carry over
    added: bool = False  # the newest version adds it

    @property
    def options(self) -> tuple[str, ...]:
        """What a choice or boolean parameter may be (empty: typed)."""
        if self.parameter.type == "boolean":
            return ("true", "false")
        return tuple(self.parameter.allowed or ()) if self.parameter.type == "choice" else ()


def _choices(newest: TemplateVersion, kept: dict[str, str]) -> tuple[Choice, ...]:
    spec = catalog.spec_of(newest)
    carried = carry_parameters(spec, kept)
    return tuple(
        Choice(p, carried.values[p.name], carried.refused.get(p.name), p.name in carried.added)
        for p in spec.parameters
    )


def _installs(version: TemplateVersion, parameters: dict[str, str]) -> list[str]:
    spec = catalog.spec_of(version)
    charts = [
        f"chart {h['chart']['name']} {h['chart']['version']}"
        for h in deploy_values(spec, parameters).get("helm", [])
    ]
    return [*spec.manifest_kinds(), *charts]


def team_template(
    session: Session, team: Team, requests: list[ClusterRequest]
) -> TeamTemplate | None:
    asked = team.status in (TeamStatus.SUBMITTED, TeamStatus.REJECTED)
    source: Team | ClusterRequest | None = team
    if asked:
        # The requests are read for showing (detached): the version by its id.
        source = next((r for r in requests if r.kind == RequestKind.CREATE), None)
        asked_for = source.template_version_id if source is not None else None
        version = catalog_repo.find_version(session, asked_for)
    else:
        version = team.template_version
    if source is None or version is None:
        return None
    spec = catalog.spec_of(version)
    # As the vCluster gets them: a parameter added by a later version at its default.
    parameters = carry_parameters(spec, source.template_parameters or {}).values
    newest = catalog_repo.latest(session, version.template_id)
    behind = newest.number > version.number
    choices = _choices(newest, parameters) if behind else ()
    return TeamTemplate(
        version=version,
        parameters=parameters,
        installs=_installs(version, parameters),
        asked=asked,
        installed=team.template_installed_id == version.id,
        newest=newest,
        drift=team.template_drift,
        checked_at=team.template_checked_at,
        repairs=spec.repair_drift,
        choices=choices,
        newest_installs=_installs(newest, {c.parameter.name: c.value for c in choices})
        if behind
        else [],
    )


class _Gauges:
    """A page's gauges: the default pool's GPUs, then the team's other keys."""

    share: GpuShare
    others: list[KeyShare]

    @property
    def all_shares(self) -> list[GpuShare]:
        return [self.share, *(k.share for k in self.others if k.share is not None)]


@dataclass(frozen=True)
class ShareDetail(_Gauges):
    """What the team's live share gauge shows: its poll reads nothing else (no lists, no
    template), every 10 s while the numbers move."""

    team: Team
    org: Org
    share: GpuShare
    borrowers: list[tuple[str, float]]
    usage_error: str | None
    # The team's share in its other pools and divided resources (one gauge each).
    others: list[KeyShare] = field(default_factory=list)


def share_detail(
    session: Session, team: Team, usage: UsageCache, lines: Sequence[PoolLine] | None = None
) -> ShareDetail:
    """Costs the same whatever the number of teams: read from the ready org view
    (``lines``: the team's quota lines, when read with the page's others)."""
    org = repo.get_team_org(session, team)
    view = org_view(session, usage, org)
    return ShareDetail(
        team=team,
        org=org,
        share=view.shares.get(team.id)
        or asked_shares(session, [team.id], org.gpus_centi).get(team.id)
        or share_of(GpuLine.of(team), None, org.gpus_centi),
        borrowers=view.borrowers,
        usage_error=usage.error or usage.model.history_error,
        others=other_shares(session, usage, org, team.id, view, lines),
    )


@dataclass
class TeamDetail(_Gauges):
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
    # The most the team could be guaranteed in the default pool today (the pool less the
    # other teams' guarantees): read only for a suggested raise.
    guarantee_room: int | None = None
    template: TeamTemplate | None = None
    others: list[KeyShare] = field(default_factory=list)
    # The other pools the team holds GPUs in, with its guarantee there (its pod specs).
    pool_gpus: list[tuple[Pool, int]] = field(default_factory=list)
    # Its temporary grants waiting, running or to come, and those ended in the last week.
    quota_grants: list[QuotaGrant] = field(default_factory=list)
    budgets: list[budget_service.Burn] = field(default_factory=list)  # this month's

    @property
    def running_grants(self) -> list[QuotaGrant]:
        """The grants added to its quota now."""
        return [g for g in self.quota_grants if g.applied_at and not g.released_at]

    @property
    def progress(self) -> int:
        """How far provisioning (or the removal) has got: a step once in place counts
        while it is retried or re-applied, so the bar never runs backwards."""
        if self.team.status in (TeamStatus.DECOMMISSIONING, TeamStatus.DECOMMISSIONED):
            done = sum(1 for s in self.steps if s.status == "removed")
        else:
            done = sum(1 for s in self.steps if s.status == "done" or s.reached)
        return int(100 * done / len(self.steps)) if self.steps else 0

    @functools.cached_property
    def version(self) -> str:
        """Changes whenever anything the team page shows about the team's state changes
        (worked out once: the status card writes it twice)."""
        t = self.team
        state = (
            t.status,
            t.quota,
            t.last_error,
            t.attempts,
            tuple((r.id, r.status) for r in self.requests),
            tuple((u.id, m.role) for u, m in self.members),
            self.events[0].id if self.events else 0,
            tuple((h.user_id, h.expires_at) for h in self.holders),
            tuple(p.email for p in self.pending),
            self.suggestion and (self.suggestion.direction, self.suggestion.suggested_centi),
            (t.sleep, t.awake_until, t.sleep_after_hours),
        )
        return hashlib.sha256(repr(state).encode()).hexdigest()[:16]

    @property
    def working(self) -> bool:
        """Whether the page should keep polling."""
        return (
            self.team.status
            in (
                TeamStatus.APPROVED,
                TeamStatus.PROVISIONING,
                TeamStatus.FAILED,
                TeamStatus.DECOMMISSIONING,
            )
            or self.team.sleep in (Sleep.FALLING_ASLEEP, Sleep.WAKING)
            or any(r.status == "approved" for r in self.requests)
        )

    @property
    def _template_sleep_hours(self) -> int | None:
        t = self.template
        if t is None or t.asked:
            return None
        return catalog.spec_of(t.version).sleep_after_hours

    @property
    def sleep_default_hours(self) -> int | None:
        """The idle hours that apply when the team chose none: its template's, else the
        org's (None: the policy does not count idle hours)."""
        if self.org.sleep_after_hours is None:
            return None
        return self._template_sleep_hours or self.org.sleep_after_hours

    @property
    def sleep_idle(self) -> sleep.Idle | None:
        """When and why the org's policy puts the team's idle cluster to sleep (None: it
        does not)."""
        return sleep.idle_since(self.team, self.org, self._template_sleep_hours)


TeamLists = tuple[
    tuple[list[ClusterRequest], dict[int, Decision]],
    list[tuple[User, TeamMember]],
    list[tuple[User, KubeconfigGrant, str | None]],
    list[AuditEvent],
    list[QuotaGrant],
    list[PoolLine],
    list[GpuBudget],
]


def team_lists(
    team_id: int, now: datetime | None = None
) -> tuple[
    Read[tuple[list[ClusterRequest], dict[int, Decision]]],
    Read[list[tuple[User, TeamMember]]],
    Read[list[tuple[User, KubeconfigGrant, str | None]]],
    Read[list[AuditEvent]],
    Read[list[QuotaGrant]],
    Read[list[PoolLine]],
    Read[list[GpuBudget]],
]:
    """What the team page lists: its requests, members, kubeconfig grants, latest events,
    temporary quota grants, quota lines by pool (its gauges and forms) and this month's
    GPU-hour budgets (``now``'s month)."""
    return (
        repo.team_requests_decided(team_id),
        repo.team_members(team_id),
        access_repo.team_grants(team_id),
        audit.team_events(team_id, ACTIVITY_SHOWN),
        repo.team_quota_grants(team_id),
        repo.team_pool_lines(team_id),
        budget_service.team_budgets(team_id, now or utcnow()),
    )


def team_detail(
    session: Session,
    team: Team,
    usage: UsageCache,
    settings: Settings,
    lists: TeamLists | None = None,
) -> TeamDetail:
    """Costs the same whatever the number of teams: the org-wide parts are read ready.
    ``lists``: the values of ``team_lists``, when read with the caller and the team."""
    now = utcnow()
    (requests, decisions), people, grants, events, quota_list, lines, budgets = (
        lists if lists is not None else cast(TeamLists, read_all(session, team_lists(team.id, now)))
    )
    gauge = share_detail(session, team, usage, lines)
    holders, pending = access.holders_of(team, grants, settings)
    suggestion = (
        rightsizing.current(team.suggestion, team.quota.gpu.guarantee or 0)
        if team.status == TeamStatus.READY
        else None
    )
    return TeamDetail(
        team=team,
        org=gauge.org,
        share=gauge.share,
        borrowers=gauge.borrowers,
        steps=list(team.steps),  # read with the team (``team_for_pages``)
        leads=[u for u, m in people if m.role == "lead"],
        members=people,
        requests=requests,
        decisions=decisions,
        events=events,
        usage_error=gauge.usage_error,
        others=gauge.others,
        pool_gpus=repo.gpu_in_other_pools(session, team.id, lines) if gauge.others else [],
        holders=holders,
        pending=pending,
        suggestion=suggestion,
        guarantee_room=(
            gauge.org.gpus_centi
            - repo.committed_gpu_centi(session, gauge.org.id, exclude_team_id=team.id)
            if suggestion is not None and suggestion.direction == "raise"
            else None
        ),
        template=team_template(session, team, requests),
        quota_grants=quota_grants.shown(quota_list, since=now - timedelta(days=7)),
        budgets=budget_service.of_team(session, team.id, now, budgets),
    )


@dataclass(frozen=True)
class WhyShare:
    """The step-by-step account of a team's fair share now."""

    levels: list[Level]
    computed: float | None  # the calculator's figure the steps add up to
    shown: float | None  # the page's figure (KAI's own, where Prometheus gives it)


def why_share(session: Session, usage: UsageCache, team: Team) -> WhyShare:
    """Recompute today's division with its steps recorded (one computation, when asked
    for: the team page loads it only when the account is opened)."""
    org = repo.get_org(session)
    view = org_view(session, usage, org)
    rows = view.rows
    readings = usage.get([row.queue_name for row in rows])
    trace: Trace = []
    computed = shares_for(
        rows,
        readings,
        pool_centi=org.gpus_centi,
        parent=org.parent_queue,
        model=usage.model,
        trace=trace,
    )
    mine = computed.get(team.id)
    shown = view.shares.get(team.id)
    levels = explain(trace, team.queue_name, name=display_name_of)
    return WhyShare(
        levels if mine is not None and mine.fair_now is not None else [],
        mine.fair_now if mine is not None else None,
        shown.fair_now if shown is not None else None,
    )
