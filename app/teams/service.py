"""The workflow: request, decide, change, decommission. Services flush, never commit."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from app.audit import service as audit
from app.catalog import repository as catalog_repo
from app.catalog import service as catalog
from app.catalog.service import Chosen
from app.core import labels, quota
from app.core.db import Effect, request_effect
from app.core.errors import Conflict, InvalidInput
from app.core.events import Event
from app.core.models import (
    STEP_ORDER,
    ClusterRequest,
    Decision,
    MemberRole,
    Org,
    Outcome,
    Pool,
    ProvisioningStep,
    RequestKind,
    RequestStatus,
    Sleep,
    StepStatus,
    Team,
    TeamMember,
    TeamStatus,
    User,
    utcnow,
)
from app.core.quantities import format_hundredths
from app.core.quota import GPU, Quota
from app.notifications import events
from app.teams import grants
from app.teams import repository as repo
from app.teams.rules import (
    parse_purpose,
    parse_quota,
    parse_reason,
    quota_problems,
    team_name_error,
)


@dataclass(frozen=True)
class PoolPreview:
    """What the pool looks like if a request is approved as it stands."""

    pool_centi: int
    committed_centi: int
    requested_centi: int

    @property
    def after_centi(self) -> int:
        return self.committed_centi + self.requested_centi

    @property
    def free_centi(self) -> int:
        return max(0, self.pool_centi - self.committed_centi)

    @property
    def fits(self) -> bool:
        return self.after_centi <= self.pool_centi


class Keep:
    """The template as asked (an approval that does not change it)."""


KEEP = Keep()


def values_of(obj: ClusterRequest | Team) -> Quota:
    return obj.quota


def _assign(org: Org, obj: ClusterRequest | Team | Decision, values: Quota) -> None:
    obj.set_quota(org.default_pool, values)


def preview(
    session: Session, *, requested_centi: int, exclude_team_id: int | None = None
) -> PoolPreview:
    org = repo.get_org(session)
    committed = repo.committed_gpu_centi(session, org.id, exclude_team_id=exclude_team_id)
    return PoolPreview(org.gpus_centi, committed, requested_centi)


def check_cluster_request(session: Session, data: Mapping[str, Any]) -> tuple[str, Quota]:
    """Validate a new-cluster request without writing anything."""
    org = repo.get_org(session)
    errors: dict[str, str] = {}
    name = str(data.get("name") or "").strip()
    problem = _name_problem(session, name)
    if problem:
        errors["name"] = problem
    values: Quota | None = None
    try:
        values = parse_quota(data, pool=org)
        parse_purpose(data)
    except InvalidInput as exc:
        errors.update(exc.errors)
    if errors or values is None:
        raise InvalidInput(errors)
    return name, values


def _name_problem(session: Session, name: str) -> str | None:
    problem = team_name_error(name)
    if problem is None and repo.get_live_team_by_name(session, name) is not None:
        problem = (
            f"a team named {name!r} already has a cluster or a pending request; choose another"
        )
    return problem


def _purpose(purpose: str, errors: dict[str, str]) -> str:
    try:
        return parse_purpose({"purpose": purpose})
    except InvalidInput as exc:
        errors.update(exc.errors)
        return ""


def submit_cluster_request(
    session: Session,
    *,
    actor: User,
    name: str,
    values: Quota,
    purpose: str = "",
    template: Chosen | None = None,
    pools: PoolValues | None = None,
) -> ClusterRequest:
    """A team lead asks for a cluster: the team is created in `submitted`. ``values`` are
    parsed at the edge (a page's form, the API's body); the name and the values are
    checked here against the live teams and the pool. ``template`` is the cluster
    template chosen (``catalog.service.choose``; None: a plain vCluster). ``pools``: what
    the team asks for in other pools than the default, by pool name."""
    org = repo.get_org(session)
    errors = quota_problems(values, org)
    held, pool_errors = resolve_pools(session, org, pools or {})
    errors.update(pool_errors)
    problem = _name_problem(session, name)
    if problem:
        errors["name"] = problem
    purpose = _purpose(purpose, errors)
    if errors:
        raise InvalidInput(errors)
    team = Team(org_id=org.id, name=name, status=TeamStatus.SUBMITTED, purpose=purpose)
    team.created_by_id = actor.id
    try:
        with session.begin_nested():
            session.add(team)
            session.flush()
    except IntegrityError:
        raise InvalidInput(
            {"name": f"a team named {name!r} was requested a moment ago; choose another name"}
        ) from None
    session.add(TeamMember(team_id=team.id, user_id=actor.id, role=MemberRole.LEAD))
    request = ClusterRequest(
        team=team,
        kind=RequestKind.CREATE,
        purpose=purpose,
        requested_by_id=actor.id,
    )
    _assign(org, request, values)
    request.set_other_pools(held)
    if template is not None:
        request.template_version_id = template.version.id
        request.template_parameters = dict(template.parameters)
    session.add(request)
    session.flush()
    kind = catalog.describe(template.version if template else None, request.template_parameters)
    events.record(
        session,
        Event.REQUEST_SUBMITTED,
        actor=actor,
        team=team,
        summary=f"requested cluster {name} ({kind}): {_describe(values)}{describe_pools(held)}",
        facts={"request_id": request.id, **values.display(), "template": kind},
    )
    return request


def _check_changeable(session: Session, team: Team) -> None:
    """A team's quota can change once it is ready and while no request of it waits."""
    if team.status != TeamStatus.READY:
        raise Conflict(
            f"team {team.name} is {team.status}: quota changes are possible once it is ready"
        )
    pending = repo.get_requests(session, status=RequestStatus.SUBMITTED, team_ids=[team.id])
    if pending:
        raise Conflict(
            f"team {team.name} already has request #{pending[0].id} waiting for an admin; "
            "wait for its decision before asking again"
        )


def _add_change_request(session: Session, team: Team, request: ClusterRequest) -> None:
    """Insert the request; the one-waiting-request index refuses a racing second one."""
    try:
        with session.begin_nested():
            session.add(request)
            session.flush()
    except IntegrityError:
        # Another submission for this team committed between the check and now.
        raise Conflict(
            f"team {team.name} already has a request waiting for an admin (sent a moment "
            "ago); wait for its decision before asking again"
        ) from None


def submit_quota_change(
    session: Session,
    *,
    actor: User,
    team: Team,
    values: Quota,
    purpose: str = "",
    pools: PoolValues | None = None,
) -> ClusterRequest:
    """Ask for new quota values (parsed at the edge) on a ready team; it goes through the
    same approval. ``pools``: the team's quota in every other pool it is to hold quota in
    (a pool left out is left); None keeps its other pools as they are."""
    _check_changeable(session, team)
    org = repo.get_org(session)
    errors = quota_problems(values, org)
    current = grants.base_pools(session, team)
    if pools is None:
        held = current
    else:
        held, pool_errors = resolve_pools(session, org, pools)
        errors.update(pool_errors)
    purpose = _purpose(purpose, errors)
    if errors:
        raise InvalidInput(errors)
    if values == grants.base(session, team, org.default_pool) and held == current:
        raise InvalidInput({"gpu_quota": "these are the current values: change at least one"})
    request = ClusterRequest(
        team=team,
        kind=RequestKind.QUOTA_CHANGE,
        purpose=purpose,
        requested_by_id=actor.id,
    )
    _assign(org, request, values)
    request.set_other_pools(held)
    _add_change_request(session, team, request)
    events.record(
        session,
        Event.QUOTA_CHANGE_SUBMITTED,
        actor=actor,
        team=team,
        summary=f"asked to change {team.name}'s quota to {_describe(values)}{describe_pools(held)}",
        facts={"request_id": request.id, **values.display()},
    )
    return request


def approve(
    session: Session,
    *,
    actor: User,
    request_id: int,
    adjusted: Quota | None = None,
    reason: str = "",
    template: Chosen | Keep | None = KEEP,
    adjusted_pools: PoolValues | None = None,
) -> Decision:
    """Approve as asked or with adjusted values; never past the pool, nor past any other
    pool's budget. ``template``: the cluster template the admin approves instead of the
    one asked for (a create request; None: a plain vCluster). ``adjusted_pools``: the
    quota in the other pools instead of the asked (None: as asked)."""
    org = repo.get_org(session)
    org = repo.lock_org(session, org.id)
    request = repo.get_request(session, request_id, fresh=True)
    session.refresh(request.team)
    _require_open(request)
    team = request.team
    values = adjusted if adjusted is not None else values_of(request)
    asked_pools = request.quota_by_pool()
    pools = _fitting(session, org, request, values, asked_pools, adjusted_pools)
    changes: dict[str, list[str]] = values_of(request).changes(values)
    changes.update(_pool_changes(asked_pools, pools))
    approved = _approved_template(session, request, template)
    if approved.was != approved.now:
        changes["template"] = [approved.was, approved.now]
    decision = Decision(
        request_id=request.id,
        actor_id=actor.id,
        outcome=Outcome.APPROVED,
        reason=parse_reason(reason, required=False),
        changes=changes,
    )
    session.add(decision)
    request.status = RequestStatus.APPROVED
    for holder in (decision, team):
        _assign(org, holder, values)
        holder.set_other_pools(pools)
        if request.kind == RequestKind.CREATE:
            holder.template_version_id = approved.version_id
            holder.template_parameters = dict(approved.parameters)
    if request.kind == RequestKind.QUOTA_CHANGE:  # the grants running keep running
        _keep_grants(session, org, team, values, pools)
    team.desired_generation += 1
    team.next_attempt_at = utcnow()
    team.attempts = 0
    if request.kind == RequestKind.CREATE:
        team.status = TeamStatus.APPROVED
        _init_steps(session, team)
    session.flush()
    _record_approval(session, actor, request, decision, values, approved)
    _quotas_changed(session)
    return decision


def _keep_grants(
    session: Session, org: Org, team: Team, values: Quota, pools: Mapping[Pool, Quota]
) -> None:
    """The team's lines after a quota change: the approved base values with its grants
    applied now added back (each is taken back at its end, the change kept)."""
    for pool, value in ((org.default_pool, values), *pools.items()):
        added = grants.applied_centi(session, team.id, pool.id)
        if added != (0, 0):
            team.set_quota(pool, grants.with_grants(value, added))


def _fitting(
    session: Session,
    org: Org,
    request: ClusterRequest,
    values: Quota,
    asked_pools: dict[Pool, Quota],
    adjusted_pools: PoolValues | None,
) -> dict[Pool, Quota]:
    """The quota in the other pools an approval settles on, once the values are valid and
    fit every pool's budget (the org is locked); raises what to change otherwise."""
    team = request.team
    pools = asked_pools
    problems = quota_problems(values, org)
    if adjusted_pools is not None:
        pools, pool_problems = resolve_pools(session, org, adjusted_pools)
        problems.update(pool_problems)
    if problems:
        raise InvalidInput(problems)
    _check_pool(session, org, team, values)
    _check_pools(session, org, team, pools)
    if request.kind == RequestKind.QUOTA_CHANGE and team.status != TeamStatus.READY:
        raise Conflict(f"team {team.name} is {team.status}: its quota cannot change now")
    return pools


@dataclass(frozen=True)
class _Approved:
    """The cluster template an approval settles on, and as people read it before and
    after."""

    version_id: int | None
    parameters: Mapping[str, str]
    was: str
    now: str


def _approved_template(
    session: Session, request: ClusterRequest, template: Chosen | Keep | None
) -> _Approved:
    asked_version = (
        catalog_repo.get_version(session, request.template_version_id)
        if request.template_version_id is not None
        else None
    )
    if isinstance(template, Keep):
        version, parameters = asked_version, dict(request.template_parameters or {})
    elif request.kind != RequestKind.CREATE:
        raise InvalidInput({"template": "a quota change keeps the team's cluster template"})
    else:
        version = template.version if template is not None else None
        parameters = dict(template.parameters) if template is not None else {}
    return _Approved(
        version.id if version is not None else None,
        parameters,
        catalog.describe(asked_version, request.template_parameters or {}),
        catalog.describe(version, parameters),
    )


def _record_approval(
    session: Session,
    actor: User,
    request: ClusterRequest,
    decision: Decision,
    values: Quota,
    approved: _Approved,
) -> None:
    create = request.kind == RequestKind.CREATE
    changes = decision.changes
    if changes:
        event = Event.REQUEST_ADJUSTED if create else Event.QUOTA_CHANGE_ADJUSTED
        how = " with changes: " + labels.changes(changes)
    else:
        event = Event.REQUEST_APPROVED if create else Event.QUOTA_CHANGE_APPROVED
        how = " as asked"
    team = request.team
    events.record(
        session,
        event,
        actor=actor,
        team=team,
        summary=f"approved request #{request.id} for {team.name}{how}",
        facts={
            "request_id": request.id,
            "changes": changes,
            **values.display(),
            "template": approved.now if create else "",
            "reason": decision.reason or "",
        },
        requester_id=request.requested_by_id,
    )


def reject(session: Session, *, actor: User, request_id: int, reason: str) -> Decision:
    reason = parse_reason(reason, required=True)
    org = repo.get_org(session)
    repo.lock_org(session, org.id)
    request = repo.get_request(session, request_id, fresh=True)
    _require_open(request)
    team = request.team
    session.refresh(team)
    decision = Decision(
        request_id=request.id, actor_id=actor.id, outcome=Outcome.REJECTED, reason=reason
    )
    session.add(decision)
    request.status = RequestStatus.REJECTED
    if request.kind == RequestKind.CREATE:
        team.status = TeamStatus.REJECTED
    session.flush()
    events.record(
        session,
        Event.REQUEST_REJECTED
        if request.kind == RequestKind.CREATE
        else Event.QUOTA_CHANGE_REJECTED,
        actor=actor,
        team=team,
        summary=f"rejected request #{request.id} for {team.name}: {reason}",
        facts={"request_id": request.id, "reason": reason},
        requester_id=request.requested_by_id,
    )
    return decision


def decommission(session: Session, *, actor: User, team: Team) -> None:
    allowed = (TeamStatus.APPROVED, TeamStatus.PROVISIONING, TeamStatus.READY, TeamStatus.FAILED)
    if team.status not in allowed:
        raise Conflict(
            f"team {team.name} is {team.status}: only a live cluster can be decommissioned"
        )
    team.status = TeamStatus.DECOMMISSIONING
    team.next_attempt_at = utcnow()
    team.attempts = 0
    team.last_error = None
    # A sleeping cluster is deleted as it is (no wake first): it no longer counts as one
    # asleep, nor as memory sleep saves.
    team.sleep, team.asleep_since = Sleep.AWAKE, None
    for request in repo.get_requests(session, status=RequestStatus.SUBMITTED, team_ids=[team.id]):
        request.status = RequestStatus.CANCELLED
    session.flush()
    audit.record(
        session,
        actor=actor,
        event=Event.DECOMMISSION_REQUESTED,
        team_id=team.id,
        summary=f"decommissioning {team.name}: its vCluster, namespace, policy and queue go",
    )
    _quotas_changed(session)
    request_effect(session, Effect.ACCESS_CHANGED)  # every kubeconfig of the team is revoked


def retry_now(session: Session, *, actor: User, team: Team) -> None:
    if team.status not in (TeamStatus.FAILED, TeamStatus.PROVISIONING, TeamStatus.DECOMMISSIONING):
        raise Conflict(f"team {team.name} is {team.status}: there is nothing to retry")
    team.next_attempt_at = utcnow()
    team.lease_until = None
    session.flush()
    audit.record(
        session,
        actor=actor,
        event=Event.PROVISIONING_RETRY,
        team_id=team.id,
        summary=f"asked to retry provisioning of {team.name} now",
    )
    request_effect(session, Effect.PROVISIONING_DUE)


def update_pool(
    session: Session, *, actor: User, data: Mapping[str, Any], below_committed: bool = False
) -> Org:
    """Change the pool. A field left out (or empty, for an optional resource) keeps its
    value. Never below what is already guaranteed unless ``below_committed`` confirms it
    (GPUs were lost: the guarantees then exceed the pool until team quotas are lowered,
    and no new guarantee fits)."""
    org = repo.get_org(session)
    org = repo.lock_org(session, org.id)
    was = org.capacity
    amounts, errors = pool_amounts(data, was)
    committed = repo.committed_gpu_centi(session, org.id)
    short = below_guarantees(amounts, errors, committed, below_committed=below_committed)
    org.set_capacity(amounts)
    before, after = quota.pool_display(was), quota.pool_display(amounts)
    # The parent queue carries the pool: every live team's queue step re-checks it.
    now = utcnow()
    for team in repo.get_teams(session, statuses=[TeamStatus.READY]):
        team.desired_generation += 1  # the parent queue they hang from changes
        team.next_attempt_at = now
    session.flush()
    labels_of = {r.pool_field: r.pool_label for r in quota.RESOURCES}
    audit.record(
        session,
        actor=actor,
        event=Event.POOL_UPDATED,
        summary="pool changed: "
        + ", ".join(
            f"{labels_of[k]} {before[k]} → {after[k]}" for k in before if before[k] != after[k]
        ),
        details={"before": before, "after": after}
        | ({"below_committed": format_hundredths(committed)} if short else {}),
    )
    _quotas_changed(session)
    return org


def below_guarantees(
    amounts: Mapping[str, int],
    errors: dict[str, str],
    committed: int,
    *,
    below_committed: bool,
    pool: str = "",
) -> bool:
    """Whether the GPUs typed are below ``committed`` (the guarantees held in the pool,
    ``pool`` named unless the org's); unless ``below_committed`` confirms it, that is an
    error and every error found so far is raised."""
    short = GPU.pool_field not in errors and amounts[GPU.key] < committed
    if short and not below_committed:
        held = format_hundredths(committed)
        where = f" in pool {pool}" if pool else ""
        errors[GPU.pool_field] = (
            f"{held} GPU are already guaranteed to teams{where}: enter at least {held}, lower "
            "team quotas first, or confirm a pool below the guarantees (KAI then cannot give "
            "every team its guarantee at once)"
        )
    if errors:
        raise InvalidInput(errors)
    return short


def pool_amounts(
    data: Mapping[str, Any], was: Mapping[str, int]
) -> tuple[dict[str, int], dict[str, str]]:
    """The pool's amounts as typed (storage units; a field left out keeps its value)."""
    amounts = {r.key: was.get(r.key, 0) for r in quota.RESOURCES}
    errors: dict[str, str] = {}
    for res in quota.RESOURCES:
        raw = data.get(res.pool_field)
        if raw is None or (not res.required and str(raw).strip() == ""):
            continue
        try:
            amounts[res.key] = res.parse(raw, f"the pool's {res.pool_label}")
        except ValueError as exc:
            errors[res.pool_field] = str(exc)
    return amounts, errors


def _quotas_changed(session: Session) -> None:
    """Teams have new desired quotas: the reconciler has work, cached shares are stale."""
    request_effect(session, Effect.PROVISIONING_DUE)
    request_effect(session, Effect.QUOTAS_CHANGED)


def _require_open(request: ClusterRequest) -> None:
    if request.status != RequestStatus.SUBMITTED:
        raise Conflict(f"request #{request.id} was already {request.status}; reload to see it")


PoolValues = Mapping[str, Quota]  # quota by pool name, for pools other than the default


def resolve_pools(
    session: Session, org: Org, values: PoolValues
) -> tuple[dict[Pool, Quota], dict[str, str]]:
    """``values`` by pool, each checked against its pool's budget (field names
    ``pools.<pool>.<field>``); a pool given nothing (no guarantee, a limit of 0) is left."""
    known = {pool.name: pool for pool in repo.get_pools(session, org.id) if not pool.is_default}
    found: dict[Pool, Quota] = {}
    errors: dict[str, str] = {}
    for name, value in values.items():
        pool = known.get(name)
        if pool is None:
            others = ", ".join(sorted(known)) or "none: the org has the default pool only"
            errors[f"pools.{name}"] = f"no pool is named {name}: the other pools are {others}"
            continue
        for field, problem in value.problems(pool.capacity).items():
            errors[f"pools.{name}.{field}"] = f"in pool {name}: {problem}"
        if (value.gpu.guarantee or 0) > 0 or (value.gpu.limit or 0) > 0:
            found[pool] = value
    return found, errors


def _pool_changes(
    asked: Mapping[Pool, Quota], approved: Mapping[Pool, Quota]
) -> dict[str, list[str]]:
    """What an approval changed in other pools, in words, by "pool <name>"."""
    changes: dict[str, list[str]] = {}
    for pool in sorted({*asked, *approved}, key=lambda pool: pool.name):
        was, now = asked.get(pool), approved.get(pool)
        if was != now:
            changes[f"pool {pool.name}"] = [
                was.describe() if was else "none",
                now.describe() if now else "none",
            ]
    return changes


def describe_pools(pools: Mapping[Pool, Quota]) -> str:
    """ "; in pool l40s: 1 GPU guaranteed, limit 2 GPU" (nothing for no other pool)."""
    ordered = sorted(pools.items(), key=lambda item: item[0].name)
    return "".join(f"; in pool {pool.name}: {value.describe()}" for pool, value in ordered)


def _check_pools(session: Session, org: Org, team: Team, pools: Mapping[Pool, Quota]) -> None:
    """No pool's budget is exceeded by the guarantees held there, this team's included
    (the caller holds the org's lock: racing admins see each other's approvals)."""
    now = utcnow()
    for pool, value in pools.items():
        budget = pool.capacity.get(GPU.key, 0)
        others = grants.base_committed(session, org, pool, exclude_team_id=team.id)
        others += grants.future_peak(session, pool, now)
        guarantee = value.gpu.guarantee or 0
        if others + guarantee > budget:
            raise Conflict(
                f"approving a guarantee of {format_hundredths(guarantee)} GPU in pool "
                f"{pool.name} would commit {format_hundredths(others + guarantee)} of its "
                f"{format_hundredths(budget)} GPU; {format_hundredths(max(0, budget - others))} "
                "GPU is free there. Approve with a guarantee of at most that, or raise the "
                "pool's budget first."
            )


def _check_pool(session: Session, org: Org, team: Team, values: Quota) -> None:
    # The other teams' own guarantees, and the most the temporary grants approved (this
    # team's too) add at once from now on: a raise must fit beside them all along.
    pool = org.default_pool
    peak = grants.future_peak(session, pool, utcnow())
    others = grants.base_committed(session, org, pool, exclude_team_id=team.id) + peak
    guarantee = values.gpu.guarantee or 0
    if others + guarantee > org.gpus_centi:
        free = max(0, org.gpus_centi - others)
        raise Conflict(
            f"approving a guarantee of {format_hundredths(guarantee)} GPU would "
            f"commit {format_hundredths(others + guarantee)} of the pool's "
            f"{format_hundredths(org.gpus_centi)} GPU"
            + (" (temporary grants included at their peak)" if peak else "")
            + f"; {format_hundredths(free)} GPU is free. "
            "Approve with a guarantee of at most that, or raise the pool first."
        )


def _init_steps(session: Session, team: Team) -> None:
    existing = {s.step for s in repo.get_steps(session, team.id)}
    for position, step in enumerate(STEP_ORDER):
        if step not in existing:
            session.add(
                ProvisioningStep(
                    team_id=team.id, step=step, position=position, status=StepStatus.PENDING
                )
            )


def _describe(values: Quota) -> str:
    return values.describe()
