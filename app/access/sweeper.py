"""Keeps each vCluster's per-person ServiceAccounts equal to the people allowed.

Level-triggered, like the reconciler: every pass first revokes, in the database, the
grants whose holders may no longer hold them (whatever the event that should have done it
was), then, for each team with something pending (a revoked or expired grant whose account
may still exist) — and every ``kubeconfig_sweep_seconds`` for every team with grants —
lists the accounts in the vCluster and deletes those that serve no live grant. A failed
call is logged, counted and retried on the next pass; the team page shows the revocation
as pending meanwhile. One team's failure, whatever it is, never stops the pass for the
others.
"""

from __future__ import annotations

import logging
import threading
import time
from datetime import timedelta

from sqlalchemy.orm import Session, sessionmaker

from app.access import repository as repo
from app.access import service
from app.access.credentials import CredentialIssuer
from app.core import metrics
from app.core.config import Settings
from app.core.db import unit_of_work
from app.core.models import Sleep, TeamStatus, utcnow
from app.provisioning.backend import BackendError, TeamSpec
from app.provisioning.specs import spec_of
from app.teams import repository as teams

log = logging.getLogger(__name__)
# An account without a live grant younger than this may belong to a download whose
# transaction has not committed yet: left for the next pass.
GRACE = timedelta(seconds=120)


class Sweeper:
    def __init__(
        self,
        session_factory: sessionmaker[Session],
        backend: CredentialIssuer,
        settings: Settings,
    ) -> None:
        self.session_factory = session_factory
        self.backend = backend
        self.settings = settings
        self.wake = threading.Event()
        self.swept_at: dict[int, float] = {}  # team id -> monotonic time of its last sweep
        self.errors: dict[int, str] = {}  # team id -> the last failure, until it succeeds

    def run_once(self) -> int:
        """One pass; returns how many vClusters were swept."""
        with unit_of_work(self.session_factory) as session:
            service.revoke_unentitled(session, self.settings)
            open_teams = repo.teams_with_open_grants(session, utcnow())
        now = time.monotonic()
        due = [
            team_id
            for team_id, pending in open_teams.items()
            if pending
            or now - self.swept_at.get(team_id, 0.0) >= self.settings.kubeconfigs.sweep_seconds
        ]
        for team_id in due:
            try:
                self.sweep(team_id)
            except Exception as exc:  # a bug or bad data of one team: the others go on
                self.errors[team_id] = f"{type(exc).__name__}: {exc}"
                metrics.BACKEND_ERRORS.labels("kubeconfig access").inc()
                log.exception("revoking kubeconfigs of team %s failed unexpectedly", team_id)
        for gone in set(self.swept_at) - set(open_teams):
            self.swept_at.pop(gone, None)
        return len(due)

    def sweep(self, team_id: int) -> None:
        with self.session_factory() as session:
            team = teams.get_team(session, team_id)
            spec = spec_of(session, team, self.settings)
            status = TeamStatus(team.status)
        if status != TeamStatus.DECOMMISSIONED and spec.sleep != Sleep.AWAKE:
            return  # no API to call while it sleeps: swept once it is awake again
        try:
            if status == TeamStatus.DECOMMISSIONED:
                keep: set[str] = set()  # the vCluster and every account in it are gone
            else:
                keep = self._sweep_cluster(team_id, spec)
        except BackendError as exc:
            self.errors[team_id] = str(exc)
            metrics.BACKEND_ERRORS.labels("kubeconfig access").inc()
            log.warning("revoking kubeconfigs of team %s failed: %s", spec.team, exc)
            return
        self.errors.pop(team_id, None)
        self.swept_at[team_id] = time.monotonic()
        with unit_of_work(self.session_factory) as session:
            repo.mark_removed(session, team_id=team_id, keep=keep, now=utcnow())

    def _sweep_cluster(self, team_id: int, spec: TeamSpec) -> set[str]:
        # The cluster first, then the records: a download that commits in between is
        # seen as live (or, uncommitted, is younger than the grace period).
        accounts = self.backend.credential_accounts(spec)
        now = utcnow()
        with self.session_factory() as session:
            grants = repo.get_open_grants(session, team_id)
        live = {g.account for g in grants if g.revoked_at is None and g.expires_at > now}
        known = {g.account for g in grants}
        stale = {
            a.name: a.uid
            for a in accounts
            if a.name not in live and (a.name in known or now - a.created_at > GRACE)
        }
        if stale:
            # Only the accounts as listed: one made again since (a new download) stays.
            self.backend.revoke_credentials(spec, list(stale), uids=stale)
            log.info("deleted %d service account(s) in the vCluster of %s", len(stale), spec.team)
        return live
