"""Cluster templates: what a team's vCluster comes with, as an admin writes it and as it
is checked before it is kept.

A template version says what a vCluster of its kind gets: manifests applied inside it
and Helm charts installed inside it (vCluster's ``experimental.deploy.vcluster``),
values for the vCluster itself from a short list of allowed keys, default quota values,
and parameters a lead sets at request (``${name}`` in the manifests, a chart's version or
its values). Checked when saved: the manifests parse into Kubernetes objects, every
``${name}`` is a declared parameter, the charts name a source, the parameters' types and
allowed values agree with their defaults, and the vCluster values set nothing the portal
owns (the queue pinning, the pod sync, the kubelet proxies, node isolation, CoreDNS, the
control plane's reach) and pass the real chart's own ``values.schema.json``.
"""

from __future__ import annotations

import re
import secrets
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import SplitResult, urlsplit

import yaml
from jsonschema import Draft202012Validator

from app.core import outbound
from app.core.errors import InvalidInput
from app.core.labels import QUOTA_FIELDS, label
from app.core.quantities import parse_hundredths

NAME = re.compile(r"^[a-z0-9]([-a-z0-9]{0,38}[a-z0-9])?$")  # a DNS-1123 label, short
PARAMETER = re.compile(r"^[a-z][a-z0-9_]{0,30}$")
CHART_NAME = re.compile(r"^[a-z0-9][a-z0-9._-]{0,62}$")  # never a flag to helm
VERSION = re.compile(r"^[0-9A-Za-z^~<>=*][0-9A-Za-z.+_~^<>=*-]{0,62}$")  # no flag, no space
PLACEHOLDER = re.compile(r"\$\{([^}]*)\}")
PARAMETER_TYPES = ("choice", "string", "integer", "boolean")
CHART_SOURCES = ("https://", "http://", "oci://")
MANIFESTS_MAX = 256 * 1024  # characters of YAML
ALLOWED_MAX = 50  # a choice's allowed values
STRING_MAX = 200  # a string parameter's value

# What of the vCluster's own values a template may set (a key path and everything under
# it), and what it may not, with the reason a person reads when a template is refused.
ALLOWED: tuple[tuple[str, ...], ...] = (
    ("controlPlane", "statefulSet", "resources"),
    ("controlPlane", "statefulSet", "persistence"),
    ("sync", "toHost", "ingresses"),
    ("sync", "toHost", "persistentVolumeClaims"),
    ("sync", "toHost", "configMaps"),
    ("sync", "toHost", "secrets"),
    ("sync", "toHost", "networkPolicies"),
    ("sync", "toHost", "serviceAccounts"),
    ("sync", "fromHost", "storageClasses"),
    ("sync", "fromHost", "ingressClasses"),
    ("sync", "fromHost", "runtimeClasses"),
    ("sync", "fromHost", "csiDrivers"),
    ("sync", "fromHost", "csiNodes"),
    ("sync", "fromHost", "csiStorageCapacities"),
)
# The control plane's volume lists under controlPlane.statefulSet.persistence, and the
# volume sources they may use: neither reaches the node nor reads the namespace.
VOLUME_LISTS = ("addVolumes", "dataVolume", "binariesVolume")
VOLUME_SOURCES = ("emptyDir", "ephemeral")
OWNED: tuple[tuple[tuple[str, ...], str], ...] = (
    (
        ("sync", "toHost", "pods"),
        "the portal syncs pods itself: each gets the team's KAI queue, and service-account "
        "tokens stay out of annotations",
    ),
    (("sync", "fromHost", "nodes"), "the portal decides which nodes a team sees"),
    (("sync", "toHost", "priorityClasses"), "a host priority class would outrank other teams"),
    (
        ("sync", "toHost", "customResources"),
        "custom resources synced to the host reach past the team",
    ),
    (
        ("networking", "advanced", "proxyKubelets"),
        "the kubelet proxies would need nodes/proxy on the host, which no team should hold",
    ),
    (("controlPlane", "coredns"), "the portal writes CoreDNS with the team's queue pinning"),
    (("controlPlane", "distro"), "the portal sets the API server's sign-in"),
    (("controlPlane", "proxy"), "the portal sets the names the vCluster's certificate carries"),
    (("controlPlane", "service"), "the portal decides how the vCluster is reached"),
    (("controlPlane", "ingress"), "the portal decides how the vCluster is reached"),
    (("experimental",), "the template's manifests and charts go in their own fields"),
    (("policies",), "the portal's admission policy pins every pod to the team's queue"),
    (("rbac",), "the syncer's permissions are the portal's"),
    (("telemetry",), "telemetry is the portal's setting"),
)


@dataclass(frozen=True)
class Parameter:
    """What a lead may set at request."""

    name: str
    label: str
    type: str  # one of PARAMETER_TYPES
    default: str
    allowed: tuple[str, ...] = ()  # a choice's values

    def parse(self, given: str) -> str:
        """The value as it is rendered in, or ValueError saying what to change."""
        value = given.strip()
        if self.type == "choice":
            if value not in self.allowed:
                raise ValueError(f"choose one of {', '.join(self.allowed)}")
        elif self.type == "integer":
            if not re.fullmatch(r"-?[0-9]{1,9}", value):
                raise ValueError("a whole number, e.g. 3")
        elif self.type == "boolean":
            if value not in ("true", "false"):
                raise ValueError("true or false")
        elif (
            not value
            or len(value) > STRING_MAX
            or not re.fullmatch(r"[\w.:/@+=-]+", value)
            or value.startswith("-")
        ):
            raise ValueError(
                f"letters, digits and . : / @ + = - _ only, not starting with -, at most "
                f"{STRING_MAX} characters"
            )
        return value


@dataclass(frozen=True)
class Chart:
    """A Helm chart installed inside the vCluster."""

    name: str
    repo: str  # a chart repository (or its mirror), or oci://registry/path
    version: str
    release: str
    namespace: str
    values: str = ""  # YAML, as the chart takes it


@dataclass(frozen=True)
class TemplateSpec:
    """One version of a template, checked."""

    manifests: str = ""
    charts: tuple[Chart, ...] = ()
    vcluster_values: Mapping[str, Any] = field(default_factory=dict)
    parameters: tuple[Parameter, ...] = ()
    default_quota: Mapping[str, str] = field(default_factory=dict)
    repair_drift: bool = False
    # Idle hours before a team's cluster sleeps, for teams of this template that chose
    # none (None: the org's policy).
    sleep_after_hours: int | None = None

    def parameter(self, name: str) -> Parameter | None:
        return next((p for p in self.parameters if p.name == name), None)

    @property
    def plain(self) -> bool:
        """Nothing inside and nothing set: its clusters are plain vClusters."""
        return not (self.manifests.strip() or self.charts or self.vcluster_values) and not (
            self.parameters
        )

    def manifest_kinds(self) -> list[str]:
        """The manifests' objects as "Kind name" (e.g. "CustomResourceDefinition
        widgets.example.org"), in their order."""
        docs = load_yaml_all(PLACEHOLDER.sub("x", self.manifests))
        return [
            f"{d['kind']} {d['metadata']['name']}"
            for d in docs
            if isinstance(d, dict) and isinstance(d.get("metadata"), dict)
        ]


class _NoAliases(yaml.SafeLoader):
    """YAML as the safe loader reads it, but an alias (``*name``) is refused: an admin's
    552 characters of nested aliases expand to megabytes once stored."""

    def compose_node(self, parent: Any, index: Any) -> Any:
        if self.check_event(yaml.AliasEvent):
            raise yaml.composer.ComposerError(
                None,
                None,
                "anchors and aliases (&name, *name) are not accepted: write the value out",
                self.peek_event().start_mark,  # type: ignore[no-untyped-call]
            )
        return super().compose_node(parent, index)


def load_yaml(text: str) -> Any:
    """One YAML document, without aliases."""
    return yaml.load(text, Loader=_NoAliases)  # noqa: S506 (a safe loader's subclass)


def load_yaml_all(text: str) -> list[Any]:
    """Every YAML document in ``text``, without aliases."""
    return list(yaml.load_all(text, Loader=_NoAliases))


def _paths(values: Mapping[str, Any], prefix: tuple[str, ...] = ()) -> Iterator[tuple[str, ...]]:
    """Every leaf's key path (a mapping's keys; a list or a scalar is a leaf)."""
    for key, value in values.items():
        path = (*prefix, str(key))
        if isinstance(value, Mapping) and value:
            yield from _paths(value, path)
        else:
            yield path


def _dotted(path: Sequence[str]) -> str:
    return ".".join(path)


def check_vcluster_values(values: Mapping[str, Any], schema: Mapping[str, Any]) -> dict[str, str]:
    """What is wrong with a template's values for the vCluster itself: keys the portal
    owns (with why), keys not on the allowed list, then the chart's own schema."""
    errors: dict[str, str] = {}
    for path in _paths(values):
        owned = next((why for key, why in OWNED if path[: len(key)] == key), None)
        if owned is not None:
            errors[f"vcluster_values.{_dotted(path)}"] = f"a template cannot set it: {owned}"
        elif not any(path[: len(key)] == key for key in ALLOWED):
            errors[f"vcluster_values.{_dotted(path)}"] = (
                "not among the values a template may set ("
                + ", ".join(_dotted(key) for key in ALLOWED)
                + ")"
            )
    errors.update(_volume_errors(values))
    if errors:
        return errors
    validator = Draft202012Validator(schema)
    for error in sorted(validator.iter_errors(values), key=lambda e: list(e.absolute_path)):
        where = _dotted([str(p) for p in error.absolute_path]) or "(top)"
        errors[f"vcluster_values.{where}"] = f"the vCluster chart refuses it: {error.message}"
    return errors


def _volume_errors(values: Mapping[str, Any]) -> dict[str, str]:
    """The control plane's own volumes may be only what cannot reach past the team."""
    errors: dict[str, str] = {}
    persistence: Any = values
    for key in ("controlPlane", "statefulSet", "persistence"):
        persistence = persistence.get(key) if isinstance(persistence, Mapping) else None
    if not isinstance(persistence, Mapping):
        return errors
    for key in VOLUME_LISTS:
        volumes = persistence.get(key)
        if volumes is None:
            continue
        where = f"vcluster_values.controlPlane.statefulSet.persistence.{key}"
        if not isinstance(volumes, list):
            errors[where] = "a list of volumes"
            continue
        for number, volume in enumerate(volumes, 1):
            sources = set(volume) - {"name"} if isinstance(volume, Mapping) else set()
            if not sources or not sources <= set(VOLUME_SOURCES):
                errors[f"{where}.{number}"] = (
                    "a control-plane volume may be " + " or ".join(VOLUME_SOURCES) + " only: "
                    "hostPath reaches the node, and secret, configMap, projected or a claim "
                    "read what the team's namespace holds beside its vCluster"
                )
    return errors


def _placeholders(text: str) -> set[str]:
    return set(PLACEHOLDER.findall(text))


def _manifest_errors(manifests: str, declared: set[str]) -> dict[str, str]:
    if len(manifests) > MANIFESTS_MAX:
        return {"manifests": f"at most {MANIFESTS_MAX // 1024} KiB of YAML"}
    errors: dict[str, str] = {}
    unknown = sorted(name for name in _placeholders(manifests) if name not in declared)
    if unknown:
        errors["manifests"] = "no parameter named " + ", ".join(f"${{{n}}}" for n in unknown)
        return errors
    try:
        docs = [d for d in load_yaml_all(PLACEHOLDER.sub("x", manifests)) if d is not None]
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        at = f" (line {mark.line + 1})" if mark is not None else ""
        return {"manifests": f"not YAML{at}: {getattr(exc, 'problem', exc)}"}
    for number, doc in enumerate(docs, 1):
        missing = [
            key
            for key, ok in (
                ("apiVersion", isinstance(doc, dict) and bool(doc.get("apiVersion"))),
                ("kind", isinstance(doc, dict) and bool(doc.get("kind"))),
                (
                    "metadata.name",
                    isinstance(doc, dict)
                    and isinstance(doc.get("metadata"), dict)
                    and bool(doc["metadata"].get("name")),
                ),
            )
            if not ok
        ]
        if missing:
            errors["manifests"] = (
                f"document {number} is not a Kubernetes object: it needs {', '.join(missing)}"
            )
            break
    return errors


def _parameters(raw: object) -> tuple[tuple[Parameter, ...], dict[str, str]]:
    if raw is None:
        return (), {}
    if not isinstance(raw, list):
        return (), {"parameters": "a list of parameters"}
    found: list[Parameter] = []
    errors: dict[str, str] = {}
    for number, item in enumerate(raw, 1):
        where = f"parameters.{number}"
        if not isinstance(item, Mapping):
            errors[where] = "a parameter has a name, a type and a default"
            continue
        name = str(item.get("name", "")).strip()
        kind = str(item.get("type", "choice")).strip()
        allowed = tuple(str(v).strip() for v in (item.get("allowed") or []))
        default = str(item.get("default", "")).strip()
        if not PARAMETER.fullmatch(name):
            errors[where] = "a name of lower-case letters, digits and _ (e.g. version)"
        elif any(p.name == name for p in found):
            errors[where] = f"{name} is declared twice"
        elif kind not in PARAMETER_TYPES:
            errors[where] = f"{name}: the type is one of {', '.join(PARAMETER_TYPES)}"
        elif kind == "choice" and not 1 <= len(allowed) <= ALLOWED_MAX:
            errors[where] = f"{name}: a choice lists 1 to {ALLOWED_MAX} allowed values"
        else:
            parameter = Parameter(
                name=name,
                label=str(item.get("label", "") or name).strip()[:80],
                type=kind,
                default=default,
                allowed=allowed if kind == "choice" else (),
            )
            try:
                parameter.parse(default)
            except ValueError as exc:
                errors[where] = f"{name}: the default {default!r} is not allowed: {exc}"
            else:
                found.append(parameter)
    return tuple(found), errors


def _under(repo: SplitResult, source: str) -> bool:
    """Whether ``repo`` is ``source`` or below it (same scheme, host and port)."""
    allowed = urlsplit(source)
    if (repo.scheme, repo.hostname, repo.port) != (
        allowed.scheme,
        allowed.hostname,
        allowed.port,
    ):
        return False
    prefix = allowed.path.rstrip("/")
    return repo.path.rstrip("/") == prefix or repo.path.startswith(prefix + "/")


def chart_source_problem(
    repo: str, sources: Sequence[str], resolver: outbound.Resolver | None = None
) -> str | None:
    """What is wrong with a template chart's source, or None: a listed source (or below
    one) when ``sources`` (PORTAL_TEMPLATE_CHART_SOURCES) lists any, else an ``https://``
    or ``oci://`` source whose host has public addresses only; never credentials."""
    listed = " or ".join(sources) if sources else ""
    hint = (
        f"{listed} or below it"
        if sources
        else "a chart repository (https://…, a mirror) or oci://registry/path"
    )
    if not repo.startswith(CHART_SOURCES) or any(c.isspace() or ord(c) < 32 for c in repo):
        return f"the repo must be {hint}"
    parts = urlsplit(repo)
    if parts.username is not None or parts.password is not None:
        return "put no user name or password in the repo: the cluster's pull secret holds them"
    if parts.query or parts.fragment or not parts.hostname:
        return f"the repo must be {hint}"
    try:
        parts.port  # noqa: B018 (a bad port raises)
    except ValueError:
        return "the repo's port must be a number from 1 to 65535"
    if sources:
        return (
            None if any(_under(parts, source) for source in sources) else f"the repo must be {hint}"
        )
    if parts.scheme == "http":
        return "the repo must use https:// or oci:// (http:// only if the portal lists it)"
    try:
        addresses = outbound.resolve(parts.hostname, parts.port or 443, resolver)
    except outbound.Refused as exc:
        return f"{exc}, or have the portal list the source (PORTAL_TEMPLATE_CHART_SOURCES)"
    for address in addresses:
        problem = outbound.why_not_public(address)
        if problem:
            return (
                f"{parts.hostname} is {problem} ({address}): a template names a public "
                "source, or one the portal lists (PORTAL_TEMPLATE_CHART_SOURCES)"
            )
    return None


def _charts(
    raw: object, declared: set[str], sources: Sequence[str]
) -> tuple[tuple[Chart, ...], dict[str, str]]:
    if raw is None:
        return (), {}
    if not isinstance(raw, list):
        return (), {"charts": "a list of charts"}
    charts: list[Chart] = []
    errors: dict[str, str] = {}
    for number, item in enumerate(raw, 1):
        where = f"charts.{number}"
        if not isinstance(item, Mapping):
            errors[where] = "a chart has a name, a repo and a version"
            continue
        values = item.get("values") or ""
        if isinstance(values, Mapping):
            values = yaml.safe_dump(dict(values), sort_keys=False)
        chart = Chart(
            name=str(item.get("name", "")).strip(),
            repo=str(item.get("repo", "")).strip(),
            version=str(item.get("version", "")).strip(),
            release=str(item.get("release", "") or item.get("name", "")).strip(),
            namespace=str(item.get("namespace", "") or "default").strip(),
            values=str(values),
        )
        unknown = sorted(
            n
            for n in _placeholders(chart.version) | _placeholders(chart.values)
            if n not in declared
        )
        if not chart.name or not chart.version:
            errors[where] = "a chart needs its name and version"
        elif not CHART_NAME.fullmatch(chart.name):
            errors[where] = (
                f"{chart.name[:60]!r} is not a chart name: lower-case letters, digits, - . _ "
                "(starting with a letter or digit)"
            )
        elif not VERSION.fullmatch(PLACEHOLDER.sub("x", chart.version)):
            errors[where] = f"{chart.name}: the version is a chart version, e.g. 1.2.3"
        elif problem := chart_source_problem(chart.repo, sources):
            errors[where] = f"{chart.name}: {problem}"
        elif not NAME.fullmatch(chart.release) or not NAME.fullmatch(chart.namespace):
            errors[where] = f"{chart.name}: the release and namespace are DNS-1123 labels"
        elif unknown:
            errors[where] = f"{chart.name}: no parameter named " + ", ".join(
                f"${{{n}}}" for n in unknown
            )
        else:
            try:
                load_yaml(PLACEHOLDER.sub("x", chart.values))
            except yaml.YAMLError:
                errors[where] = f"{chart.name}: its values are not YAML"
            else:
                charts.append(chart)
    return tuple(charts), errors


def parse_spec(
    raw: Mapping[str, Any], schema: Mapping[str, Any], chart_sources: Sequence[str] = ()
) -> TemplateSpec:
    """A template version as an admin wrote it, checked (``schema``: the vCluster chart's
    own values.schema.json; ``chart_sources``: where its charts may come from, see
    ``chart_source_problem``); InvalidInput names every field to change."""
    parameters, errors = _parameters(raw.get("parameters"))
    declared = {p.name for p in parameters}
    manifests = str(raw.get("manifests") or "")
    errors.update(_manifest_errors(manifests, declared))
    charts, chart_errors = _charts(raw.get("charts"), declared, chart_sources)
    errors.update(chart_errors)
    values = raw.get("vcluster_values") or {}
    if not isinstance(values, Mapping):
        errors["vcluster_values"] = "a mapping of the vCluster's values"
        values = {}
    else:
        errors.update(check_vcluster_values(values, schema))
    quota = raw.get("default_quota") or {}
    if not isinstance(quota, Mapping):
        errors["default_quota"] = "a mapping of quota fields (gpu_quota, gpu_limit, …)"
        quota = {}
    for key, value in quota.items():
        in_pool = POOL_QUOTA_FIELD.fullmatch(str(key))
        if key not in QUOTA_FIELDS and in_pool is None:
            errors[f"default_quota.{key}"] = (
                "a quota field is one of "
                + ", ".join(QUOTA_FIELDS)
                + ", or pools.<pool>.<field> for another node pool's GPU guarantee, limit "
                "or weight (e.g. pools.l40s.gpu_quota)"
            )
        else:
            try:
                parse_hundredths(value, what=label(in_pool.group(2) if in_pool else str(key)))
            except ValueError as exc:
                errors[f"default_quota.{key}"] = str(exc)
    sleep_hours = raw.get("sleep_after_hours")
    if sleep_hours is not None and (
        isinstance(sleep_hours, bool)
        or not isinstance(sleep_hours, int)
        or not 1 <= sleep_hours <= SLEEP_HOURS_MOST
    ):
        errors["sleep_after_hours"] = (
            f"idle hours before a team's cluster sleeps: a whole number from 1 to "
            f"{SLEEP_HOURS_MOST} (left out: the org's policy)"
        )
    if errors:
        raise InvalidInput(errors)
    return TemplateSpec(
        manifests=manifests,
        charts=charts,
        vcluster_values=dict(values),
        parameters=parameters,
        default_quota={str(k): str(v) for k, v in quota.items()},
        repair_drift=bool(raw.get("repair_drift", False)),
        sleep_after_hours=sleep_hours if isinstance(sleep_hours, int) else None,
    )


SLEEP_HOURS_MOST = 24 * 30  # as the org's policy allows


# A template's suggestion for another node pool: its GPU guarantee, limit or weight there,
# named as the request form names the field.
POOL_QUOTA_FIELD = re.compile(
    r"pools\.([a-z0-9](?:[-a-z0-9]*[a-z0-9])?)\.(gpu_quota|gpu_limit|over_quota_weight)"
)


def parse_parameters(spec: TemplateSpec, given: Mapping[str, str]) -> dict[str, str]:
    """A lead's parameter values (the defaults where none is given); InvalidInput names
    each one to change. A name the template does not declare is refused."""
    errors: dict[str, str] = {}
    values: dict[str, str] = {}
    for name in given:
        if spec.parameter(name) is None:
            errors[f"parameters.{name}"] = "this template has no such parameter"
    for parameter in spec.parameters:
        try:
            values[parameter.name] = parameter.parse(given.get(parameter.name, parameter.default))
        except ValueError as exc:
            errors[f"parameters.{parameter.name}"] = f"{parameter.label}: {exc}"
    if errors:
        raise InvalidInput(errors)
    return values


@dataclass(frozen=True)
class Carried:
    """A team's parameter values carried to a template version: ``values`` has one for
    each parameter the version declares (its default where the team had none, or where
    the version refuses the team's value)."""

    values: dict[str, str]
    added: tuple[str, ...] = ()  # parameters the version adds: at their defaults
    dropped: tuple[str, ...] = ()  # the team's parameters the version no longer has
    refused: Mapping[str, str] = field(default_factory=dict)  # name -> what to change

    @property
    def fits(self) -> bool:
        """Whether every value the team chose is allowed in the version."""
        return not self.refused


def carry_parameters(spec: TemplateSpec, kept: Mapping[str, str]) -> Carried:
    """``kept`` (a team's values, chosen for an older version) as ``spec`` takes them."""
    values: dict[str, str] = {}
    added: list[str] = []
    refused: dict[str, str] = {}
    for parameter in spec.parameters:
        if parameter.name not in kept:
            added.append(parameter.name)
            values[parameter.name] = parameter.default
            continue
        try:
            values[parameter.name] = parameter.parse(kept[parameter.name])
        except ValueError as exc:
            refused[parameter.name] = f"{parameter.label}: {kept[parameter.name]!r} — {exc}"
            values[parameter.name] = parameter.default
    dropped = tuple(sorted(name for name in kept if spec.parameter(name) is None))
    return Carried(values, tuple(added), dropped, refused)


def _render(text: str, values: Mapping[str, str]) -> str:
    return PLACEHOLDER.sub(lambda m: values[m.group(1)], text)


# The YAML tag a parameter's value gets where ``${name}`` is a whole plain scalar.
TAGS = {
    "choice": "tag:yaml.org,2002:str",
    "string": "tag:yaml.org,2002:str",
    "integer": "tag:yaml.org,2002:int",
    "boolean": "tag:yaml.org,2002:bool",
}
STR = "tag:yaml.org,2002:str"


def render_yaml(spec: TemplateSpec, text: str, values: Mapping[str, str]) -> str:
    """``text`` (YAML documents) with the parameters' values in, each as a YAML scalar:
    where ``${name}`` is a whole plain value it becomes a scalar of the parameter's type
    (``replicas: ${n}`` an integer, ``${flag}`` a boolean, a string always a string, so
    ``true``, ``null`` or ``0x10`` typed by a lead stay text); inside a longer or quoted
    scalar, and in keys, it is text within that scalar. No value can end a scalar, add a
    key or an object, or change another's type."""
    nonce = secrets.token_hex(6)
    names: list[str] = []

    def mark(found: re.Match[str]) -> str:
        names.append(found.group(1))
        return f"zq{nonce}n{len(names) - 1}qz"

    token = re.compile(f"zq{nonce}n([0-9]+)qz")
    nodes = list(yaml.compose_all(PLACEHOLDER.sub(mark, text), Loader=_NoAliases))

    def fill(node: yaml.Node, *, key: bool = False) -> None:
        if isinstance(node, yaml.ScalarNode):
            whole = token.fullmatch(node.value)
            if whole is not None and node.style is None and not key:
                name = names[int(whole.group(1))]
                parameter = spec.parameter(name)
                node.tag = TAGS[parameter.type] if parameter is not None else STR
                node.value = values[name]
            elif token.search(node.value):
                node.tag = STR
                node.value = token.sub(lambda m: values[names[int(m.group(1))]], node.value)
        elif isinstance(node, yaml.MappingNode):
            for name, value in node.value:
                fill(name, key=True)
                fill(value)
        elif isinstance(node, yaml.SequenceNode):
            for item in node.value:
                fill(item)

    for node in nodes:
        fill(node)
    return str(yaml.serialize_all(nodes, Dumper=yaml.SafeDumper, explicit_start=len(nodes) > 1))


def deploy_values(spec: TemplateSpec, parameters: Mapping[str, str]) -> dict[str, Any]:
    """What the template adds to ``experimental.deploy.vcluster`` (its manifests and
    charts, the parameters rendered in), as the vCluster chart takes it. Values chosen
    for another version are carried over (``carry_parameters``): a parameter the team
    never set renders as its default, so one version's new parameter cannot stop a team."""
    parameters = carry_parameters(spec, parameters).values
    deploy: dict[str, Any] = {}
    if spec.manifests.strip():
        deploy["manifests"] = render_yaml(spec, spec.manifests, parameters)
    if spec.charts:
        deploy["helm"] = [
            {
                "chart": {
                    "name": chart.name,
                    "repo": chart.repo,
                    "version": _render(chart.version, parameters),
                },
                "release": {"name": chart.release, "namespace": chart.namespace},
                **({"values": render_yaml(spec, chart.values, parameters)} if chart.values else {}),
            }
            for chart in spec.charts
        ]
    return deploy
