"""Provisioning actions that pages and the API call: the kubeconfig hand-over."""

from __future__ import annotations

from sqlalchemy.orm import Session

from app.audit import service as audit
from app.core.errors import Conflict
from app.core.models import Team, TeamStatus, User
from app.provisioning.backend import BackendError, ClusterBackend, spec_for
from app.teams import repository as repo


def download_kubeconfig(
    session: Session, *, backend: ClusterBackend, actor: User, team: Team
) -> str:
    """Read the kubeconfig from the cluster now (it is never stored) and audit the download."""
    if team.status != TeamStatus.READY:
        raise Conflict(f"team {team.name} is {team.status}: the kubeconfig exists once it is ready")
    spec = spec_for(team, repo.get_org(session))
    try:
        text = backend.kubeconfig(spec)
    except BackendError as exc:
        raise Conflict(f"the kubeconfig could not be read from the cluster: {exc}") from exc
    audit.record(
        session,
        actor=actor,
        action="kubeconfig.downloaded",
        team_id=team.id,
        summary=f"downloaded the kubeconfig of {team.name}",
    )
    return text
