"""A team in the cluster's terms, as the portal's settings configure it: the one place
that turns a stored team into the ``TeamSpec`` every cluster call takes."""

from __future__ import annotations

import json
from dataclasses import replace
from typing import Any

from sqlalchemy.orm import Session

from app.catalog import service as catalog
from app.catalog.rules import deploy_values
from app.core.config import Settings
from app.core.models import Org, Team
from app.provisioning.backend import TeamSpec, spec_for
from app.teams import repository as teams


def spec_of(
    session: Session,
    team: Team,
    settings: Settings,
    org: Org | None = None,
    *,
    with_template: bool = True,
) -> TeamSpec:
    """``team``'s spec under its org (``org``, when the caller has read it already), with
    the configured queue label (``PORTAL_KAI_QUEUE_LABEL``) and org queue limit
    (``PORTAL_ORG_QUEUE_GPU_LIMIT``), and its cluster template rendered with the lead's
    parameters (``with_template=False``: without it, for a reader of the team's queues and
    namespace only)."""
    spec = spec_for(
        team,
        org if org is not None else teams.get_org(session),
        queue_label=settings.kai_queue_label,
        org_limit_is_pool=settings.org_queue_gpu_limit == "pool",
        pool_label=settings.node_pool_label_key,
    )
    version = team.template_version if with_template else None
    if version is None:
        return spec
    template = catalog.spec_of(version)
    values: dict[str, Any] = dict(template.vcluster_values)
    deploy = deploy_values(template, team.template_parameters or {})
    if deploy:
        values["experimental"] = {"deploy": {"vcluster": deploy}}
    return replace(
        spec,
        template=version.label,
        template_values=json.dumps(values, sort_keys=True),
        template_version_id=version.id,
        template_installed=team.template_installed_id == version.id,
        template_manifests=str(deploy.get("manifests", "")),
        template_charts=tuple((c.release, c.namespace) for c in template.charts),
        template_repair=template.repair_drift,
    )
