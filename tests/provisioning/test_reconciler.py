"""The reconciler: level-triggered, idempotent, resumable, retried, shared by processes."""

from __future__ import annotations

import threading
import time
from datetime import datetime, timedelta
from typing import Any

import pytest
from sqlalchemy import event, select, update
from sqlalchemy.orm import Session, sessionmaker

from app.access.credentials import Person
from app.adapters.simulated import SimulatedBackend
from app.core import metrics
from app.core.db import unit_of_work
from app.core.models import (
    AuditEvent,
    ClusterRequest,
    ProvisioningStep,
    RequestStatus,
    Step,
    Team,
    TeamSchedule,
    TeamStatus,
    User,
    utcnow,
)
from app.core.together import read_all
from app.provisioning.backend import spec_for
from app.provisioning.reconciler import Reconciler, backoff_seconds
from app.provisioning.repository import settle_rechecked
from app.teams import repository as repo
from app.teams import service
from app.teams.rules import parse_quota_fields
from tests.conftest import settings_for
from tests.factories import make_org, make_user, request_values, submit


def approved_team(factory: sessionmaker[Session], name: str = "nlp", **values: str) -> int:
    with unit_of_work(factory) as session:
        org = session.scalars(select(Team.org_id).limit(1)).first()
        if org is None:
            make_org(session, gpus="1")
            make_user(session, "admin@example.org", admin=True)
        admin = session.scalars(select(User).where(User.is_admin)).one()
        lead = make_user(session, f"lead-{name}@example.org")
        request = submit(session, lead, name, **values)
        service.approve(session, actor=admin, request_id=request.id)
        return request.team_id


def approve_quota_change(factory: sessionmaker[Session], team_id: int, **values: str) -> int:
    """The lead of ``nlp`` asks for a quota change and an admin approves it; its id."""
    with unit_of_work(factory) as session:
        team = repo.get_team(session, team_id)
        lead = session.scalars(select(User).where(User.email == "lead-nlp@example.org")).one()
        admin = session.scalars(select(User).where(User.is_admin)).one()
        change = service.submit_quota_change(
            session,
            actor=lead,
            team=team,
            values=parse_quota_fields(request_values("nlp", **values)),
        )
        service.approve(session, actor=admin, request_id=change.id)
        return change.id


def team_of(factory: sessionmaker[Session], team_id: int) -> Team:
    with factory() as session:
        found, steps = read_all(session, repo.team_for_pages(team_id))
        team = repo.attach_for_pages(session, team_id, found, steps)
        session.expunge_all()
        return team


def actions(factory: sessionmaker[Session], team_id: int) -> list[str]:
    with factory() as session:
        return list(
            session.scalars(
                select(AuditEvent.action)
                .where(AuditEvent.team_id == team_id)
                .order_by(AuditEvent.id)
            )
        )


def test_approved_team_becomes_ready(
    session_factory: sessionmaker[Session], reconciler: Reconciler, backend: SimulatedBackend
) -> None:
    team_id = approved_team(session_factory)
    assert reconciler.run_once() == 1
    team = team_of(session_factory, team_id)
    assert team.status == TeamStatus.READY
    assert [s.status for s in team.steps] == ["done"] * 5
    assert team.observed_generation == team.desired_generation == 1
    assert team.lease_owner is None
    assert actions(session_factory, team_id)[-1] == "team.ready"
    with session_factory() as session:
        request = session.scalars(select(ClusterRequest)).one()
        assert request.status == RequestStatus.APPLIED
    with session_factory() as session:
        spec = spec_for(repo.get_team(session, team_id), repo.get_org(session))
    person = Person(1, "lead@example.org", "lead", "cluster-admin")
    kubeconfig = backend.issue_credential(spec, person, ttl_seconds=3600).kubeconfig
    assert "SIMULATED" in kubeconfig
    assert "current-context: nlp/lead@example.org" in kubeconfig


def test_steps_wait_for_a_slow_control_plane(
    session_factory: sessionmaker[Session], db_url: str
) -> None:
    slow = SimulatedBackend(step_seconds=0.3)
    reconciler = Reconciler(session_factory, slow, settings_for(db_url), owner="w")
    team_id = approved_team(session_factory)
    reconciler.run_once()
    first = team_of(session_factory, team_id)
    assert first.status == TeamStatus.PROVISIONING
    assert [s.status for s in first.steps][:2] == ["progressing", "pending"]
    team = first
    deadline = time.monotonic() + 10
    while team.status != TeamStatus.READY and time.monotonic() < deadline:
        with unit_of_work(session_factory) as session:
            session.execute(update(TeamSchedule).values(next_attempt_at=utcnow()))
        reconciler.run_once()
        time.sleep(0.1)
        team = team_of(session_factory, team_id)
    assert team.status == TeamStatus.READY


def test_failures_are_recorded_retried_and_recovered(
    session_factory: sessionmaker[Session], reconciler: Reconciler, backend: SimulatedBackend
) -> None:
    team_id = approved_team(session_factory)
    backend.inject_failure(Step.VCLUSTER, team="nlp", times=2, message="helm timed out")
    reconciler.run_once()
    team = team_of(session_factory, team_id)
    assert team.status == TeamStatus.FAILED
    assert team.attempts == 1
    assert team.last_error == "simulated: helm timed out"
    steps = {s.step: s for s in team.steps}
    assert steps[Step.VCLUSTER].status == "failed"
    assert steps[Step.VCLUSTER].message == "simulated: helm timed out"
    assert steps[Step.NAMESPACE].status == "done"
    reconciler.run_once()
    assert team_of(session_factory, team_id).attempts == 2
    reconciler.run_once()
    team = team_of(session_factory, team_id)
    assert team.status == TeamStatus.READY
    assert team.attempts == 0
    assert team.last_error is None
    log = actions(session_factory, team_id)
    assert log.count("provisioning.failed") == 1, "one entry per streak, not per retry"
    assert log[-1] == "team.recovered"


def test_a_team_whose_spec_cannot_be_made_is_shown_failed_and_the_others_go_on(
    session_factory: sessionmaker[Session],
    reconciler: Reconciler,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import app.provisioning.reconciler as reconciler_module

    broken = approved_team(session_factory, "nlp")
    fine = approved_team(session_factory, "vision")
    from app.provisioning.specs import spec_of as real

    def spec_of(session: Session, team: Team, *args: Any, **kwargs: Any) -> Any:
        if team.id == broken:
            raise KeyError("replicas")
        return real(session, team, *args, **kwargs)

    monkeypatch.setattr(reconciler_module, "spec_of", spec_of)
    reconciler.run_once()
    assert team_of(session_factory, fine).status == TeamStatus.READY
    team = team_of(session_factory, broken)
    assert team.status == TeamStatus.FAILED
    assert team.attempts == 1
    assert team.last_error == "its cluster spec could not be made (KeyError: 'replicas')"
    assert team.lease_owner is None
    monkeypatch.setattr(reconciler_module, "spec_of", real)
    with unit_of_work(session_factory) as session:
        session.execute(update(TeamSchedule).values(next_attempt_at=utcnow()))
    reconciler.run_once()
    assert team_of(session_factory, broken).status == TeamStatus.READY


def test_backoff_grows_and_is_capped(
    session_factory: sessionmaker[Session], backend: SimulatedBackend, db_url: str
) -> None:
    assert [backoff_seconds(n, base=2, cap=60) for n in (1, 2, 3, 4, 5, 6, 7)] == [
        2,
        4,
        8,
        16,
        32,
        60,
        60,
    ]
    settings = settings_for(db_url, retry_base_seconds=30.0)
    reconciler = Reconciler(session_factory, backend, settings, owner="w")
    team_id = approved_team(session_factory)
    backend.inject_failure(Step.QUEUE, times=5)
    before = utcnow()
    reconciler.run_once()
    team = team_of(session_factory, team_id)
    assert team.next_attempt_at is not None
    assert team.next_attempt_at >= before + timedelta(seconds=29)
    assert reconciler.run_once() == 0, "not retried before the back-off ends"


def test_drift_is_repaired_and_audited(
    session_factory: sessionmaker[Session], reconciler: Reconciler, backend: SimulatedBackend
) -> None:
    team_id = approved_team(session_factory)
    reconciler.run_once()
    backend.delete_object(Step.QUEUE, "nlp")
    backend.delete_object(Step.ADMISSION_POLICY, "nlp")
    with unit_of_work(session_factory) as session:
        session.execute(update(TeamSchedule).values(next_attempt_at=utcnow()))
    reconciler.run_once()
    team = team_of(session_factory, team_id)
    assert team.status == TeamStatus.READY
    with session_factory() as session:
        event = session.scalars(
            select(AuditEvent).where(AuditEvent.action == "provisioning.drift_repaired")
        ).one()
    assert event.details["repaired"] == [
        "queue: queue team-nlp under ml-org does not exist",
        "admission_policy: admission policy pinning vcluster-nlp to team-nlp does not exist",
    ]


def test_steady_state_pass_changes_nothing(
    session_factory: sessionmaker[Session], reconciler: Reconciler, backend: SimulatedBackend
) -> None:
    team_id = approved_team(session_factory)
    reconciler.run_once()
    with unit_of_work(session_factory) as session:
        session.execute(update(TeamSchedule).values(next_attempt_at=utcnow()))
    before = actions(session_factory, team_id)
    calls = backend.calls
    reconciler.run_once()
    assert actions(session_factory, team_id) == before
    assert backend.calls - calls == 5, "one observation per step, no apply"


def test_quota_change_is_applied_to_the_queue(
    session_factory: sessionmaker[Session], reconciler: Reconciler, backend: SimulatedBackend
) -> None:
    team_id = approved_team(session_factory)
    reconciler.run_once()
    change_id = approve_quota_change(session_factory, team_id, gpu_quota="0.5")
    reconciler.run_once()
    with session_factory() as session:
        assert repo.get_request(session, change_id).status == RequestStatus.APPLIED
    usage_queue = backend._objects[(Step.QUEUE, "nlp")].spec
    assert usage_queue.gpu.quota == 0.5
    assert "quota_change.applied" in actions(session_factory, team_id)


def test_decommission_removes_everything_and_frees_the_pool(
    session_factory: sessionmaker[Session], reconciler: Reconciler, backend: SimulatedBackend
) -> None:
    team_id = approved_team(session_factory)
    reconciler.run_once()
    with unit_of_work(session_factory) as session:
        team = repo.get_team(session, team_id)
        lead = session.scalars(select(User).where(User.email == "lead-nlp@example.org")).one()
        service.decommission(session, actor=lead, team=team)
    reconciler.run_once()
    team = team_of(session_factory, team_id)
    assert team.status == TeamStatus.DECOMMISSIONED
    assert [s.status for s in team.steps] == ["removed"] * 5
    assert not [key for key in backend._objects if key[1] == "nlp"]
    with session_factory() as session:
        assert repo.committed_gpu_centi(session, team.org_id) == 0
    assert actions(session_factory, team_id)[-1] == "team.decommissioned"


def test_workers_never_claim_the_same_team(
    session_factory: sessionmaker[Session], backend: SimulatedBackend, db_url: str
) -> None:
    for i in range(8):
        approved_team(session_factory, f"t{i}", gpu_quota="0.1")
    workers = [
        Reconciler(session_factory, backend, settings_for(db_url), owner=f"w{i}") for i in range(4)
    ]
    claims: list[list[int]] = [[] for _ in workers]
    barrier = threading.Barrier(len(workers))

    def claim(i: int) -> None:
        barrier.wait(10)
        claims[i] = workers[i].claim(limit=8)

    threads = [threading.Thread(target=claim, args=(i,)) for i in range(len(workers))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    everything = [team_id for claimed in claims for team_id in claimed]
    assert sorted(everything) == sorted(set(everything)), claims
    assert len(everything) == 8


def test_a_crashed_worker_is_taken_over_after_its_lease(
    session_factory: sessionmaker[Session], backend: SimulatedBackend, db_url: str
) -> None:
    team_id = approved_team(session_factory)
    crashed = Reconciler(session_factory, backend, settings_for(db_url), owner="crashed")
    assert crashed.claim() == [team_id]
    # It created the queue, then died before recording anything.
    with session_factory() as session:
        spec = spec_for(repo.get_team(session, team_id), repo.get_org(session))
    backend.apply(Step.QUEUE, spec)
    successor = Reconciler(session_factory, backend, settings_for(db_url), owner="successor")
    assert successor.run_once() == 0, "the lease still protects the team"
    with unit_of_work(session_factory) as session:
        session.execute(update(TeamSchedule).values(lease_until=utcnow() - timedelta(seconds=1)))
    assert successor.run_once() == 1
    assert team_of(session_factory, team_id).status == TeamStatus.READY
    assert len([key for key in backend._objects if key[1] == "nlp"]) == 4, "no duplicates"
    # The crashed worker's late answer is dropped: it no longer holds the lease.
    crashed.reconcile(team_id)
    assert team_of(session_factory, team_id).status == TeamStatus.READY


def test_a_pass_takes_each_team_once_even_when_left_due(
    session_factory: sessionmaker[Session], reconciler: Reconciler, monkeypatch: Any
) -> None:
    """A team whose pass leaves it due as it was (an unexpected failure gives its lease
    back; here every pass does) is not taken again in the same pass, and the pass ends."""
    ids = [approved_team(session_factory, f"t{i}", gpu_quota="0.1") for i in range(5)]
    passes: list[int] = []

    def leave_due(team_id: int) -> None:
        passes.append(team_id)
        if team_id == ids[0]:
            raise RuntimeError("boom")
        reconciler._release(team_id)  # given back, still due

    monkeypatch.setattr(reconciler, "reconcile", leave_due)
    assert reconciler.run_once() == 5
    assert sorted(passes) == sorted(ids)
    # The next pass takes them again: they are still due.
    passes.clear()
    assert reconciler.run_once() == 5
    assert sorted(passes) == sorted(ids)


def test_a_catching_up_pass_claims_without_the_teams_it_has_seen(
    session_factory: sessionmaker[Session], reconciler: Reconciler, db_url: str
) -> None:
    """Each claim of a pass is the same statement, however many teams the pass has
    handled (a list of them sent with every claim cost a long pass O(N²))."""
    ids = [approved_team(session_factory, f"t{i}", gpu_quota="0.02") for i in range(45)]
    engine = session_factory.kw["bind"]
    claims: list[tuple[str, int]] = []

    def seen(_c: Any, _cur: Any, statement: str, parameters: Any, *_rest: Any) -> None:
        if "FROM team_schedules JOIN teams" in " ".join(statement.split()):
            claims.append((statement, len(parameters)))

    event.listen(engine, "before_cursor_execute", seen)
    try:
        assert reconciler.run_once() == len(ids)
    finally:
        event.remove(engine, "before_cursor_execute", seen)
    assert len(claims) == 4, "three claims of 20 and the empty one that ends the pass"
    assert len(set(claims)) == 1, claims
    assert all(team_of(session_factory, i).status == TeamStatus.READY for i in ids)


def test_an_approved_change_is_applied_not_reported_as_drift(
    session_factory: sessionmaker[Session], reconciler: Reconciler
) -> None:
    """A quota change and a pool change make the cluster differ on purpose: they are
    applied and audited as such, never listed as repairs of hand edits."""
    team_id = approved_team(session_factory)
    for _ in range(3):
        reconciler.run_once()
    assert team_of(session_factory, team_id).status == TeamStatus.READY
    with unit_of_work(session_factory) as session:
        admin = session.scalars(select(User).where(User.is_admin)).one()
        lead = session.scalars(select(User).where(User.email == "lead-nlp@example.org")).one()
        team = repo.get_team(session, team_id)
        change = service.submit_quota_change(
            session,
            actor=lead,
            team=team,
            values=parse_quota_fields({"gpu_quota": "0.5", "gpu_limit": "1"}),
        )
        service.approve(session, actor=admin, request_id=change.id)
    reconciler.run_once()
    with unit_of_work(session_factory) as session:
        admin = session.scalars(select(User).where(User.is_admin)).one()
        service.update_pool(
            session, actor=admin, data={"gpus": "2", "cpu_cores": "40", "memory_gb": "160"}
        )
    reconciler.run_once()
    recorded = actions(session_factory, team_id)
    assert "quota_change.applied" in recorded
    assert "provisioning.drift_repaired" not in recorded
    with session_factory() as session:
        request = session.get(ClusterRequest, change.id)
        assert request is not None
        assert request.status == RequestStatus.APPLIED


def _due_now(factory: sessionmaker[Session]) -> None:
    with unit_of_work(factory) as session:
        session.execute(update(TeamSchedule).values(next_attempt_at=utcnow()))


def _statements(engine: Any, into: list[str]) -> Any:
    def seen(_c: Any, _cur: Any, statement: str, *_rest: Any) -> None:
        into.append(" ".join(statement.split()))

    event.listen(engine, "before_cursor_execute", seen)
    return seen


def test_ready_teams_found_as_recorded_are_written_back_in_one_statement(
    session_factory: sessionmaker[Session], reconciler: Reconciler, backend: SimulatedBackend
) -> None:
    ids = [approved_team(session_factory, name, gpu_quota="0.1") for name in ("a", "b", "c")]
    reconciler.run_once()
    assert {team_of(session_factory, i).status for i in ids} == {TeamStatus.READY}
    _due_now(session_factory)
    before = {i: actions(session_factory, i) for i in ids}
    steps_before = {
        i: [(s.message, s.updated_at) for s in team_of(session_factory, i).steps] for i in ids
    }
    calls, counted = backend.calls, metrics.STEADY_RECHECKS._value.get()
    engine = session_factory.kw["bind"]
    statements: list[str] = []
    listener = _statements(engine, statements)
    started = utcnow()
    try:
        assert reconciler.run_once() == 3
    finally:
        event.remove(engine, "before_cursor_execute", listener)
    assert backend.calls - calls == 15, "five observations a team, nothing applied"
    updates = [s for s in statements if s.startswith("UPDATE")]
    assert len(updates) == 2, updates  # the claim, then the write-back of all three
    # The schedule's rows alone: the teams' own rows are not written by a re-check.
    assert updates[1].startswith("UPDATE team_schedules SET"), updates
    assert not [s for s in updates if s.startswith("UPDATE teams")], updates
    assert "lease_owner" in updates[1], updates
    assert not [s for s in statements if s.startswith("INSERT")], "no audit, no notice"
    assert metrics.STEADY_RECHECKS._value.get() - counted == 3
    resync = reconciler.timing.resync_seconds
    for i in ids:
        team = team_of(session_factory, i)
        assert team.lease_owner is None
        assert team.lease_until is None
        assert team.last_reconciled_at is not None
        assert team.last_reconciled_at >= started
        assert team.next_attempt_at is not None
        assert team.next_attempt_at >= started + timedelta(seconds=resync - 1)
        assert [(s.message, s.updated_at) for s in team.steps] == steps_before[i]
        assert actions(session_factory, i) == before[i]


def test_teams_rechecked_together_after_an_outage_keep_their_own_times(
    session_factory: sessionmaker[Session], reconciler: Reconciler
) -> None:
    """Due a minute apart before the worker was down for several intervals, reached in one
    pass: each is next due at its own time in the cycle, still a minute apart (counted
    from the pass, all would come due together again). The team whose steps changed meanwhile
    gets the full pass, and keeps its time too."""
    names = ("a", "b", "c")
    ids = [approved_team(session_factory, name, gpu_quota="0.1") for name in names]
    reconciler.run_once()
    every = timedelta(seconds=reconciler.timing.resync_seconds)
    now = utcnow()
    due = {team_id: now - 3 * every - timedelta(minutes=i) for i, team_id in enumerate(ids)}
    with unit_of_work(session_factory) as session:
        for team_id, when in due.items():
            session.execute(
                update(TeamSchedule)
                .where(TeamSchedule.team_id == team_id)
                .values(next_attempt_at=when)
            )
        session.execute(
            update(ProvisioningStep)
            .where(ProvisioningStep.team_id == ids[2], ProvisioningStep.step == Step.NAMESPACE)
            .values(message="an older message")
        )
    counted = metrics.STEADY_RECHECKS._value.get()
    assert reconciler.run_once() == 3
    assert metrics.STEADY_RECHECKS._value.get() - counted == 2  # the third: the full pass
    after: dict[int, datetime] = {}
    for team_id in ids:
        next_at = team_of(session_factory, team_id).next_attempt_at
        assert next_at is not None
        cycles = (next_at - due[team_id]) / every
        assert abs(cycles - round(cycles)) < 1e-6, (team_id, cycles)  # its own time
        assert next_at > utcnow()
        after[team_id] = next_at
    assert after[ids[0]] - after[ids[1]] == timedelta(minutes=1)


def test_a_ready_team_not_as_recorded_gets_the_full_pass(
    session_factory: sessionmaker[Session], reconciler: Reconciler, backend: SimulatedBackend
) -> None:
    """A step's message that changed is written; a deleted object is repaired and
    audited; the others of the same batch are written back together."""
    ids = [approved_team(session_factory, name, gpu_quota="0.1") for name in ("a", "b", "c")]
    reconciler.run_once()
    with unit_of_work(session_factory) as session:
        session.execute(
            update(ProvisioningStep)
            .where(ProvisioningStep.team_id == ids[0], ProvisioningStep.step == Step.NAMESPACE)
            .values(message="an older message")
        )
    backend.delete_object(Step.QUEUE, "b")
    _due_now(session_factory)
    counted = metrics.STEADY_RECHECKS._value.get()
    assert reconciler.run_once() == 3
    assert metrics.STEADY_RECHECKS._value.get() - counted == 1
    namespace = {s.step: s.message for s in team_of(session_factory, ids[0]).steps}
    assert namespace[Step.NAMESPACE] == "namespace vcluster-a is ready (simulated)"
    assert "provisioning.drift_repaired" in actions(session_factory, ids[1])
    assert (Step.QUEUE, "b") in backend._objects
    assert "provisioning.drift_repaired" not in actions(session_factory, ids[2])


def test_a_decision_during_the_recheck_is_applied_by_the_full_pass(
    session_factory: sessionmaker[Session], reconciler: Reconciler, backend: SimulatedBackend
) -> None:
    """An approval between the read and the write-back: the team is not written back as
    settled; the full pass applies the new quota (and marks the change applied)."""
    team_id = approved_team(session_factory)
    reconciler.run_once()
    _due_now(session_factory)
    observe = backend.observe
    decided: list[int] = []

    def observe_then_decide(step: Step, spec: Any) -> Any:
        seen = observe(step, spec)
        if not decided:
            decided.append(approve_quota_change(session_factory, team_id, gpu_quota="0.5"))
        return seen

    backend.observe = observe_then_decide  # type: ignore[method-assign]
    reconciler.run_once()
    team = team_of(session_factory, team_id)
    assert team.observed_generation == team.desired_generation == 2
    assert backend._objects[(Step.QUEUE, "nlp")].spec.gpu.quota == 0.5
    with session_factory() as session:
        assert repo.get_request(session, decided[0]).status == RequestStatus.APPLIED


def _claimed_ready(
    factory: sessionmaker[Session], reconciler: Reconciler, names: tuple[str, ...]
) -> tuple[list[int], dict[int, datetime | None]]:
    """Ready teams, due and claimed by ``reconciler``; when each was due."""
    ids = [approved_team(factory, name, gpu_quota="0.1") for name in names]
    reconciler.run_once()
    _due_now(factory)
    assert sorted(reconciler.claim()) == sorted(ids)
    return ids, {i: team_of(factory, i).next_attempt_at for i in ids}


def test_the_write_back_needs_the_lease_and_a_settled_ready_team(
    session_factory: sessionmaker[Session], reconciler: Reconciler
) -> None:
    ids, due = _claimed_ready(session_factory, reconciler, ("a", "b", "c"))
    now = utcnow()
    with unit_of_work(session_factory) as session:
        session.execute(update(Team).where(Team.id == ids[1]).values(attempts=1))
        session.execute(
            update(Team)
            .where(Team.id == ids[2])
            .values(desired_generation=Team.desired_generation + 1)
        )
        times = {i: (due[i], now) for i in ids}
        assert settle_rechecked(session, times=times, owner="someone else", now=now) == set()
        assert settle_rechecked(session, times=times, owner=reconciler.owner, now=now) == {ids[0]}


def test_the_write_back_leaves_a_team_scheduled_anew_meanwhile(
    session_factory: sessionmaker[Session], reconciler: Reconciler
) -> None:
    """Its next attempt set to now after the re-check read it (a decision, a rollout's
    nudge): the write-back must not put it back an interval later."""
    ids, due = _claimed_ready(session_factory, reconciler, ("a", "b"))
    nudged = utcnow()
    with unit_of_work(session_factory) as session:
        session.execute(
            update(TeamSchedule)
            .where(TeamSchedule.team_id == ids[1])
            .values(next_attempt_at=nudged)
        )
    now = utcnow()
    with unit_of_work(session_factory) as session:
        written = settle_rechecked(
            session,
            times={i: (due[i], now + timedelta(minutes=5)) for i in ids},
            owner=reconciler.owner,
            now=now,
        )
    assert written == {ids[0]}
    assert team_of(session_factory, ids[1]).next_attempt_at == nudged


def test_a_chart_rollout_is_no_drift_at_the_upgrade_nor_at_the_next_resync(
    session_factory: sessionmaker[Session], db_url: str
) -> None:
    """The portal's own changes (here, a new chart version rolled out one team at a time)
    are never reported as repairs: not when the upgrade runs, nor at the resync after."""
    backend = SimulatedBackend(step_seconds=0, chart_version="0.36.0")
    before = Reconciler(
        session_factory, backend, settings_for(db_url, vcluster_chart_version="0.36.0"), owner="a"
    )
    ids = [approved_team(session_factory, name) for name in ("nlp", "vision")]
    for _ in range(4):
        before.run_once()
    assert {team_of(session_factory, i).vcluster_version for i in ids} == {"0.36.0"}
    backend.chart_version = "0.36.1"
    after = Reconciler(
        session_factory, backend, settings_for(db_url, vcluster_chart_version="0.36.1"), owner="b"
    )
    for _ in range(12):
        with unit_of_work(session_factory) as session:
            session.execute(update(TeamSchedule).values(next_attempt_at=utcnow()))
        after.run_once()
    assert {team_of(session_factory, i).vcluster_version for i in ids} == {"0.36.1"}
    for team_id in ids:
        assert "provisioning.drift_repaired" not in actions(session_factory, team_id)
