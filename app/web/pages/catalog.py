"""Admin pages: the cluster templates teams choose from, their versions, and whether
non-admins must choose one."""

from __future__ import annotations

import difflib
from collections.abc import Mapping, Sequence
from typing import Any

import yaml
from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse, Response

from app.catalog import repository as catalog_repo
from app.catalog import service as catalog
from app.catalog.rules import ALLOWED, TemplateSpec, load_yaml
from app.catalog.schema import values_schema
from app.core.db import discard_changes
from app.core.errors import DomainError, InvalidInput
from app.core.models import TemplateVersion
from app.teams import repository as repo
from app.web.deps import AdminPrincipal, FormDep, Id, SessionDep, SettingsDep
from app.web.templating import flash, redirect, render

router = APIRouter(prefix="/admin/templates", include_in_schema=False)

SPEC_MAX = 300 * 1024  # characters of the YAML a form sends
ALLOWED_KEYS = [".".join(key) for key in ALLOWED]  # what the form's hint lists

EXAMPLE = """\
# What a vCluster of this kind gets. Every field may be left out.
manifests: |
  apiVersion: v1
  kind: Namespace
  metadata:
    name: training
parameters:
  - name: version
    label: Training Operator version
    type: choice          # choice, string, integer or boolean
    allowed: [v1.8.1, v1.7.0]
    default: v1.8.1
charts:
  - name: training-operator
    repo: oci://registry.example.org/charts
    version: ${version}
    namespace: kubeflow
vcluster_values:          # only the keys listed below
  controlPlane:
    statefulSet:
      resources:
        limits: {memory: 6Gi}
default_quota: {gpu_quota: "1", gpu_limit: "2"}
repair_drift: true        # put back what a team deletes of it
"""


def spec_text(spec: Mapping[str, Any]) -> str:
    """A stored spec as the form shows it: YAML, the manifests as a block."""

    class Literal(yaml.SafeDumper):
        pass

    def text(dumper: yaml.SafeDumper, value: str) -> yaml.ScalarNode:
        style = "|" if "\n" in value else None
        return dumper.represent_scalar("tag:yaml.org,2002:str", value, style=style)

    Literal.add_representer(str, text)
    shown = {k: v for k, v in spec.items() if v not in ("", [], {}, False)}
    return yaml.dump(shown, Dumper=Literal, sort_keys=False, allow_unicode=True) if shown else ""


def _parse_yaml(text: str) -> dict[str, Any]:
    if len(text) > SPEC_MAX:
        raise InvalidInput({"spec": f"at most {SPEC_MAX // 1024} KiB of YAML"})
    try:
        raw = load_yaml(text) if text.strip() else {}
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        at = f" at line {mark.line + 1}" if mark is not None else ""
        raise InvalidInput({"spec": f"not YAML{at}: {getattr(exc, 'problem', exc)}"}) from None
    if not isinstance(raw, dict):
        raise InvalidInput({"spec": "a mapping: manifests, charts, vcluster_values, …"})
    return raw


def _list_page(
    request: Request,
    session: SessionDep,
    principal: AdminPrincipal,
    settings: SettingsDep,
    *,
    values: Mapping[str, str] | None = None,
    errors: Mapping[str, str] | None = None,
    status_code: int = 200,
) -> Response:
    schema = values_schema(settings) if errors else None
    return render(
        request,
        "admin/templates.html",
        {
            "principal": principal,
            "org": repo.get_org(session),
            "offered": catalog.offered(session),
            "summary": catalog.summary,
            "values": values or {"spec": EXAMPLE},
            "errors": errors or {},
            "allowed": ALLOWED_KEYS,
            "schema": schema,
        },
        status_code=status_code,
    )


@router.get("", response_class=HTMLResponse)
def templates_page(
    request: Request, session: SessionDep, principal: AdminPrincipal, settings: SettingsDep
) -> Response:
    return _list_page(request, session, principal, settings)


@router.post("")
def create_template(
    request: Request,
    session: SessionDep,
    principal: AdminPrincipal,
    settings: SettingsDep,
    data: FormDep,
) -> Response:
    try:
        version = catalog.create_template(
            session,
            actor=principal.user,
            name=data.get("name", ""),
            description=data.get("description", ""),
            raw_spec=_parse_yaml(data.get("spec", "")),
            schema=values_schema(settings),
            chart_sources=settings.chart_sources,
            is_default=data.get("is_default") == "on",
            leads_accept=data.get("leads_accept") == "on",
        )
    except InvalidInput as exc:
        discard_changes(session)
        return _list_page(
            request, session, principal, settings, values=data, errors=exc.errors, status_code=422
        )
    flash(request, f"Template {version.label} is offered to teams.")
    return redirect(request, f"/admin/templates/{version.template_id}")


@router.post("/required")
def set_required(
    request: Request, session: SessionDep, principal: AdminPrincipal, data: FormDep
) -> Response:
    required = data.get("required") == "on"
    catalog.set_required(
        session, actor=principal.user, org=repo.get_org(session), required=required
    )
    flash(
        request,
        "Non-admins must now choose a template."
        if required
        else "Non-admins may request a plain vCluster.",
    )
    return redirect(request, "/admin/templates")


def _detail(
    request: Request,
    session: SessionDep,
    principal: AdminPrincipal,
    settings: SettingsDep,
    template_id: int,
    *,
    values: Mapping[str, str] | None = None,
    errors: Mapping[str, str] | None = None,
    status_code: int = 200,
) -> Response:
    template = catalog_repo.get_template(session, template_id)
    versions = catalog_repo.versions(session, template_id)
    offered = next(o for o in catalog.offered(session) if o.template.id == template_id)
    return render(
        request,
        "admin/template.html",
        {
            "principal": principal,
            "template": template,
            "offered": offered,
            "versions": _with_changes(versions),
            "summary": catalog.summary,
            "values": values or {"spec": spec_text(versions[0].spec)},
            "errors": errors or {},
            "allowed": ALLOWED_KEYS,
            "schema": values_schema(settings) if errors else None,
        },
        status_code=status_code,
    )


def _with_changes(
    versions: Sequence[TemplateVersion],
) -> list[tuple[TemplateVersion, TemplateSpec, str, list[tuple[str, str]]]]:
    """Each version (newest first) with its spec, its text and what changed from the
    version before it, as (kind, line) pairs: "add", "del", "same" or "hunk"."""
    texts = [spec_text(v.spec) for v in versions]
    found = []
    for i, version in enumerate(versions):
        older = texts[i + 1] if i + 1 < len(texts) else None
        found.append((version, catalog.spec_of(version), texts[i], spec_diff(older, texts[i])))
    return found


def spec_diff(older: str | None, newer: str) -> list[tuple[str, str]]:
    """What changed from ``older`` to ``newer`` (none for a first version), with three
    lines of context around each change."""
    if older is None:
        return []
    lines = difflib.unified_diff(older.splitlines(), newer.splitlines(), n=3, lineterm="")
    kinds = {"+": "add", "-": "del", " ": "same", "@": "hunk"}
    return [
        (kinds.get(line[:1], "same"), line) for line in lines if not line.startswith(("+++", "---"))
    ]


@router.get("/{template_id}", response_class=HTMLResponse)
def template_page(
    request: Request,
    template_id: Id,
    session: SessionDep,
    principal: AdminPrincipal,
    settings: SettingsDep,
) -> Response:
    return _detail(request, session, principal, settings, template_id)


@router.post("/{template_id}/versions")
def publish_version(
    request: Request,
    template_id: Id,
    session: SessionDep,
    principal: AdminPrincipal,
    settings: SettingsDep,
    data: FormDep,
) -> Response:
    try:
        version = catalog.publish_version(
            session,
            actor=principal.user,
            template_id=template_id,
            raw_spec=_parse_yaml(data.get("spec", "")),
            note=data.get("note", ""),
            schema=values_schema(settings),
            chart_sources=settings.chart_sources,
        )
    except DomainError as exc:
        discard_changes(session)
        errors = exc.errors if isinstance(exc, InvalidInput) else {"spec": exc.message}
        return _detail(
            request,
            session,
            principal,
            settings,
            template_id,
            values=data,
            errors=errors,
            status_code=exc.status_code if exc.status_code >= 400 else 422,
        )
    flash(request, f"Published {version.label}.")
    return redirect(request, f"/admin/templates/{template_id}")


@router.post("/{template_id}/settings")
def change_settings(
    request: Request,
    template_id: Id,
    session: SessionDep,
    principal: AdminPrincipal,
    settings: SettingsDep,
    data: FormDep,
) -> Response:
    try:
        template = catalog.change_template(
            session,
            actor=principal.user,
            template_id=template_id,
            description=data.get("description", ""),
            is_default=data.get("is_default") == "on",
            leads_accept=data.get("leads_accept") == "on",
        )
    except InvalidInput as exc:
        discard_changes(session)
        return _detail(
            request, session, principal, settings, template_id, errors=exc.errors, status_code=422
        )
    flash(request, f"Template {template.name} saved.")
    return redirect(request, f"/admin/templates/{template_id}")
