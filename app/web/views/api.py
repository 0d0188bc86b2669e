"""The API's answers (``web/schemas``) built from the domains' rows."""

from __future__ import annotations

from app.catalog.service import Offered
from app.core import quota
from app.core.models import (
    ApiToken,
    AuditEvent,
    ClusterRequest,
    Decision,
    ProvisioningStep,
    Team,
    TeamMember,
    TemplateVersion,
    User,
)
from app.core.quantities import format_hundredths
from app.usage.impact import Impact
from app.usage.service import GpuShare
from app.web.schemas import (
    AuditEventOut,
    DecisionOut,
    GpuShareOut,
    ImpactOut,
    MemberOut,
    PoolQuotas,
    QuotaLineOut,
    QuotaOut,
    RequestOut,
    SleepOut,
    StepOut,
    TeamImpactOut,
    TeamOut,
    TemplateOut,
    TemplateRefOut,
    TemplateVersionOut,
    TokenOut,
)


def quota_out(obj: Team | ClusterRequest | Decision) -> QuotaOut:
    """A stored quota as the API answers it (an optional resource without a guarantee:
    null; a decision without values, a rejection: zeros)."""
    held = obj.quota
    answer: dict[str, str | int | None] = dict(held.display())
    for res in quota.RESOURCES:
        answer[res.guarantee_field] = answer[res.guarantee_field] or None
    if isinstance(obj, Decision) and not obj.quota_lines:
        answer[quota.WEIGHT_FIELD] = "0"
        answer[quota.PRIORITY_FIELD] = 0
    pools: PoolQuotas = {}
    for line in obj.quota_lines:
        res = quota.resource(line.resource)
        limit = res.text(line.quota_limit) if res.limited else ""
        pools.setdefault(line.pool.name, {})[res.key] = QuotaLineOut(
            guarantee=res.text(line.guarantee) or None,
            limit=limit or None,
            weight=format_hundredths(line.weight),
        )
    return QuotaOut.model_validate({**answer, "pools": pools})


def team_out(
    team: Team,
    share: GpuShare | None = None,
    steps: list[ProvisioningStep] | None = None,
    usage_error: str | None = None,
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
        template=template_ref(team),
        last_error=team.last_error,
        attempts=team.attempts,
        next_attempt_at=team.next_attempt_at,
        created_at=team.created_at,
        ready_at=team.ready_at,
        sleep=SleepOut(
            state=team.sleep,
            asleep_since=team.asleep_since,
            reason=team.sleep_reason,
            asked_at=team.sleep_asked_at,
            awake_until=team.awake_until,
            sleep_after_hours=team.sleep_after_hours,
        ),
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
            within_pool=share.within_pool,
            idle_in_cluster=share.idle_elsewhere,
            fair_without_history=share.fair_without_history,
            usage_error=usage_error,
        ),
        steps=None
        if steps is None
        else [
            StepOut(step=s.step, status=s.status, message=s.message, updated_at=s.updated_at)
            for s in steps
        ],
    )


def template_ref(obj: ClusterRequest | Decision | Team) -> TemplateRefOut | None:
    version = obj.template_version
    if version is None:
        return None
    return TemplateRefOut(
        template_id=version.template_id,
        name=version.template.name,
        version=version.number,
        version_id=version.id,
        parameters=dict(obj.template_parameters or {}),
    )


def version_out(version: TemplateVersion) -> TemplateVersionOut:
    return TemplateVersionOut(
        id=version.id,
        number=version.number,
        note=version.note,
        created_at=version.created_at,
        spec=version.spec,
    )


def template_out(offered: Offered, versions: list[TemplateVersion] | None = None) -> TemplateOut:
    t = offered.template
    return TemplateOut(
        id=t.id,
        name=t.name,
        description=t.description,
        is_default=t.is_default,
        leads_accept=t.leads_accept,
        latest=version_out(offered.latest),
        teams=offered.teams,
        versions=None if versions is None else [version_out(v) for v in versions],
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
        requested_by=request.requester.email if request.requester is not None else None,
        requested=quota_out(request),
        template=template_ref(request),
        decision=None
        if decision is None
        else DecisionOut(
            outcome=decision.outcome,
            reason=decision.reason,
            decided_at=decision.decided_at,
            changes=decision.changes,
            approved=quota_out(decision) if decision.outcome == "approved" else None,
            template=template_ref(decision),
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
                within_pool_before=t.within_before,
                within_pool_after=t.within_after,
                fair_now_before=t.now_before,
                fair_now_after=t.now_after,
            )
            for t in result.teams
        ],
    )
