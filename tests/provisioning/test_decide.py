"""What a reconcile pass means for a team: the pure decision, without a database."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from app.core.models import STEP_ORDER, Step, StepStatus, TeamStatus
from app.provisioning.backend import DONE, PROGRESSING, Observation
from app.provisioning.decide import PassResult, TeamNow, Timing, decide, next_recheck

TIMING = Timing(retry_base_seconds=2, retry_max_seconds=60, resync_seconds=300)


def team(
    status: TeamStatus,
    *,
    generation: int = 1,
    steps: dict[Step, tuple[StepStatus, str]] | None = None,
) -> TeamNow:
    return TeamNow(
        name="nlp",
        status=status,
        desired_generation=generation,
        queue_name="team-nlp",
        namespace="vcluster-nlp",
        vcluster_name="nlp",
        steps=steps if steps is not None else {s: (StepStatus.PENDING, "") for s in STEP_ORDER},
    )


def all_done() -> dict[Step, Observation]:
    return {step: Observation(DONE, f"{step.value} ok") for step in STEP_ORDER}


def test_every_step_done_makes_the_team_ready_once() -> None:
    result = PassResult(TeamStatus.PROVISIONING, generation=1, attempts=2, results=all_done())
    verdict = decide(result, team(TeamStatus.PROVISIONING), TIMING)
    assert verdict.status == TeamStatus.READY
    assert verdict.attempts == 0
    assert verdict.clear_error
    assert verdict.became_ready
    assert verdict.observed_generation == 1
    assert verdict.next_attempt_in == 300
    assert [a.action for a in verdict.audits] == ["team.ready"]
    assert verdict.steps[Step.QUEUE] == (StepStatus.DONE, "queue ok")
    again = decide(result, team(TeamStatus.READY, steps=verdict.steps), TIMING)
    assert again.steps == {}
    assert again.audits == []
    assert not again.became_ready


def test_a_decision_during_the_pass_asks_for_another_pass_at_once() -> None:
    result = PassResult(TeamStatus.READY, generation=1, attempts=0, results=all_done())
    verdict = decide(result, team(TeamStatus.READY, generation=2), TIMING)
    assert verdict.next_attempt_in == 0.0
    assert verdict.observed_generation is None


def test_progress_keeps_polling_and_keeps_a_ready_team_ready() -> None:
    partial = {Step.QUEUE: Observation(DONE, "q"), Step.NAMESPACE: Observation(PROGRESSING, "n")}
    new = decide(PassResult(TeamStatus.APPROVED, 1, 0, partial), team(TeamStatus.APPROVED), TIMING)
    assert new.status == TeamStatus.PROVISIONING
    assert new.next_attempt_in == 1.0
    assert new.steps[Step.NAMESPACE] == (StepStatus.PROGRESSING, "n")
    ready = decide(PassResult(TeamStatus.READY, 1, 0, partial), team(TeamStatus.READY), TIMING)
    assert ready.status is None


def test_failure_backs_off_and_audits_the_first_and_every_tenth() -> None:
    def fail(attempts: int) -> tuple[float | None, list[str]]:
        result = PassResult(
            TeamStatus.PROVISIONING, 1, attempts, failed_step=Step.VCLUSTER, error="boom"
        )
        verdict = decide(result, team(TeamStatus.PROVISIONING), TIMING)
        assert verdict.status == TeamStatus.FAILED
        assert verdict.error == "boom"
        assert verdict.steps[Step.VCLUSTER] == (StepStatus.FAILED, "boom")
        return verdict.next_attempt_in, [a.summary for a in verdict.audits]

    assert fail(0) == (2.0, ["vcluster failed for nlp (attempt 1, next try in 2s): boom"])
    assert fail(1) == (4.0, [])
    assert fail(9)[0] == 60.0
    assert len(fail(9)[1]) == 1


def test_decommissioning_ends_when_every_step_is_removed() -> None:
    result = PassResult(TeamStatus.DECOMMISSIONING, 1, 0, all_done())
    verdict = decide(result, team(TeamStatus.DECOMMISSIONING), TIMING)
    assert verdict.status == TeamStatus.DECOMMISSIONED
    assert verdict.idle
    assert verdict.steps[Step.QUEUE] == (StepStatus.REMOVED, "queue ok")
    assert [a.action for a in verdict.audits] == ["team.decommissioned"]
    failing = PassResult(TeamStatus.DECOMMISSIONING, 1, 0, failed_step=Step.QUEUE, error="x")
    assert decide(failing, team(TeamStatus.DECOMMISSIONING), TIMING).status is None


EVERY = timedelta(seconds=300)
NOW = datetime(2026, 1, 1, 12, 0, tzinfo=UTC)


def test_a_recheck_on_time_is_next_one_interval_after_it_was_due() -> None:
    assert next_recheck(NOW - timedelta(seconds=2), NOW, EVERY) == NOW + timedelta(seconds=298)


def test_a_team_reached_late_keeps_its_time_in_the_cycle() -> None:
    """Overdue by more than an interval (the worker was down): its next time is the first
    of its own times after now, not an interval after it was reached."""
    due = NOW - timedelta(seconds=1_000)  # 3 intervals and 100 s ago
    assert next_recheck(due, NOW, EVERY) == NOW + timedelta(seconds=200)


def test_teams_reached_together_after_an_outage_stay_spread() -> None:
    dues = [NOW - timedelta(seconds=900 + 60 * i) for i in range(5)]
    nexts = [(next_recheck(due, NOW, EVERY) - NOW).total_seconds() for due in dues]
    # A minute apart, as they were due (the two that would come within half an
    # interval, one interval later).
    assert nexts == [300, 240, 180, 420, 360]


def test_a_recheck_is_never_sooner_than_half_an_interval() -> None:
    due = NOW - timedelta(seconds=290)  # its next own time would be 10 s from now
    assert next_recheck(due, NOW, EVERY) == NOW + timedelta(seconds=310)


def test_without_a_time_in_the_past_the_next_is_an_interval_from_now() -> None:
    assert next_recheck(None, NOW, EVERY) == NOW + EVERY
    assert next_recheck(NOW + timedelta(seconds=5), NOW, EVERY) == NOW + EVERY


def test_a_caught_up_ready_pass_is_a_recheck_and_one_behind_is_not() -> None:
    caught_up = decide(
        PassResult(TeamStatus.READY, generation=1, attempts=0, results=all_done()),
        team(TeamStatus.READY),
        TIMING,
    )
    assert caught_up.recheck
    assert caught_up.next_attempt_in == 300
    behind = decide(
        PassResult(TeamStatus.READY, generation=1, attempts=0, results=all_done()),
        team(TeamStatus.READY, generation=2),
        TIMING,
    )
    assert not behind.recheck
    assert behind.next_attempt_in == 0
