"""What one reconcile pass means for a team: a pure function, no database, no cluster.

The reconciler observes and applies steps, then asks ``decide`` what to record: each
step's new condition, the team's new status, when to look again and what to audit. The
writer in ``reconciler`` only copies the verdict onto the rows.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta
from enum import StrEnum
from typing import Any

from app.core.events import Event
from app.core.models import STEP_ORDER, Sleep, Step, StepStatus, TeamStatus
from app.provisioning.backend import DONE, OUTDATED, PROGRESSING, Observation, TeamSpec

POLL_SECONDS = 1.0
# Teams whose vCluster is being installed for the first time: no rollout turn needed.
FIRST_INSTALL = (TeamStatus.APPROVED, TeamStatus.PROVISIONING)


def backoff_seconds(attempts: int, *, base: float, cap: float) -> float:
    return float(min(cap, base * (2 ** max(0, attempts - 1))))


def next_recheck(due: datetime | None, now: datetime, every: timedelta) -> datetime:
    """When a ready team is next re-checked: one interval after it was due, not after it
    was reached, so each team keeps its place in the cycle. Re-checks spread over the
    interval stay spread after the worker was down or behind: its catching up re-checks
    the overdue teams at once, then each returns to its own time (counted from when it
    was reached, every team re-checked during one catching up would come due again
    together, interval after interval). Never sooner than half an interval from now."""
    if due is None or due > now:
        return now + every
    after = due + (now - due) // every * every + every  # the first of its times after now
    return after if after - now >= every / 2 else after + every


# --- the choices a pass makes between its cluster calls ---------------------------------


class StepChoice(StrEnum):
    """What a pass does with a step it has just observed."""

    KEEP = "keep"  # in place, or on its way: nothing to do
    UPGRADE = "upgrade"  # works at another chart or template version: in its rollout turn
    APPLY = "apply"  # missing, or must be (re)applied


def with_template(seen: Observation, step: Step, spec: TeamSpec) -> Observation:
    """A vCluster in place but not installed with the team's template is outdated."""
    if step == Step.VCLUSTER and seen.done and not spec.template_installed:
        message = f"{seen.message}; template {spec.template} is not installed yet"
        return Observation(OUTDATED, message, seen.version)
    return seen


def step_choice(seen: Observation, status: TeamStatus) -> StepChoice:
    """An outdated step of a team past its first install waits for its rollout turn; one
    neither in place nor progressing is applied (an outdated one of a first install too)."""
    if seen.state == OUTDATED and status not in FIRST_INSTALL:
        return StepChoice.UPGRADE
    if seen.state not in (DONE, PROGRESSING):
        return StepChoice.APPLY
    return StepChoice.KEEP


def is_repair(seen: Observation, status: TeamStatus, *, settled: bool) -> bool:
    """Applying a missing step of a ready team whose decision was applied: drift put back
    (not an outdated one: that is an upgrade)."""
    return status == TeamStatus.READY and settled and seen.state != OUTDATED


def check_template(
    status: TeamStatus, spec: TeamSpec, *, settled: bool, upgrading: bool, installed: bool
) -> bool:
    """Every step in place: is what the template installs still there? Not while its
    vCluster is upgraded or was just installed (it restarts), nor while it sleeps or wakes."""
    return (
        status == TeamStatus.READY
        and settled
        and template_to_check(spec)
        and not upgrading
        and not installed
    )


def template_to_check(spec: TeamSpec, *, installed_now: bool = False) -> bool:
    """The team's vCluster is awake and was installed (before, or by this pass:
    ``installed_now``) with a template that puts objects inside: something to check."""
    return (
        spec.sleep == Sleep.AWAKE
        and spec.has_template_objects
        and (spec.template_installed or installed_now)
    )


@dataclass(frozen=True)
class PassResult:
    """What a pass over one team saw and did."""

    status: TeamStatus  # the team's status when the pass began
    generation: int  # the desired generation the pass worked towards
    attempts: int  # failures in a row before the pass
    results: dict[Step, Observation] = field(default_factory=dict)
    failed_step: Step | None = None
    error: str | None = None
    repaired: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class TeamNow:
    """The team as the database holds it when the pass is recorded."""

    name: str
    status: TeamStatus
    desired_generation: int
    queue_name: str
    namespace: str
    vcluster_name: str
    steps: dict[Step, tuple[StepStatus, str]]  # condition and message per existing step row


@dataclass(frozen=True)
class Audit:
    action: Event
    summary: str
    details: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Timing:
    retry_base_seconds: float
    retry_max_seconds: float
    resync_seconds: float


@dataclass(frozen=True)
class Verdict:
    """What to write. ``None`` in a field means: leave it as it is."""

    steps: dict[Step, tuple[StepStatus, str]]  # only the steps whose condition changed
    status: TeamStatus | None = None
    attempts: int | None = None
    clear_error: bool = False
    error: str | None = None
    next_attempt_in: float | None = None  # seconds from now; None with ``idle`` clears it
    recheck: bool = False  # ``next_attempt_in`` is the resync interval (``next_recheck``)
    idle: bool = False  # nothing more to do: no next attempt
    observed_generation: int | None = None  # the desired quota is in the cluster
    became_ready: bool = False
    audits: list[Audit] = field(default_factory=list)


def decide(result: PassResult, team: TeamNow, timing: Timing) -> Verdict:
    steps = _step_conditions(result, team)
    if result.error is not None:
        return _failed(result, team, steps, timing)
    if result.status == TeamStatus.DECOMMISSIONING:
        return _decommissioning(result, team, steps)
    audits = []
    if result.repaired:
        audits.append(
            Audit(
                Event.DRIFT_REPAIRED,
                f"restored {team.name}: " + "; ".join(result.repaired),
                {"repaired": result.repaired},
            )
        )
    if not _all_done(result):
        return Verdict(
            steps,
            status=None if team.status == TeamStatus.READY else TeamStatus.PROVISIONING,
            clear_error=True,
            next_attempt_in=POLL_SECONDS,
            audits=audits,
        )
    caught_up = team.desired_generation == result.generation
    became_ready = team.status != TeamStatus.READY
    if became_ready:
        audits.append(_ready(team))
    return Verdict(
        steps,
        status=TeamStatus.READY,
        attempts=0,
        clear_error=True,
        # A decision made during the pass wants another pass at once.
        next_attempt_in=timing.resync_seconds if caught_up else 0.0,
        recheck=caught_up,
        observed_generation=result.generation if caught_up else None,
        became_ready=became_ready,
        audits=audits,
    )


def _decommissioning(
    result: PassResult, team: TeamNow, steps: dict[Step, tuple[StepStatus, str]]
) -> Verdict:
    if not _all_done(result):
        return Verdict(steps, next_attempt_in=POLL_SECONDS)
    return Verdict(
        steps,
        status=TeamStatus.DECOMMISSIONED,
        clear_error=True,
        idle=True,
        audits=[
            Audit(
                Event.DECOMMISSIONED,
                f"{team.name} decommissioned: vCluster, namespace, policy and queue "
                "deleted; the guarantee returned to the pool",
            )
        ],
    )


def _ready(team: TeamNow) -> Audit:
    return Audit(
        Event.TEAM_READY if team.status != TeamStatus.FAILED else Event.TEAM_RECOVERED,
        f"{team.name} is ready: queue {team.queue_name}, namespace "
        f"{team.namespace}, vCluster {team.vcluster_name}",
        {"queue": team.queue_name, "namespace": team.namespace, "vcluster": team.vcluster_name},
    )


def _all_done(result: PassResult) -> bool:
    return all(
        result.results.get(step) is not None and result.results[step].done for step in STEP_ORDER
    )


def _step_conditions(result: PassResult, team: TeamNow) -> dict[Step, tuple[StepStatus, str]]:
    changed: dict[Step, tuple[StepStatus, str]] = {}
    removing = result.status == TeamStatus.DECOMMISSIONING
    for step in STEP_ORDER:
        current_status, current_message = team.steps.get(step, (StepStatus.PENDING, ""))
        observed = result.results.get(step)
        if step == result.failed_step and result.error is not None:
            wanted = (StepStatus.FAILED, result.error)
        elif observed is not None:
            done = StepStatus.REMOVED if removing else StepStatus.DONE
            wanted = (done if observed.done else StepStatus.PROGRESSING, observed.message)
        else:
            continue
        if step not in team.steps or wanted != (current_status, current_message):
            changed[step] = wanted
    return changed


def _failed(
    result: PassResult, team: TeamNow, steps: dict[Step, tuple[StepStatus, str]], timing: Timing
) -> Verdict:
    assert result.error is not None
    attempts = result.attempts + 1
    delay = backoff_seconds(attempts, base=timing.retry_base_seconds, cap=timing.retry_max_seconds)
    step = result.failed_step.value if result.failed_step else "provisioning"
    audits = []
    # One audit entry per streak of failures (and every tenth retry), not per retry.
    if attempts == 1 or attempts % 10 == 0:
        audits.append(
            Audit(
                Event.PROVISIONING_FAILED,
                f"{step} failed for {team.name} (attempt {attempts}, next try in {delay:.0f}s): "
                f"{result.error}",
                {"step": step, "attempt": attempts, "error": result.error},
            )
        )
    return Verdict(
        steps,
        status=None if result.status == TeamStatus.DECOMMISSIONING else TeamStatus.FAILED,
        attempts=attempts,
        error=result.error,
        next_attempt_in=delay,
        audits=audits,
    )
