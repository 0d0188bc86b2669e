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
import uuid
from datetime import timedelta

from sqlalchemy import or_, select, update
from sqlalchemy.orm import Session, sessionmaker

from app.audit import service as audit
from app.config import Settings
from app.models import (
    ClusterRequest,
    ProvisioningStep,
    RequestKind,
    RequestStatus,
    Step,
    StepStatus,
    Team,
    TeamStatus,
    utcnow,
)
from app.provisioning.backend import (
    DONE,
    PROGRESSING,
    BackendError,
    ClusterBackend,
    Observation,
    spec_for,
)
from app.teams import repository as repo
from app.teams.service import STEP_ORDER

log = logging.getLogger(__name__)

WORK_STATUSES = (
    TeamStatus.APPROVED,
    TeamStatus.PROVISIONING,
    TeamStatus.FAILED,
    TeamStatus.READY,
    TeamStatus.DECOMMISSIONING,
)
POLL_SECONDS = 1.0


def backoff_seconds(attempts: int, *, base: float, cap: float) -> float:
    return float(min(cap, base * (2 ** max(0, attempts - 1))))


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

    # --- claiming ------------------------------------------------------------------------

    def claim(self, limit: int = 20, *, exclude: frozenset[int] = frozenset()) -> list[int]:
        """Lease up to ``limit`` due teams to this worker; others skip them."""
        now = utcnow()
        lease_until = now + timedelta(seconds=self.settings.worker_lease_seconds)
        claimed: list[int] = []
        with self.session_factory() as session, session.begin():
            query = (
                select(Team.id)
                .where(
                    Team.status.in_(WORK_STATUSES),
                    or_(Team.next_attempt_at.is_(None), Team.next_attempt_at <= now),
                    or_(Team.lease_until.is_(None), Team.lease_until < now),
                )
                .order_by(Team.next_attempt_at)
                .limit(limit)
            )
            if exclude:
                query = query.where(Team.id.not_in(exclude))
            if session.bind is not None and session.bind.dialect.name == "postgresql":
                query = query.with_for_update(skip_locked=True)
            for team_id in session.scalars(query).all():
                result = session.execute(
                    update(Team)
                    .where(
                        Team.id == team_id,
                        or_(Team.lease_until.is_(None), Team.lease_until < now),
                    )
                    .values(lease_owner=self.owner, lease_until=lease_until)
                    .execution_options(synchronize_session=False)
                )
                if getattr(result, "rowcount", 0) == 1:
                    claimed.append(team_id)
        return claimed

    def run_once(self) -> int:
        """One pass over every due team; returns how many were reconciled."""
        # A backend may read the cluster once per pass instead of once per team.
        begin = getattr(self.backend, "begin_pass", None)
        end = getattr(self.backend, "end_pass", None)
        handled = 0
        seen: set[int] = set()
        try:
            while True:
                # Each team at most once per pass, however soon it is due again.
                team_ids = self.claim(exclude=frozenset(seen))
                if not team_ids:
                    break
                seen.update(team_ids)
                if begin is not None and handled == 0:
                    with contextlib.suppress(BackendError):  # each team reports an outage
                        begin()
                for team_id in team_ids:
                    try:
                        self.reconcile(team_id)
                    except Exception:
                        log.exception("reconciling team %s failed unexpectedly", team_id)
                        self._release(team_id)
                handled += len(team_ids)
        finally:
            if end is not None and handled:
                end()
        return handled

    def _release(self, team_id: int) -> None:
        with self.session_factory() as session, session.begin():
            session.execute(
                update(Team)
                .where(Team.id == team_id, Team.lease_owner == self.owner)
                .values(lease_owner=None, lease_until=None)
            )

    # --- one team ------------------------------------------------------------------------

    def reconcile(self, team_id: int) -> None:
        with self.session_factory() as session:
            team = repo.get_team(session, team_id)
            org = repo.get_org(session)
            spec = spec_for(team, org)
            status = TeamStatus(team.status)
            generation = team.desired_generation
            attempts = team.attempts
        results: dict[Step, Observation] = {}
        error: str | None = None
        failed_step: Step | None = None
        repaired: list[str] = []
        try:
            if status == TeamStatus.DECOMMISSIONING:
                for step in reversed(STEP_ORDER):
                    failed_step = step
                    results[step] = self.backend.remove(step, spec)
                    if not results[step].done:
                        break
            else:
                for step in STEP_ORDER:
                    failed_step = step
                    seen = self.backend.observe(step, spec)
                    if seen.state not in (DONE, PROGRESSING):
                        if status == TeamStatus.READY:
                            repaired.append(f"{step.value}: {seen.message}")
                        seen = self.backend.apply(step, spec)
                    results[step] = seen
                    if not seen.done:
                        break
            failed_step = None
        except BackendError as exc:
            error = str(exc)
        except Exception as exc:  # a bug or an unexpected client error: shown, retried
            log.exception("backend call failed for team %s", spec.team)
            error = f"{type(exc).__name__}: {exc}"
        self._record(team_id, status, generation, attempts, results, failed_step, error, repaired)

    def _record(
        self,
        team_id: int,
        status: TeamStatus,
        generation: int,
        attempts: int,
        results: dict[Step, Observation],
        failed_step: Step | None,
        error: str | None,
        repaired: list[str],
    ) -> None:
        now = utcnow()
        settings = self.settings
        with self.session_factory() as session, session.begin():
            team = repo.get_team(session, team_id)
            if team.lease_owner != self.owner:
                log.warning("lost the lease on team %s; dropping this pass", team.name)
                return
            if team.status != status:
                # Someone changed the team during the pass (e.g. decommission): redo now.
                team.next_attempt_at = now
                team.lease_owner = team.lease_until = None
                return
            steps = {s.step: s for s in repo.get_steps(session, team.id)}
            for position, step in enumerate(STEP_ORDER):
                row = steps.get(step)
                if row is None:
                    row = ProvisioningStep(team_id=team.id, step=step, position=position)
                    session.add(row)
                    steps[step] = row
                observed = results.get(step)
                new_status: str | None = None
                message = row.message
                if step == failed_step and error is not None:
                    new_status, message = StepStatus.FAILED, error
                elif observed is not None:
                    if status == TeamStatus.DECOMMISSIONING:
                        new_status = StepStatus.REMOVED if observed.done else StepStatus.PROGRESSING
                    else:
                        new_status = StepStatus.DONE if observed.done else StepStatus.PROGRESSING
                    message = observed.message
                if new_status is not None and (new_status != row.status or message != row.message):
                    row.status, row.message, row.updated_at = new_status, message, now

            team.lease_owner = None
            team.lease_until = None
            team.last_reconciled_at = now
            if error is not None:
                self._failed(session, team, status, attempts, failed_step, error)
                return
            if status == TeamStatus.DECOMMISSIONING:
                if all(results.get(s) is not None and results[s].done for s in STEP_ORDER):
                    team.status = TeamStatus.DECOMMISSIONED
                    team.next_attempt_at = None
                    team.last_error = None
                    audit.record(
                        session,
                        actor=None,
                        action="team.decommissioned",
                        team_id=team.id,
                        summary=f"{team.name} decommissioned: vCluster, namespace, policy and "
                        "queue deleted; the guarantee returned to the pool",
                    )
                else:
                    team.next_attempt_at = now + timedelta(seconds=POLL_SECONDS)
                return
            all_done = all(results.get(s) is not None and results[s].done for s in STEP_ORDER)
            if repaired:
                audit.record(
                    session,
                    actor=None,
                    action="provisioning.drift_repaired",
                    team_id=team.id,
                    summary=f"restored {team.name}: " + "; ".join(repaired),
                    details={"repaired": repaired},
                )
            if all_done:
                was = team.status
                team.status = TeamStatus.READY
                team.attempts = 0
                team.last_error = None
                team.next_attempt_at = now + timedelta(seconds=settings.worker_resync_seconds)
                if team.desired_generation == generation:
                    team.observed_generation = generation
                    self._mark_applied(session, team)
                else:
                    team.next_attempt_at = now
                if was != TeamStatus.READY:
                    team.ready_at = team.ready_at or now
                    audit.record(
                        session,
                        actor=None,
                        action="team.ready" if was != TeamStatus.FAILED else "team.recovered",
                        team_id=team.id,
                        summary=f"{team.name} is ready: queue {team.queue_name}, namespace "
                        f"{team.namespace}, vCluster {team.vcluster_name}",
                    )
            else:
                if team.status != TeamStatus.READY:
                    team.status = TeamStatus.PROVISIONING
                team.last_error = None
                team.next_attempt_at = now + timedelta(seconds=POLL_SECONDS)

    def _failed(
        self,
        session: Session,
        team: Team,
        status: TeamStatus,
        attempts: int,
        failed_step: Step | None,
        error: str,
    ) -> None:
        now = utcnow()
        team.attempts = attempts + 1
        team.last_error = error
        delay = backoff_seconds(
            team.attempts,
            base=self.settings.retry_base_seconds,
            cap=self.settings.retry_max_seconds,
        )
        team.next_attempt_at = now + timedelta(seconds=delay)
        if status != TeamStatus.DECOMMISSIONING:
            team.status = TeamStatus.FAILED
        step = failed_step.value if failed_step else "provisioning"
        # One audit entry per streak of failures and per changed error, not per retry.
        if team.attempts == 1 or team.attempts % 10 == 0:
            audit.record(
                session,
                actor=None,
                action="provisioning.failed",
                team_id=team.id,
                summary=f"{step} failed for {team.name} (attempt {team.attempts}, next try in "
                f"{delay:.0f}s): {error}",
                details={"step": step, "attempt": team.attempts, "error": error},
            )

    def _mark_applied(self, session: Session, team: Team) -> None:
        for request in session.scalars(
            select(ClusterRequest).where(
                ClusterRequest.team_id == team.id,
                ClusterRequest.status == RequestStatus.APPROVED,
            )
        ):
            request.status = RequestStatus.APPLIED
            if request.kind == RequestKind.QUOTA_CHANGE:
                audit.record(
                    session,
                    actor=None,
                    action="quota_change.applied",
                    team_id=team.id,
                    summary=f"quota of {team.name} applied to queue {team.queue_name}",
                    details={"request_id": request.id},
                )


class Worker:
    """Runs the reconciler in a background thread until stopped."""

    def __init__(self, reconciler: Reconciler, *, interval: float) -> None:
        self.reconciler = reconciler
        self.interval = interval
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="provisioning-worker", daemon=True)
        self._thread.start()

    def stop(self, timeout: float = 10.0) -> None:
        self._stop.set()
        self.reconciler.wake.set()
        if self._thread is not None:
            self._thread.join(timeout)

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                busy = self.reconciler.run_once()
            except Exception:
                log.exception("provisioning pass failed; retrying")
                busy = 0
            wait = min(self.interval, POLL_SECONDS) if busy else self.interval
            self.reconciler.wake.wait(wait)
            self.reconciler.wake.clear()
