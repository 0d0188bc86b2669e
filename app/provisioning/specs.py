"""A team in the cluster's terms, as the portal's settings configure it: the one place
that turns a stored team into the ``TeamSpec`` every cluster call takes."""

from __future__ import annotations

from sqlalchemy.orm import Session

from app.core.config import Settings
from app.core.models import Team
from app.provisioning.backend import TeamSpec, spec_for
from app.teams import repository as teams


def spec_of(session: Session, team: Team, settings: Settings) -> TeamSpec:
    """``team``'s spec under its org, with the configured queue label
    (``PORTAL_KAI_QUEUE_LABEL``) and org queue limit (``PORTAL_ORG_QUEUE_GPU_LIMIT``)."""
    return spec_for(
        team,
        teams.get_org(session),
        queue_label=settings.kai_queue_label,
        org_limit_is_pool=settings.org_queue_gpu_limit == "pool",
    )
