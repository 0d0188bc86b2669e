"""API: cluster templates (admins keep them; everyone signed in reads them to request)."""

from __future__ import annotations

from fastapi import APIRouter, Request, Response

from app.catalog import repository as catalog_repo
from app.catalog import service as catalog
from app.catalog.schema import values_schema
from app.teams import repository as repo
from app.web.deps import AdminPrincipal, CurrentPrincipal, Id, SessionDep, SettingsDep
from app.web.paging import PAGED, WindowDep, announce
from app.web.schemas import (
    PROBLEMS,
    TemplateIn,
    TemplateOut,
    TemplateSettingsIn,
    TemplatesRequiredOut,
    TemplateVersionIn,
)
from app.web.views.api import template_out

router = APIRouter(prefix="/api/v1", responses=PROBLEMS, tags=["templates"])


def _offered(session: SessionDep, template_id: int) -> catalog.Offered:
    catalog_repo.get_template(session, template_id)  # 404 when there is none
    return next(o for o in catalog.offered(session) if o.template.id == template_id)


@router.get("/templates", response_model=list[TemplateOut], responses=PAGED)
def list_templates(
    request: Request,
    response: Response,
    session: SessionDep,
    principal: CurrentPrincipal,
    window: WindowDep,
) -> list[TemplateOut]:
    """The cluster templates, the default first, then by name, each with its newest
    version; paged (`limit`, `offset`)."""
    everyone = catalog.offered(session)
    shown = window.of(everyone)
    announce(request, response, window, returned=len(shown), total=len(everyone))
    return [template_out(o) for o in shown]


@router.get("/templates/{template_id}", response_model=TemplateOut)
def get_template(template_id: Id, session: SessionDep, principal: CurrentPrincipal) -> TemplateOut:
    """One template with every version, newest first."""
    return template_out(_offered(session, template_id), catalog_repo.versions(session, template_id))


@router.post("/templates", response_model=TemplateOut, status_code=201)
def create_template(
    body: TemplateIn, session: SessionDep, principal: AdminPrincipal, settings: SettingsDep
) -> TemplateOut:
    """A new template at version 1 (admin). Its vCluster values are checked against the
    vCluster chart's own values.schema.json; what the portal owns is refused."""
    version = catalog.create_template(
        session,
        actor=principal.user,
        name=body.name,
        description=body.description,
        raw_spec=body.spec,
        schema=values_schema(settings),
        chart_sources=settings.chart_sources,
        is_default=body.is_default,
        leads_accept=body.leads_accept,
    )
    return template_out(_offered(session, version.template_id), [version])


@router.post("/templates/{template_id}/versions", response_model=TemplateOut, status_code=201)
def publish_version(
    template_id: Id,
    body: TemplateVersionIn,
    session: SessionDep,
    principal: AdminPrincipal,
    settings: SettingsDep,
) -> TemplateOut:
    """The template's next version (admin); the teams on it move to it one at a time."""
    catalog.publish_version(
        session,
        actor=principal.user,
        template_id=template_id,
        raw_spec=body.spec,
        note=body.note,
        schema=values_schema(settings),
        chart_sources=settings.chart_sources,
    )
    return template_out(_offered(session, template_id), catalog_repo.versions(session, template_id))


@router.patch("/templates/{template_id}", response_model=TemplateOut)
def change_template(
    template_id: Id, body: TemplateSettingsIn, session: SessionDep, principal: AdminPrincipal
) -> TemplateOut:
    """Change a template's description or settings (admin); a field left out keeps its
    value. What a template installs changes only by publishing a version."""
    template = catalog_repo.get_template(session, template_id)
    catalog.change_template(
        session,
        actor=principal.user,
        template_id=template_id,
        description=template.description if body.description is None else body.description,
        is_default=template.is_default if body.is_default is None else body.is_default,
        leads_accept=template.leads_accept if body.leads_accept is None else body.leads_accept,
    )
    return template_out(_offered(session, template_id))


@router.put("/templates-required", response_model=TemplatesRequiredOut)
def set_required(
    body: TemplatesRequiredOut, session: SessionDep, principal: AdminPrincipal
) -> TemplatesRequiredOut:
    """Whether non-admins must choose a cluster template when they request (admin)."""
    catalog.set_required(
        session, actor=principal.user, org=repo.get_org(session), required=body.required
    )
    return TemplatesRequiredOut(required=body.required)
