"""Cluster templates kept by admins: created, published in versions, chosen at request.

A version is written once and never changed (a change is the next version), so a team's
request, its decision and its vCluster each name the exact version they were made with.
Services flush, never commit."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from app.audit import service as audit
from app.catalog import repository as repo
from app.catalog.rules import (
    NAME,
    Carried,
    Chart,
    Parameter,
    TemplateSpec,
    carry_parameters,
    parse_parameters,
    parse_spec,
)
from app.catalog.schema import ValuesSchema
from app.core.db import Effect, request_effect
from app.core.errors import Conflict, InvalidInput, NotFound
from app.core.events import Event
from app.core.models import ClusterTemplate, Org, Team, TemplateVersion, User, utcnow
from app.core.text import is_number

DESCRIPTION_MAX = 2000
NOTE_MAX = 500


def stored(spec: TemplateSpec) -> dict[str, Any]:
    """A checked spec as its version row keeps it."""
    return {
        "manifests": spec.manifests,
        "charts": [
            {
                "name": c.name,
                "repo": c.repo,
                "version": c.version,
                "release": c.release,
                "namespace": c.namespace,
                "values": c.values,
            }
            for c in spec.charts
        ],
        "vcluster_values": dict(spec.vcluster_values),
        "parameters": [
            {
                "name": p.name,
                "label": p.label,
                "type": p.type,
                "default": p.default,
                "allowed": list(p.allowed),
            }
            for p in spec.parameters
        ],
        "default_quota": dict(spec.default_quota),
        "repair_drift": spec.repair_drift,
        # Only when set: a spec without it reads as it always did.
        **(
            {"sleep_after_hours": spec.sleep_after_hours}
            if spec.sleep_after_hours is not None
            else {}
        ),
    }


def spec_of(version: TemplateVersion) -> TemplateSpec:
    """The spec a version row keeps (checked when it was published)."""
    data = version.spec
    return TemplateSpec(
        manifests=str(data.get("manifests", "")),
        charts=tuple(Chart(**c) for c in data.get("charts", [])),
        vcluster_values=dict(data.get("vcluster_values", {})),
        parameters=tuple(
            Parameter(
                name=p["name"],
                label=p["label"],
                type=p["type"],
                default=p["default"],
                allowed=tuple(p.get("allowed", [])),
            )
            for p in data.get("parameters", [])
        ),
        default_quota=dict(data.get("default_quota", {})),
        repair_drift=bool(data.get("repair_drift", False)),
        sleep_after_hours=data.get("sleep_after_hours"),
    )


@dataclass(frozen=True)
class Offered:
    """A template as the pages list it: its newest version and what that installs."""

    template: ClusterTemplate
    latest: TemplateVersion
    spec: TemplateSpec
    teams: int = 0  # teams whose vCluster is wanted with one of its versions


@dataclass(frozen=True)
class Chosen:
    """The template a request asks for (or a decision approves), with its values."""

    version: TemplateVersion
    parameters: dict[str, str] = field(default_factory=dict)


def describe(version: TemplateVersion | None, parameters: Mapping[str, str]) -> str:
    """ "kubeflow-training v2 (version=1.8.1)", or "a plain vCluster"."""
    if version is None:
        return "a plain vCluster"
    text = version.label
    if parameters:
        text += " (" + ", ".join(f"{k}={v}" for k, v in sorted(parameters.items())) + ")"
    return text


def offered(session: Session) -> list[Offered]:
    """Every template with its newest version, the default first, then by name."""
    counts = repo.live_team_counts(session)
    return [
        Offered(template, version, spec_of(version), counts.get(template.id, 0))
        for template, version in repo.newest_versions(session)
    ]


def _text(value: object, *, what: str, limit: int, errors: dict[str, str], key: str) -> str:
    text = str(value or "").strip()
    if len(text) > limit:
        errors[key] = f"{what}: at most {limit} characters"
    return text


def create_template(
    session: Session,
    *,
    actor: User,
    name: str,
    description: str,
    raw_spec: Mapping[str, Any],
    schema: ValuesSchema,
    is_default: bool = False,
    leads_accept: bool = False,
    chart_sources: Sequence[str] = (),
) -> TemplateVersion:
    """A new template and its version 1; InvalidInput names every field to change.
    ``chart_sources``: where its charts may come from (PORTAL_TEMPLATE_CHART_SOURCES)."""
    errors: dict[str, str] = {}
    name = name.strip()
    if not NAME.fullmatch(name):
        errors["name"] = (
            "lower-case letters, digits and -, starting and ending with a letter or digit, "
            "at most 40 characters (e.g. kubeflow-training)"
        )
    elif repo.name_taken(session, name):
        errors["name"] = f"a template named {name} exists; choose another name"
    description = _text(
        description, what="the description", limit=DESCRIPTION_MAX, errors=errors, key="description"
    )
    spec = _checked(raw_spec, schema, errors, chart_sources)
    if errors or spec is None:
        raise InvalidInput(errors)
    if is_default:
        repo.clear_default(session)
    template = ClusterTemplate(
        name=name,
        description=description,
        is_default=is_default,
        leads_accept=leads_accept,
        created_by_id=actor.id,
    )
    try:
        with session.begin_nested():
            session.add(template)
            session.flush()
    except IntegrityError:
        raise InvalidInput(
            {"name": f"a template named {name} was created a moment ago; choose another name"}
        ) from None
    version = TemplateVersion(
        template=template, number=1, spec=stored(spec), note="", created_by_id=actor.id
    )
    session.add(version)
    session.flush()
    audit.record(
        session,
        actor=actor,
        event=Event.TEMPLATE_CREATED,
        summary=f"created cluster template {name} (version 1): {summary(spec)}",
        details={"template_id": template.id, "version": 1, "spec": version.spec},
    )
    return version


def publish_version(
    session: Session,
    *,
    actor: User,
    template_id: int,
    raw_spec: Mapping[str, Any],
    note: str,
    schema: ValuesSchema,
    chart_sources: Sequence[str] = (),
) -> TemplateVersion:
    """The template's next version; teams on an older one move to it in turn."""
    template = repo.get_template(session, template_id)
    errors: dict[str, str] = {}
    note = _text(note, what="the note", limit=NOTE_MAX, errors=errors, key="note")
    spec = _checked(raw_spec, schema, errors, chart_sources)
    if errors or spec is None:
        raise InvalidInput(errors)
    before = repo.latest(session, template_id)
    if stored(spec) == before.spec:
        raise InvalidInput(
            {"spec": f"this is version {before.number} as it stands: change something first"}
        )
    version = TemplateVersion(
        template=template,
        number=before.number + 1,
        spec=stored(spec),
        note=note,
        created_by_id=actor.id,
    )
    try:
        with session.begin_nested():
            session.add(version)
            session.flush()
    except IntegrityError:
        raise Conflict(
            f"another admin published version {before.number + 1} of {template.name} a "
            "moment ago; reload to see it"
        ) from None
    moved, held = ([], {}) if template.leads_accept else _roll_over(session, version, spec)
    added = [p for p in spec.parameters if p.name not in _declared(before)]
    audit.record(
        session,
        actor=actor,
        event=Event.TEMPLATE_PUBLISHED,
        summary=f"published {version.label}: {summary(spec)}"
        + (f" — {note}" if note else "")
        + _published_words(template.leads_accept, moved, held, added, before.number),
        details={
            "template_id": template.id,
            "version": version.number,
            "spec": version.spec,
            "teams": [t.name for t in moved],
            "held": held,
        },
    )
    if moved:
        request_effect(session, Effect.PROVISIONING_DUE)
    return version


def _roll_over(
    session: Session, version: TemplateVersion, spec: TemplateSpec
) -> tuple[list[Team], dict[str, str]]:
    """Every team on an older version moved to ``version`` (the reconciler takes them one
    at a time), but those whose values it refuses: team name -> what it refuses."""
    moved: list[Team] = []
    held: dict[str, str] = {}
    now = utcnow()
    for team in repo.teams_on_older(session, template_id=version.template_id, to=version):
        carried = carry_parameters(spec, team.template_parameters or {})
        if not carried.fits:
            held[team.name] = "; ".join(carried.refused.values())
            continue
        _move(team, version, carried)
        team.next_attempt_at = now  # the reconciler looks now; one team at a time
        moved.append(team)
    session.flush()
    return moved, held


def _published_words(
    leads_accept: bool,
    moved: Sequence[Team],
    held: Mapping[str, str],
    added: Sequence[Parameter],
    before: int,
) -> str:
    """What a publish did, after its summary: who moves, the new parameters' defaults,
    who stays."""
    words = ""
    if moved:
        words += f"; rolling out to {len(moved)} team" + ("s" if len(moved) != 1 else "")
    elif leads_accept:
        words += "; teams move when a lead accepts"
    if added:
        defaults = ", ".join(f"{p.label} = {p.default}" for p in added)
        words += "; new parameters start at their defaults: " + defaults
    if held:
        stay = "s stay" if len(held) != 1 else " stays"
        why = "; ".join(f"{name}: {reason}" for name, reason in held.items())
        words += (
            f"; {len(held)} team{stay} on v{before}, the new version refusing their values ({why})"
        )
    return words


def _declared(version: TemplateVersion) -> set[str]:
    return {str(p.get("name")) for p in version.spec.get("parameters", [])}


def _move(team: Team, version: TemplateVersion, carried: Carried) -> None:
    """``team`` wanted at ``version``, its parameters as the version takes them."""
    team.template_version_id = version.id
    team.template_parameters = carried.values


def accept_latest(
    session: Session, *, actor: User, team: Team, chosen: Mapping[str, str] | None = None
) -> TemplateVersion:
    """A lead moves the team to the newest version of its template (when the template
    waits for leads to accept), with ``chosen`` values for the parameters it names (a
    parameter the version adds, or one whose value it no longer allows)."""
    current = team.template_version
    if current is None:
        raise Conflict(f"team {team.name} has no cluster template")
    newest = repo.latest(session, current.template_id)
    if newest.id == current.id:
        raise Conflict(f"team {team.name} already has {current.label}")
    if team.status not in repo.UPGRADED_STATUSES:
        raise Conflict(f"team {team.name} is {team.status}: its template cannot change now")
    spec = spec_of(newest)
    chosen = dict(chosen or {})
    unknown = sorted(name for name in chosen if spec.parameter(name) is None)
    if unknown:
        raise InvalidInput(
            {f"parameters.{n}": f"{newest.label} has no such parameter" for n in unknown}
        )
    carried = carry_parameters(spec, {**(team.template_parameters or {}), **chosen})
    if not carried.fits:
        raise Conflict(
            f"{newest.label} does not allow what {team.name} chose ("
            + "; ".join(carried.refused.values())
            + "): choose an allowed value when moving, or ask an admin to allow it"
        )
    _move(team, newest, carried)
    team.next_attempt_at = utcnow()
    session.flush()
    audit.record(
        session,
        actor=actor,
        event=Event.TEMPLATE_ACCEPTED,
        team_id=team.id,
        summary=f"accepted {newest.label} for {team.name} (was v{current.number})",
        details={"template_id": newest.template_id, "from": current.number, "to": newest.number},
    )
    request_effect(session, Effect.PROVISIONING_DUE)
    return newest


def change_template(
    session: Session,
    *,
    actor: User,
    template_id: int,
    description: str,
    is_default: bool,
    leads_accept: bool,
) -> ClusterTemplate:
    template = repo.get_template(session, template_id)
    errors: dict[str, str] = {}
    description = _text(
        description, what="the description", limit=DESCRIPTION_MAX, errors=errors, key="description"
    )
    if errors:
        raise InvalidInput(errors)
    before = {
        "description": template.description,
        "is_default": template.is_default,
        "leads_accept": template.leads_accept,
    }
    if is_default and not template.is_default:
        repo.clear_default(session)
    template.description = description
    template.is_default = is_default
    template.leads_accept = leads_accept
    after = {"description": description, "is_default": is_default, "leads_accept": leads_accept}
    changed = [k for k in before if before[k] != after[k]]
    session.flush()
    if changed:
        audit.record(
            session,
            actor=actor,
            event=Event.TEMPLATE_CHANGED,
            summary=f"changed template {template.name}: " + ", ".join(changed),
            details={"template_id": template.id, "before": before, "after": after},
        )
    return template


def set_required(session: Session, *, actor: User, org: Org, required: bool) -> None:
    if org.require_template == required:
        return
    org.require_template = required
    session.flush()
    audit.record(
        session,
        actor=actor,
        event=Event.TEMPLATE_REQUIRED,
        summary="non-admins must now choose a cluster template"
        if required
        else "non-admins may now request a plain vCluster",
        details={"required": required},
    )


def choose(
    session: Session,
    *,
    template_id: int | None,
    parameters: Mapping[str, str],
    org: Org,
    admin: bool,
) -> Chosen | None:
    """The newest version of the chosen template with the lead's parameter values
    checked, or None for a plain vCluster (refused when the org requires a template and
    the person is no admin)."""
    if template_id is None:
        if org.require_template and not admin:
            raise InvalidInput({"template": "choose a cluster template: the org requires one"})
        if parameters:
            raise InvalidInput({"template": "parameters need a template: choose one"})
        return None
    try:
        version = repo.latest(session, template_id)
    except NotFound:
        raise InvalidInput({"template": f"no template #{template_id}; choose another"}) from None
    values = parse_parameters(spec_of(version), parameters)
    return Chosen(version, values)


def summary(spec: TemplateSpec) -> str:
    """What a version installs, in a line."""
    parts = []
    kinds = spec.manifest_kinds()
    if kinds:
        parts.append(f"{len(kinds)} manifest" + ("s" if len(kinds) != 1 else ""))
    if spec.charts:
        parts.append(", ".join(f"chart {c.name} {c.version}" for c in spec.charts))
    if spec.vcluster_values:
        parts.append("vCluster values")
    if spec.parameters:
        parts.append("parameters " + ", ".join(p.name for p in spec.parameters))
    return "; ".join(parts) or "nothing installed inside (a plain vCluster)"


def _checked(
    raw: Mapping[str, Any],
    schema: ValuesSchema,
    errors: dict[str, str],
    chart_sources: Sequence[str],
) -> TemplateSpec | None:
    if not isinstance(raw, Mapping):
        errors["spec"] = "a mapping: manifests, charts, vcluster_values, parameters, …"
        return None
    known = {
        "manifests",
        "charts",
        "vcluster_values",
        "parameters",
        "default_quota",
        "repair_drift",
        "sleep_after_hours",
    }
    unknown = sorted(set(raw) - known)
    if unknown:
        errors["spec"] = f"unknown field {', '.join(unknown)}: a template has " + ", ".join(
            sorted(known)
        )
        return None
    try:
        # Without the chart's schema the portal's own rules still say what is refused.
        spec = parse_spec(raw, schema.schema or {}, chart_sources)
    except InvalidInput as exc:
        errors.update(exc.errors)
        return None
    if schema.schema is None and spec.vcluster_values:
        errors["vcluster_values"] = (
            f"these cannot be checked against the vCluster chart's values.schema.json "
            f"({schema.source}: {schema.problem}): set PORTAL_VCLUSTER_VALUES_SCHEMA to the "
            "schema's path, or leave vcluster_values out"
        )
        return None
    return spec


def form_parameters(data: Mapping[str, str], template_id: int) -> dict[str, str]:
    """A template's parameter values from a form: fields ``param-<template>-<name>`` (each
    template's parameters have their own fields, so switching templates loses nothing)."""
    prefix = f"param-{template_id}-"
    return {k.removeprefix(prefix): v for k, v in data.items() if k.startswith(prefix)}


def choose_from_form(
    session: Session, data: Mapping[str, str], *, org: Org, admin: bool
) -> Chosen | None:
    """The template a form chose (field ``template``: a template's id, or empty for a
    plain vCluster) with its parameters; InvalidInput says what to change."""
    raw = str(data.get("template", "")).strip()
    if not raw:
        return choose(session, template_id=None, parameters={}, org=org, admin=admin)
    if not is_number(raw) or len(raw) > 9:
        raise InvalidInput({"template": "choose one of the templates listed"})
    template_id = int(raw)
    try:
        return choose(
            session,
            template_id=template_id,
            parameters=form_parameters(data, template_id),
            org=org,
            admin=admin,
        )
    except InvalidInput as exc:
        raise InvalidInput(
            {
                (
                    f"param-{template_id}-{key.removeprefix('parameters.')}"
                    if key.startswith("parameters.")
                    else key
                ): why
                for key, why in exc.errors.items()
            }
        ) from None
