"""The provisioning reconciler: level-triggered, idempotent, resumable.

Each pass claims due teams with a lease (so several portal processes can share one
database), compares what the database wants with what the backend reports and does only
the missing steps. Failures are recorded on the team and retried with exponential
backoff. Nothing is held in memory between passes: a crash loses at most one pass.
"""

from __future__ import annotations

import contextlib
import logging
import os
import socket
import threading
import time
import uuid
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from sqlalchemy.orm import Session, sessionmaker

from app.audit import service as audit
from app.core import metrics
from app.core.config import Settings
from app.core.db import Effect, request_effect, unit_of_work
from app.core.events import Event
from app.core.models import (
    STEP_ORDER,
    ProvisioningStep,
    RequestKind,
    RequestStatus,
    Sleep,
    Step,
    StepStatus,
    Team,
    TeamStatus,
    utcnow,
)
from app.notifications import events
from app.provisioning import repository as repo
from app.provisioning.backend import (
    ASLEEP,
    DONE,
    MISSING,
    OUTDATED,
    PROGRESSING,
    BackendError,
    ClusterBackend,
    Observation,
    TeamSpec,
    TemplateCheck,
)
from app.provisioning.decide import (
    POLL_SECONDS,
    PassResult,
    StepChoice,
    TeamNow,
    Timing,
    Verdict,
    backoff_seconds,
    check_template,
    decide,
    is_repair,
    next_recheck,
    step_choice,
    template_to_check,
    with_template,
)
from app.provisioning.sleep import wake_seconds
from app.provisioning.specs import spec_of
from app.teams import repository as teams

__all__ = ["POLL_SECONDS", "Reconciler", "backoff_seconds"]

log = logging.getLogger(__name__)


class Reconciler:
    def __init__(
        self,
        session_factory: sessionmaker[Session],
        backend: ClusterBackend,
        settings: Settings,
        *,
        owner: str | None = None,
    ) -> None:
        self.session_factory = session_factory
        self.backend = backend
        self.settings = settings
        self.owner = owner or f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:6]}"
        self.wake = threading.Event()
        # Set at shutdown: finish the team in hand, take no other, give every lease back.
        self.stopping = threading.Event()
        self.in_hand: int | None = None  # the team whose pass is running
        self._version_checked = False  # outdated teams looked at since this start
        self.worker = settings.worker  # its leases, back-off and resync
        self.timing = Timing(
            retry_base_seconds=self.worker.retry_base_seconds,
            retry_max_seconds=self.worker.retry_max_seconds,
            resync_seconds=self.worker.resync_seconds,
        )

    # --- claiming ------------------------------------------------------------------------

    def claim(
        self,
        limit: int = 20,
        *,
        due_by: datetime | None = None,
        exclude: frozenset[int] = frozenset(),
    ) -> list[int]:
        """Lease up to ``limit`` teams due by ``due_by`` (else now) to this worker; others
        skip them."""
        now = utcnow()
        until = now + timedelta(seconds=self.worker.lease_seconds)
        with unit_of_work(self.session_factory) as session:
            return repo.claim_due(
                session,
                owner=self.owner,
                now=now,
                until=until,
                limit=limit,
                due_by=due_by,
                exclude=exclude,
            )

    def run_once(self) -> int:
        """One pass over every due team; returns how many were reconciled."""
        handled = 0
        # Each team at most once per pass, however soon it is due again: the pass takes
        # the teams due when it began (every pass writes a team's next attempt later than
        # that), and leaves out the few it met again anyway (given back as they were, by
        # an unexpected failure). Leaving out every team seen, as a list sent with each
        # claim, cost a pass that catches up on N teams O(N²).
        began = utcnow()
        seen: set[int] = set()
        skipped: set[int] = set()
        started = time.perf_counter()
        if not self._version_checked:
            # A new chart version is configured by a restart: its rollout starts now, not
            # when the periodic check reaches the first team.
            with unit_of_work(self.session_factory) as session:
                repo.nudge_outdated(session, version=self.settings.chart_version, now=utcnow())
            self._version_checked = True
        try:
            while not self.stopping.is_set():
                claimed = self.claim(due_by=began, exclude=frozenset(skipped))
                if not claimed:
                    break
                again = [team_id for team_id in claimed if team_id in seen]
                for team_id in again:
                    self._release(team_id)
                skipped.update(again)
                team_ids = [team_id for team_id in claimed if team_id not in seen]
                if not team_ids:
                    continue
                seen.update(team_ids)
                if handled == 0:
                    # On failure each team's own calls fail and report the outage.
                    with contextlib.suppress(BackendError):
                        self.backend.begin_pass()
                # Ready teams found as recorded are written back together; the rest
                # (and any team that changed) get the full pass, one at a time.
                full = self.recheck_steady(team_ids)
                handled += len(team_ids) - len(full)
                for team_id in full:
                    if self.stopping.is_set():
                        break  # the rest stay claimed until release_all hands them back
                    self.in_hand = team_id
                    try:
                        self.reconcile(team_id)
                    except Exception:
                        log.exception("reconciling team %s failed unexpectedly", team_id)
                        self._release(team_id)
                        skipped.add(team_id)
                    finally:
                        self.in_hand = None
                    handled += 1
        finally:
            if handled:
                self.backend.end_pass()
                metrics.RECONCILE_PASS.observe(time.perf_counter() - started)
        return handled

    def release_all(self) -> int:
        """Give back every lease this worker holds, so another replica resumes at once;
        except the team whose pass is still running (its lease expires if we never finish
        it): two workers must never work on one team at once."""
        busy = self.in_hand
        with unit_of_work(self.session_factory) as session:
            released = repo.release_owned(
                session, owner=self.owner, keep=() if busy is None else (busy,)
            )
        if released:
            metrics.LEASES_RELEASED.inc(released)
        return released

    def _release(self, team_id: int) -> None:
        with unit_of_work(self.session_factory) as session:
            repo.release(session, team_id=team_id, owner=self.owner)

    # --- ready teams, re-checked together ------------------------------------------------

    def recheck_steady(self, team_ids: list[int]) -> list[int]:
        """The drift re-check of ready teams in one read and one write: each settled ready
        team (no error, no template to check inside, awake, not holding a rollout turn) has its
        steps observed, and those found exactly as recorded (done, same message, same
        chart) are written back together: re-checked now, next one resync interval after
        each was due (``next_recheck``). The full pass (``reconcile``) would write the
        same, at two transactions and seven statements a team (at 10,000 teams, 33
        re-checks a second in the web process cost a quarter of a core). Returns the
        teams that need the full pass, in order: every other team, and any whose
        observation differs or fails."""
        try:
            steady = self._observed_as_recorded(team_ids)
            if not steady:
                return team_ids
            now = utcnow()
            every = timedelta(seconds=self.timing.resync_seconds)
            with unit_of_work(self.session_factory) as session:
                written = repo.settle_rechecked(
                    session,
                    times={i: (due, next_recheck(due, now, every)) for i, due in steady.items()},
                    owner=self.owner,
                    now=now,
                )
        except Exception:
            log.exception("re-checking ready teams together failed; one at a time instead")
            return team_ids
        metrics.STEADY_RECHECKS.inc(len(written))
        return [team_id for team_id in team_ids if team_id not in written]

    def _observed_as_recorded(self, team_ids: list[int]) -> dict[int, datetime | None]:
        """The settled ready teams found as recorded, each with when it was due."""
        found: dict[int, datetime | None] = {}
        with self.session_factory() as session:
            holder, _ = repo.turn_holder(session, self.settings.chart_version)
            org = teams.get_org(session)
            for team in teams.get_teams(session, team_ids=team_ids, with_steps=True):
                recorded = {Step(row.step): row for row in team.steps}
                if not (
                    team.status == TeamStatus.READY
                    and team.observed_generation == team.desired_generation
                    and team.attempts == 0
                    and team.last_error is None
                    and team.template_version_id is None
                    and team.sleep == Sleep.AWAKE  # a sleep or a wake is work
                    and team.id != holder
                    and len(recorded) == len(STEP_ORDER)
                    and all(row.status == StepStatus.DONE for row in recorded.values())
                ):
                    continue
                spec = spec_of(session, team, self.settings, org)
                try:
                    same = all(
                        _as_recorded(self.backend.observe(step, spec), recorded[step], team)
                        for step in STEP_ORDER
                    )
                except BackendError:
                    same = False  # the full pass records the failure
                if same:
                    found[team.id] = team.next_attempt_at
        return found

    # --- one team ------------------------------------------------------------------------

    def reconcile(self, team_id: int) -> None:
        version = self.settings.chart_version
        with self.session_factory() as session:
            team = teams.get_team(session, team_id)
            status = TeamStatus(team.status)
            generation = team.desired_generation
            # A decision not yet applied explains any difference: that is no drift.
            settled = team.observed_generation == team.desired_generation
            attempts = team.attempts
            holder, turn_started = repo.turn_holder(session, version)
            unmade: str | None = None
            try:
                spec = spec_of(session, team, self.settings)
            except Exception as exc:  # bad data of this team: shown on it and retried
                log.exception("the cluster spec of team %s could not be made", team.name)
                unmade = f"its cluster spec could not be made ({type(exc).__name__}: {exc})"
        if unmade is not None:
            metrics.BACKEND_ERRORS.labels("none").inc()
            self._record(team_id, PassResult(status, generation, attempts, error=unmade))
            return
        one = _Pass(upgrading=holder == team_id)
        try:
            if status == TeamStatus.DECOMMISSIONING:
                self._remove_all(spec, one)
            elif self._apply_all(team_id, spec, status, settled, one):
                self._template_inside(spec, status, settled, one)
            one.failed_step = None
        except BackendError as exc:
            one.error = str(exc)
        except Exception as exc:  # a bug or an unexpected client error: shown, retried
            log.exception("backend call failed for team %s", spec.team)
            one.error = f"{type(exc).__name__}: {exc}"
        if one.error is not None:
            failed = one.failed_step.value if one.failed_step else "none"
            metrics.BACKEND_ERRORS.labels(failed).inc()
        if one.upgrading:
            self._upgrade_progress(
                team_id, spec, version, one.results.get(Step.VCLUSTER), one.error, turn_started
            )
        self._record(
            team_id,
            PassResult(
                status,
                generation,
                attempts,
                one.results,
                one.failed_step,
                one.error,
                one.repaired,
            ),
            installed=one.installed,
            checked=one.checked,
            sleep=(spec.sleep, one.sleep_seen) if one.sleep_seen is not None else None,
            check_soon=one.check_soon,
        )

    def _remove_all(self, spec: TeamSpec, one: _Pass) -> None:
        """Every step removed, last first; stops at one still going."""
        for step in reversed(STEP_ORDER):
            one.failed_step = step
            one.results[step] = self.backend.remove(step, spec)
            if not one.results[step].done:
                return

    def _apply_all(
        self, team_id: int, spec: TeamSpec, status: TeamStatus, settled: bool, one: _Pass
    ) -> bool:
        """Every step observed and applied or upgraded where it must be, in order; stops
        at one not in place yet. True when every step is in place."""
        for step in STEP_ORDER:
            one.failed_step = step
            seen = with_template(self.backend.observe(step, spec), step, spec)
            if step == Step.VCLUSTER:
                seen = self._to_sleep(spec, seen, one)
            choice = step_choice(seen, status)
            if choice == StepChoice.UPGRADE:
                # Upgraded in turn (one rollout turn for the chart and the template).
                wait = self._take_turn(team_id, self.settings.chart_version)
                if wait is None:
                    one.upgrading = True
                    seen = self.backend.apply(step, spec)
                    one.installed = spec.template_version_id
                else:
                    seen = Observation(DONE, f"{seen.message} — {wait}", seen.version)
            elif choice == StepChoice.APPLY:
                if is_repair(seen, status, settled=settled):
                    one.repaired.append(f"{step.value}: {seen.message}")
                seen = self.backend.apply(step, spec)
                if step == Step.VCLUSTER:
                    one.installed = spec.template_version_id
            one.results[step] = seen
            if not seen.done:
                return False
        return True

    def _to_sleep(self, spec: TeamSpec, seen: Observation, one: _Pass) -> Observation:
        """The vCluster paused or resumed where the team's sleep wants it (``spec.sleep``).
        Asleep as wanted counts as in place (no drift); a vCluster paused or resumed by
        hand (`vcluster pause`/`resume`) is taken as the team's new state, not undone."""
        wanted = spec.sleep
        if seen.state == ASLEEP and wanted == Sleep.WAKING:
            seen = self.backend.wake(spec)  # then as any vCluster starting
        if seen.state == ASLEEP:
            one.sleep_seen = Sleep.ASLEEP
            return Observation(DONE, seen.message, seen.version)
        if seen.state == MISSING:
            return seen  # installed first: nothing sleeps before it exists
        if wanted == Sleep.FALLING_ASLEEP:
            slept = self.backend.sleep(spec)
            if slept.state != ASLEEP:
                return slept  # its pods still go
            one.sleep_seen = Sleep.ASLEEP
            return Observation(DONE, slept.message, slept.version)
        if seen.state in (DONE, OUTDATED):
            one.sleep_seen = Sleep.AWAKE  # serving (an outdated one is upgraded in turn)
        return seen

    def _template_inside(
        self, spec: TeamSpec, status: TeamStatus, settled: bool, one: _Pass
    ) -> None:
        """Every step in place: what the template installs is checked now, or (just
        installed, upgraded or ready) at a pass shortly."""
        installed = one.installed is not None
        if check_template(
            status, spec, settled=settled, upgrading=one.upgrading, installed=installed
        ):
            self._check_template(spec, one)
        else:
            one.check_soon = template_to_check(spec, installed_now=installed)

    def _check_template(self, spec: TeamSpec, one: _Pass) -> None:
        """What the template installs, checked inside (and put back if it says so); a
        failed read is shown on the team page, not a failure of the team."""
        try:
            one.checked = self.backend.check_template(spec, repair=spec.template_repair)
        except BackendError as exc:
            one.checked = TemplateCheck(unread=str(exc))
        one.repaired += [f"template: {what} put back" for what in one.checked.repaired]

    # --- chart upgrades, one team at a time ----------------------------------------------

    def _take_turn(self, team_id: int, version: str) -> str | None:
        with unit_of_work(self.session_factory) as session:
            row = repo.rollout(session, version)
            first = row.state == "running" and row.team_id is None and not row.upgraded
            waits = repo.take_turn(session, version=version, team_id=team_id, now=utcnow())
            if waits is None and first:  # the first team of the rollout takes its turn
                count = repo.outdated_count(session, version)
                audit.record(
                    session,
                    actor=None,
                    event=Event.ROLLOUT_STARTED,
                    summary=f"vCluster rollout to chart {version} started: {count} "
                    f"team{'s' if count != 1 else ''} to move, one at a time",
                    details={"version": version, "teams": count},
                )
            return waits

    def _upgrade_progress(
        self,
        team_id: int,
        spec: TeamSpec,
        version: str,
        seen: Observation | None,
        error: str | None,
        started: datetime | None,
    ) -> None:
        """The turn holder's pass: done frees the turn for the next team; a failure, or a
        control plane still not ready after the time-out, stops the rollout."""
        now = utcnow()
        name = spec.team
        timeout = self.settings.vcluster.upgrade_timeout_seconds
        with unit_of_work(self.session_factory) as session:
            if seen is not None and seen.done and seen.version == version:
                if repo.finish_turn(session, version=version, team_id=team_id, now=now):
                    audit.record(
                        session,
                        actor=None,
                        event=Event.VCLUSTER_UPGRADED,
                        team_id=team_id,
                        summary=f"{name}'s vCluster upgraded to chart {version}"
                        + (
                            f" with template {spec.template}"
                            if spec.template and not spec.template_installed
                            else ""
                        ),
                        details={"version": version, "template": spec.template},
                    )
                    # The next team need not wait for its resync.
                    repo.nudge_outdated(session, version=version, now=now)
                    if not repo.outdated_count(session, version, besides=team_id):
                        self._rollout_done(session, version)
                return
            if error is not None:
                why = f"{name}: {error}"
            elif started is not None and (now - started).total_seconds() > timeout:
                message = seen.message if seen is not None else "no answer"
                why = f"{name} is not ready {timeout:.0f}s after its upgrade: {message}"
            else:
                return
            if repo.stop_rollout(session, version=version, error=why, now=now):
                audit.record(
                    session,
                    actor=None,
                    event=Event.ROLLOUT_STOPPED,
                    team_id=team_id,
                    summary=f"upgrade to chart {version} stopped: {why}",
                    details={"version": version, "error": why},
                )

    def _rollout_done(self, session: Session, version: str) -> None:
        """The last team of a rollout moved: one line says so, with how many moved."""
        row = repo.rollout(session, version)
        audit.record(
            session,
            actor=None,
            event=Event.ROLLOUT_DONE,
            summary=f"vCluster rollout to chart {version} done: every team is on it and on "
            f"its template's version ({row.upgraded} upgraded in turn so far)",
            details={"version": version, "upgraded": row.upgraded},
        )

    def _record(
        self,
        team_id: int,
        result: PassResult,
        *,
        installed: int | None = None,
        checked: TemplateCheck | None = None,
        sleep: tuple[Sleep, Sleep] | None = None,
        check_soon: bool = False,
    ) -> None:
        """Write what the pass means (``decide``) unless the team moved on meanwhile;
        ``installed``: the template version the vCluster was just installed with;
        ``check_soon``: its template's objects were not checked only for now;
        ``sleep``: the team's sleep when the pass began, and its vCluster as seen."""
        now = utcnow()
        with unit_of_work(self.session_factory) as session:
            team = teams.get_team(session, team_id)
            if team.lease_owner != self.owner:
                log.warning("lost the lease on team %s; dropping this pass", team.name)
                return
            team.lease_owner = team.lease_until = None
            if team.status != result.status:
                # Someone changed the team during the pass (e.g. decommission): redo now.
                team.next_attempt_at = now
                return
            # The team's lease fields are written with the rest below, in one UPDATE (an
            # autoflush here would send them on their own: two statements per re-check).
            with session.no_autoflush:
                rows = {row.step: row for row in teams.get_steps(session, team.id)}
            vcluster = result.results.get(Step.VCLUSTER)
            if vcluster is not None and vcluster.version and vcluster.state != PROGRESSING:
                # The version that serves the team (an upgrade counts once it is ready).
                team.vcluster_version = vcluster.version
            _template_seen(session, team, installed, checked, now=now)
            verdict = decide(result, _now(team, rows), self.timing)
            _write(session, team, rows, verdict)
            if check_soon and result.error is None and team.status == TeamStatus.READY:
                # Its template is checked inside once the vCluster has settled, not one
                # resync interval later: until then its page says it is not checked.
                soon = now + timedelta(seconds=TEMPLATE_CHECK_AFTER_SECONDS)
                if team.next_attempt_at is None or team.next_attempt_at > soon:
                    team.next_attempt_at = soon
            if sleep is not None:
                _sleep_seen(session, team, *sleep, now=now)
            if result.error is None and Sleep(team.sleep) in (Sleep.FALLING_ASLEEP, Sleep.WAKING):
                # Still on its way (installed first, say): looked at again shortly.
                team.next_attempt_at = now + timedelta(seconds=POLL_SECONDS)
            _tell(session, team)
            if result.error is not None and team.next_attempt_at is not None:
                metrics.RETRIES.inc()


def _template_seen(
    session: Session,
    team: Team,
    installed: int | None,
    checked: TemplateCheck | None,
    *,
    now: datetime,
) -> None:
    """What a pass did and saw of the team's template: the version its vCluster was just
    installed with (``installed``), and what of it was found inside (``checked``)."""
    if installed is not None:  # its install call succeeded, whatever came after
        if team.template_installed_id != installed:
            # A new version inside: what was found of the old one says nothing.
            team.template_checked_at, team.template_drift = None, None
        team.template_installed_id = installed
    if checked is not None and checked.unread:
        team.template_checked_at = None  # shown as not checked, with why below
        team.template_drift = f"could not be checked: {checked.unread}"
    elif checked is not None:
        left = checked.left
        if left and team.template_drift != "; ".join(left):
            audit.record(
                session,
                actor=None,
                event=Event.TEMPLATE_DRIFTED,
                team_id=team.id,
                summary=f"{team.name}'s vCluster lacks what its template installs: "
                + "; ".join(left),
                details={"missing": list(left)},
            )
        team.template_drift = "; ".join(left) or None
        team.template_checked_at = now


FAILURES_TOLD_AFTER = 3  # consecutive failed attempts before people are told
# A vCluster just ready deploys its template's objects itself: checked this much later.
TEMPLATE_CHECK_AFTER_SECONDS = 10.0


@dataclass
class _Pass:
    """What one pass over a team has seen and done so far."""

    upgrading: bool
    results: dict[Step, Observation] = field(default_factory=dict)
    installed: int | None = None  # the template version a vCluster install ran with
    checked: TemplateCheck | None = None  # what of the template is in place inside
    repaired: list[str] = field(default_factory=list)
    failed_step: Step | None = None
    error: str | None = None
    sleep_seen: Sleep | None = None  # the vCluster seen asleep or awake (serving)
    check_soon: bool = False  # its template's objects to be checked at a pass shortly


def _tell(session: Session, team: Team) -> None:
    """A cluster that still fails after its first retries is news to its leads and the
    admins, once per streak (a failure that a retry fixes at once tells nobody). A cluster
    that became ready is told with its own event (``team.ready``)."""
    after = TeamStatus(team.status)
    if after == TeamStatus.FAILED and team.attempts == FAILURES_TOLD_AFTER:
        events.record(
            session,
            Event.PROVISIONING_FAILING,
            actor=None,
            team=team,
            summary=f"told the leads and admins: provisioning {team.name} failed "
            f"{team.attempts} times in a row",
            facts={"attempts": team.attempts, "error": team.last_error or ""},
        )


def _sleep_seen(session: Session, team: Team, wanted: Sleep, seen: Sleep, *, now: datetime) -> None:
    """The team's sleep follows its vCluster as seen: asleep once paused, awake once it
    serves again; a pause or resume by hand is recorded as such. A sleep or wake asked
    during the pass is left for the next one (looked at now)."""
    current = Sleep(team.sleep)
    if current != wanted:
        team.next_attempt_at = now
        return
    if seen == Sleep.ASLEEP and current != Sleep.ASLEEP:
        if current == Sleep.AWAKE:  # nobody asked the portal: paused by hand
            team.sleep_reason = "paused outside the portal (vcluster pause)"
        team.sleep, team.asleep_since = Sleep.ASLEEP, now
        metrics.SLEEPS.inc()
        events.record(
            session,
            Event.VCLUSTER_ASLEEP,
            actor=None,
            team=team,
            summary=f"{team.name}'s vCluster {team.vcluster_name} is asleep: "
            f"{team.sleep_reason or 'paused'}",
            facts={"reason": team.sleep_reason, "wake_seconds": wake_seconds(session)},
        )
    elif seen == Sleep.AWAKE and current in (Sleep.ASLEEP, Sleep.WAKING):
        asked = team.sleep_asked_at if current == Sleep.WAKING else None
        seconds = (now - asked).total_seconds() if asked is not None else None
        if seconds is not None:
            metrics.WAKE_SECONDS.observe(seconds)
        how = (
            f"{seconds:.0f} s after it was asked to wake"
            if seconds is not None
            else "resumed outside the portal (vcluster resume)"
        )
        team.sleep, team.asleep_since = Sleep.AWAKE, None
        team.sleep_reason = ""
        events.record(
            session,
            Event.VCLUSTER_AWAKE,
            actor=None,
            team=team,
            summary=f"{team.name}'s vCluster {team.vcluster_name} is awake: {how}",
            facts={"seconds": round(seconds, 1) if seconds is not None else None},
        )


def _as_recorded(seen: Observation, row: ProvisioningStep, team: Team) -> bool:
    """An observation the full pass would record as no change at all."""
    return (
        seen.state == DONE
        and seen.message == row.message
        and (not seen.version or seen.version == team.vcluster_version)
    )


def _now(team: Team, rows: dict[Step, ProvisioningStep]) -> TeamNow:
    return TeamNow(
        name=team.name,
        status=TeamStatus(team.status),
        desired_generation=team.desired_generation,
        queue_name=team.queue_name,
        namespace=team.namespace,
        vcluster_name=team.vcluster_name,
        steps={step: (row.status, row.message) for step, row in rows.items()},
    )


def _write(
    session: Session, team: Team, rows: dict[Step, ProvisioningStep], verdict: Verdict
) -> None:
    now = utcnow()
    for position, step in enumerate(STEP_ORDER):
        row = rows.get(step)
        if row is None:
            row = ProvisioningStep(team_id=team.id, step=step, position=position, message="")
            session.add(row)
        if step in verdict.steps:
            row.status, row.message = verdict.steps[step]
            row.updated_at = now
            if row.status == StepStatus.DONE and not row.reached:
                row.reached = True
    team.last_reconciled_at = now
    if verdict.status is not None and verdict.status != team.status:
        team.status = verdict.status
        # Which teams hold a queue and which run work changed: cached shares are stale.
        request_effect(session, Effect.QUOTAS_CHANGED)
    if verdict.attempts is not None:
        team.attempts = verdict.attempts
    if verdict.error is not None:
        team.last_error = verdict.error
    elif verdict.clear_error:
        team.last_error = None
    if verdict.idle:
        team.next_attempt_at = None
    elif verdict.recheck and verdict.next_attempt_in is not None:
        every = timedelta(seconds=verdict.next_attempt_in)
        team.next_attempt_at = next_recheck(team.next_attempt_at, now, every)
    elif verdict.next_attempt_in is not None:
        team.next_attempt_at = now + timedelta(seconds=verdict.next_attempt_in)
    if verdict.became_ready:
        team.ready_at = team.ready_at or now
    if verdict.observed_generation is not None and (
        verdict.observed_generation != team.observed_generation
    ):
        # Newly in the cluster: the approved requests it carries are applied (a re-check
        # of a team already caught up has none to look for).
        team.observed_generation = verdict.observed_generation
        _mark_applied(session, team)
    for entry in verdict.audits:
        # A team that became ready is news to its leads (its template says so).
        events.record(
            session, entry.action, actor=None, team=team, summary=entry.summary, facts=entry.details
        )


def _mark_applied(session: Session, team: Team) -> None:
    """The approved requests of a team are now in the cluster."""
    for request in teams.get_requests(session, status=RequestStatus.APPROVED, team_ids=[team.id]):
        request.status = RequestStatus.APPLIED
        if request.kind == RequestKind.QUOTA_CHANGE:
            audit.record(
                session,
                actor=None,
                event=Event.QUOTA_CHANGE_APPLIED,
                team_id=team.id,
                summary=f"quota of {team.name} applied to queue {team.queue_name}",
                details={"request_id": request.id},
            )
