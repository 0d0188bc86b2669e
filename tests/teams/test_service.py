"""The workflow rules, on SQLite and PostgreSQL."""

from __future__ import annotations

import pytest
from sqlalchemy import select, text
from sqlalchemy.exc import DBAPIError
from sqlalchemy.orm import Session

from app.core.errors import Conflict, InvalidInput
from app.core.models import AuditEvent, ProvisioningStep, RequestStatus, TeamStatus, User
from app.teams import members, service
from app.teams import repository as repo
from app.teams.rules import parse_quota_fields
from tests.factories import make_org, make_user, request_values, submit


@pytest.fixture
def people(session: Session) -> dict[str, object]:
    make_org(session, gpus="1")
    return {
        "admin": make_user(session, "admin@example.org", admin=True),
        "lead": make_user(session, "lead@example.org"),
        "other": make_user(session, "other@example.org"),
    }


def test_submit_creates_team_lead_and_audit(session: Session, people: dict[str, User]) -> None:
    request = submit(session, people["lead"], "nlp")
    team = request.team
    assert team.status == TeamStatus.SUBMITTED
    assert (request.quota.gpu.guarantee, request.quota.gpu.limit) == (33, 100)
    assert team.quota.gpu.guarantee == 0, "nothing is committed before approval"
    listed = members.get_all(session, team)
    assert [(u.email, m.role) for u, m in listed] == [("lead@example.org", "lead")]
    actions = session.scalars(select(AuditEvent.action)).all()
    assert actions == ["request.submitted"]


def test_name_must_be_free_among_live_teams(session: Session, people: dict[str, User]) -> None:
    submit(session, people["lead"], "nlp")
    with pytest.raises(InvalidInput) as caught:
        submit(session, people["other"], "nlp")
    assert "already has a cluster or a pending request" in caught.value.errors["name"]


def test_rejected_name_can_be_requested_again(session: Session, people: dict[str, User]) -> None:
    first = submit(session, people["lead"], "nlp")
    service.reject(session, actor=people["admin"], request_id=first.id, reason="too big")
    assert first.team.status == TeamStatus.REJECTED
    again = submit(session, people["lead"], "nlp")
    assert again.team_id != first.team_id


def test_reject_needs_a_reason(session: Session, people: dict[str, User]) -> None:
    request = submit(session, people["lead"], "nlp")
    with pytest.raises(InvalidInput) as caught:
        service.reject(session, actor=people["admin"], request_id=request.id, reason="  ")
    assert "say why" in caught.value.errors["reason"]


def test_approve_as_asked_commits_quota_and_plans_steps(
    session: Session, people: dict[str, User]
) -> None:
    request = submit(session, people["lead"], "nlp")
    decision = service.approve(session, actor=people["admin"], request_id=request.id)
    team = request.team
    assert decision.changes == {}
    assert team.status == TeamStatus.APPROVED
    assert request.status == RequestStatus.APPROVED
    assert team.quota.gpu.guarantee == 33
    assert team.desired_generation == 1
    steps = session.scalars(
        select(ProvisioningStep.step)
        .where(ProvisioningStep.team_id == team.id)
        .order_by(ProvisioningStep.position)
    ).all()
    assert steps == ["queue", "namespace", "vcluster", "admission_policy", "kubeconfig"]
    assert repo.committed_gpu_centi(session, team.org_id) == 33


def test_approve_with_adjusted_values_records_changes(
    session: Session, people: dict[str, User]
) -> None:
    request = submit(session, people["lead"], "nlp", gpu_quota="0.5")
    decision = service.approve(
        session,
        actor=people["admin"],
        request_id=request.id,
        adjusted=parse_quota_fields(
            {**request_values("nlp"), "gpu_quota": "0.25", "gpu_limit": "0.75"}
        ),
        reason="pool is tight",
    )
    assert decision.changes == {"gpu_quota": ["0.5", "0.25"], "gpu_limit": ["1", "0.75"]}
    assert request.team.quota.gpu.guarantee == 25
    assert request.team.quota.gpu.limit == 75
    summary = session.scalars(
        select(AuditEvent.summary).where(AuditEvent.action == "request.adjusted")
    ).one()
    assert "GPU guarantee 0.5 → 0.25" in summary


def test_approval_past_the_pool_is_refused_with_what_is_free(
    session: Session, people: dict[str, User]
) -> None:
    for name in ("nlp", "vision", "recommender"):
        r = submit(session, people["lead"], name)
        service.approve(session, actor=people["admin"], request_id=r.id)
    extra = submit(session, people["other"], "speech", gpu_quota="0.05")
    with pytest.raises(Conflict) as caught:
        service.approve(session, actor=people["admin"], request_id=extra.id)
    message = caught.value.message
    assert "would commit 1.04 of the pool's 1 GPU; 0.01 GPU is free" in message
    assert extra.status == RequestStatus.SUBMITTED
    service.approve(
        session,
        actor=people["admin"],
        request_id=extra.id,
        adjusted=parse_quota_fields({**request_values("speech"), "gpu_quota": "0.01"}),
    )
    assert repo.committed_gpu_centi(session, extra.team.org_id) == 100


def test_a_request_is_decided_once(session: Session, people: dict[str, User]) -> None:
    request = submit(session, people["lead"], "nlp")
    service.approve(session, actor=people["admin"], request_id=request.id)
    with pytest.raises(Conflict, match="already approved"):
        service.reject(session, actor=people["admin"], request_id=request.id, reason="no")


def test_quota_change_goes_through_approval(session: Session, people: dict[str, User]) -> None:
    request = submit(session, people["lead"], "nlp")
    service.approve(session, actor=people["admin"], request_id=request.id)
    team = request.team
    with pytest.raises(Conflict, match="once it is ready"):
        service.submit_quota_change(
            session,
            actor=people["lead"],
            team=team,
            values=parse_quota_fields(request_values("nlp", gpu_quota="0.5")),
        )
    team.status = TeamStatus.READY
    with pytest.raises(InvalidInput, match="current values"):
        service.submit_quota_change(
            session,
            actor=people["lead"],
            team=team,
            values=parse_quota_fields(request_values("nlp")),
        )
    change = service.submit_quota_change(
        session,
        actor=people["lead"],
        team=team,
        values=parse_quota_fields(request_values("nlp", gpu_quota="0.5")),
    )
    with pytest.raises(Conflict, match="already has request"):
        service.submit_quota_change(
            session,
            actor=people["lead"],
            team=team,
            values=parse_quota_fields(request_values("nlp", gpu_quota="0.6")),
        )
    assert team.quota.gpu.guarantee == 33
    service.approve(session, actor=people["admin"], request_id=change.id)
    assert team.status == TeamStatus.READY
    assert team.quota.gpu.guarantee == 50
    assert team.desired_generation == 2


def test_quota_change_cannot_overcommit(session: Session, people: dict[str, User]) -> None:
    a = submit(session, people["lead"], "nlp", gpu_quota="0.5")
    b = submit(session, people["other"], "vision", gpu_quota="0.5")
    for r in (a, b):
        service.approve(session, actor=people["admin"], request_id=r.id)
    a.team.status = TeamStatus.READY
    change = service.submit_quota_change(
        session,
        actor=people["lead"],
        team=a.team,
        values=parse_quota_fields(request_values("nlp", gpu_quota="0.6")),
    )
    with pytest.raises(Conflict, match=r"0\.5 GPU is free"):
        service.approve(session, actor=people["admin"], request_id=change.id)


def test_decommission_returns_the_guarantee_only_when_done(
    session: Session, people: dict[str, User]
) -> None:
    request = submit(session, people["lead"], "nlp")
    service.approve(session, actor=people["admin"], request_id=request.id)
    team = request.team
    service.decommission(session, actor=people["lead"], team=team)
    assert team.status == TeamStatus.DECOMMISSIONING
    assert repo.committed_gpu_centi(session, team.org_id) == 33
    with pytest.raises(Conflict, match="only a live cluster"):
        service.decommission(session, actor=people["lead"], team=team)


def test_pool_cannot_shrink_below_guarantees(session: Session, people: dict[str, User]) -> None:
    request = submit(session, people["lead"], "nlp", gpu_quota="0.5")
    service.approve(session, actor=people["admin"], request_id=request.id)
    with pytest.raises(InvalidInput) as caught:
        service.update_pool(
            session,
            actor=people["admin"],
            data={"gpus": "0.4", "cpu_cores": "1", "memory_gb": "1"},
        )
    assert "enter at least 0.5" in caught.value.errors["gpus"]
    org = service.update_pool(
        session,
        actor=people["admin"],
        data={"gpus": "4", "cpu_cores": "64", "memory_gb": "512"},
    )
    assert org.capacity == {"gpu": 400, "cpu": 64_000, "memory": 512_000}


def test_audit_trail_is_append_only(session: Session, people: dict[str, User]) -> None:
    submit(session, people["lead"], "nlp")
    session.commit()
    with pytest.raises(DBAPIError, match="append-only"):
        session.execute(text("UPDATE audit_events SET summary = 'forged'"))
    session.rollback()
    with pytest.raises(DBAPIError, match="append-only"):
        session.execute(text("DELETE FROM audit_events"))
    session.rollback()


def test_status_filters_are_written_in_and_refuse_other_values(
    session: Session, people: dict[str, User]
) -> None:
    # Statuses go into the statement as constants (PostgreSQL re-planned a status
    # parameter on every run), so only the enums' own values may pass.
    from app.core.models import ClusterRequest, Team

    submit(session, people["lead"], "nlp")
    submit(session, people["other"], "cv")
    assert len(repo.get_requests(session, status=RequestStatus.SUBMITTED)) == 2
    assert repo.count_requests(session, status="approved") == 0
    keys = repo.get_team_keys(session, statuses=["submitted"], name_contains="")
    assert sorted(name for _, name in keys) == ["cv", "nlp"]
    assert repo.get_team_keys(session, statuses=["ready", "failed"], name_contains="") == []
    for query in (
        repo._requests_where(select(ClusterRequest.id), "submitted", None),
        repo._team_filter(select(Team.id), ["submitted", "failed"], ""),
        repo._teams_where(select(Team.id), None, ["ready"], ""),
    ):
        compiled = query.compile(dialect=session.get_bind().dialect)
        assert compiled.params == {}, str(compiled)
    with pytest.raises(ValueError):
        repo.count_requests(session, status="submitted' OR 'x'='x")
    with pytest.raises(ValueError):
        repo.get_team_keys(session, statuses=["ready') OR ('x'='x"], name_contains="")
