"""A cluster template is checked when it is saved, against the real vCluster chart's
own values.schema.json (release 0.36.1): what it installs parses, its parameters agree
with their defaults, and it can set nothing that weakens what the portal owns."""

from __future__ import annotations

from typing import Any

import pytest
from jsonschema import Draft202012Validator

from app.adapters.k8s.vcluster_values import vcluster_values
from app.catalog.rules import (
    chart_source_problem,
    deploy_values,
    parse_parameters,
    parse_spec,
)
from app.catalog.schema import SchemaMissing, chart_schema
from app.core.errors import InvalidInput
from app.provisioning.backend import ResourceQuota, TeamSpec
from tests.shared import SHARED

CHART = SHARED / "third_party" / "vcluster" / "vcluster-0.36.1.tgz"
SCHEMA = chart_schema(CHART)
SOURCES = ("oci://registry.example.org",)  # PORTAL_TEMPLATE_CHART_SOURCES in these tests

CRD = """\
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: experiments.nlp.example.org
spec:
  group: nlp.example.org
  names: {kind: Experiment, plural: experiments, singular: experiment}
  scope: Namespaced
  versions:
  - name: v1
    served: true
    storage: true
    schema: {openAPIV3Schema: {type: object, x-kubernetes-preserve-unknown-fields: true}}
---
apiVersion: v1
kind: Namespace
metadata:
  name: experiments
  labels: {kind: ${flavour}}
"""

KUBEFLOW: dict[str, Any] = {
    "manifests": CRD,
    "charts": [
        {
            "name": "training-operator",
            "repo": "oci://registry.example.org/charts",
            "version": "${training_operator}",
            "namespace": "kubeflow",
            "values": {"replicas": 1},
        }
    ],
    "vcluster_values": {
        "controlPlane": {
            "statefulSet": {"resources": {"limits": {"memory": "4Gi"}}},
        },
        "sync": {"fromHost": {"storageClasses": {"enabled": True}}},
    },
    "parameters": [
        {
            "name": "training_operator",
            "label": "Kubeflow Training Operator",
            "type": "choice",
            "allowed": ["1.8.1", "1.9.0"],
            "default": "1.8.1",
        },
        {"name": "flavour", "type": "string", "default": "nlp"},
    ],
    "default_quota": {"gpu_quota": "1", "gpu_limit": "2"},
}


def _team() -> TeamSpec:
    unlimited = ResourceQuota(0.0, -1.0, 1.0)
    return TeamSpec(
        team="nlp",
        namespace="vcluster-nlp",
        vcluster_name="nlp",
        queue_name="team-nlp",
        parent_queue="ml-org",
        priority=100,
        resources=(
            ("gpu", ResourceQuota(1.0, 2.0, 1.0)),
            ("cpu", unlimited),
            ("memory", unlimited),
        ),
        org_resources=(
            ("gpu", ResourceQuota(1.0, -1.0, 1.0)),
            ("cpu", unlimited),
            ("memory", unlimited),
        ),
    )


def _refused(raw: dict[str, Any]) -> dict[str, str]:
    with pytest.raises(InvalidInput) as caught:
        parse_spec(raw, SCHEMA, SOURCES)
    return caught.value.errors


def test_a_template_renders_into_values_the_real_chart_takes() -> None:
    spec = parse_spec(KUBEFLOW, SCHEMA, SOURCES)
    chosen = parse_parameters(spec, {"training_operator": "1.9.0"})
    assert chosen == {"training_operator": "1.9.0", "flavour": "nlp"}
    deploy = deploy_values(spec, chosen)
    assert deploy["helm"][0]["chart"] == {
        "name": "training-operator",
        "repo": "oci://registry.example.org/charts",
        "version": "1.9.0",
    }
    assert deploy["helm"][0]["release"] == {"name": "training-operator", "namespace": "kubeflow"}
    assert "labels: {kind: nlp}" in deploy["manifests"]
    # The whole vcluster.yaml the portal would install: its own values, the template's
    # values and what the template deploys, as the real chart's schema judges it.
    values = vcluster_values(_team(), expose="ClusterIP", ingress_host=None, extra_sans=[])
    values["controlPlane"]["statefulSet"]["resources"]["limits"]["memory"] = "4Gi"
    values["experimental"]["deploy"] = {"vcluster": deploy}
    assert list(Draft202012Validator(SCHEMA).iter_errors(values)) == []


@pytest.mark.parametrize(
    ("values", "field", "reason"),
    [
        (
            {"sync": {"toHost": {"pods": {"enabled": False}}}},
            "vcluster_values.sync.toHost.pods.enabled",
            "each gets the team's KAI queue",
        ),
        (
            {"networking": {"advanced": {"proxyKubelets": {"byHostname": True}}}},
            "vcluster_values.networking.advanced.proxyKubelets.byHostname",
            "nodes/proxy on the host",
        ),
        (
            {"sync": {"fromHost": {"nodes": {"selector": {"all": True}}}}},
            "vcluster_values.sync.fromHost.nodes.selector.all",
            "which nodes a team sees",
        ),
        (
            {"controlPlane": {"coredns": {"enabled": False}}},
            "vcluster_values.controlPlane.coredns.enabled",
            "CoreDNS with the team's queue pinning",
        ),
        (
            {"policies": {"resourceQuota": {"enabled": False}}},
            "vcluster_values.policies.resourceQuota.enabled",
            "pins every pod to the team's queue",
        ),
        (
            {"experimental": {"deploy": {"host": {"manifests": "x"}}}},
            "vcluster_values.experimental.deploy.host.manifests",
            "go in their own fields",
        ),
    ],
)
def test_what_the_portal_owns_is_refused_with_the_reason(
    values: dict[str, Any], field: str, reason: str
) -> None:
    errors = _refused({"vcluster_values": values})
    assert field in errors, errors
    assert "a template cannot set it" in errors[field]
    assert reason in errors[field]


def test_a_key_off_the_allowed_list_names_the_list() -> None:
    errors = _refused({"vcluster_values": {"sleep": {"auto": {"afterInactivity": "1h"}}}})
    message = errors["vcluster_values.sleep.auto.afterInactivity"]
    assert message.startswith("not among the values a template may set")
    assert "controlPlane.statefulSet.resources" in message


def test_an_allowed_key_the_chart_refuses_is_refused_by_the_charts_schema() -> None:
    errors = _refused(
        {"vcluster_values": {"controlPlane": {"statefulSet": {"resources": {"limits": "lots"}}}}}
    )
    assert errors == {
        "vcluster_values.controlPlane.statefulSet.resources.limits": (
            "the vCluster chart refuses it: 'lots' is not of type 'object'"
        )
    }


def test_manifests_and_charts_are_checked() -> None:
    assert _refused({"manifests": "kind: [unclosed"})["manifests"].startswith("not YAML (line 1)")
    assert _refused({"manifests": "apiVersion: v1\nkind: Namespace\n"}) == {
        "manifests": "document 1 is not a Kubernetes object: it needs metadata.name"
    }
    assert _refused({"manifests": CRD}) == {"manifests": "no parameter named ${flavour}"}
    errors = _refused({"charts": [{"name": "x", "repo": "ftp://mirror", "version": "1"}]})
    assert errors["charts.1"] == "x: the repo must be oci://registry.example.org or below it"


def test_parameters_agree_with_their_defaults_and_a_lead_sets_only_allowed_values() -> None:
    errors = _refused(
        {
            "parameters": [
                {"name": "version", "type": "choice", "allowed": ["1"], "default": "2"},
                {"name": "version", "type": "string", "default": "x"},
                {"name": "Bad Name", "type": "string", "default": "x"},
            ]
        }
    )
    assert errors["parameters.1"].startswith("version: the default '2' is not allowed")
    assert errors["parameters.3"].startswith("a name of lower-case letters")
    spec = parse_spec(KUBEFLOW, SCHEMA, SOURCES)
    with pytest.raises(InvalidInput) as caught:
        parse_parameters(spec, {"training_operator": "2.0", "flavour": "a: b\nkind: Pod"})
    assert caught.value.errors == {
        "parameters.training_operator": "Kubeflow Training Operator: choose one of 1.8.1, 1.9.0",
        "parameters.flavour": (
            "flavour: letters, digits and . : / @ + = - _ only, not starting with -, "
            "at most 200 characters"
        ),
    }
    with pytest.raises(InvalidInput) as unknown:
        parse_parameters(spec, {"colour": "red"})
    assert unknown.value.errors == {"parameters.colour": "this template has no such parameter"}


def test_a_chart_archive_without_a_schema_says_so(tmp_path: Any) -> None:
    with pytest.raises(SchemaMissing, match="cannot be read"):
        chart_schema(tmp_path / "missing.tgz")


def _chart(**fields: str) -> dict[str, Any]:
    return {
        "charts": [{"name": "hello", "repo": SOURCES[0] + "/charts", "version": "1.0.0", **fields}]
    }


def test_a_charts_source_is_a_listed_one_without_credentials() -> None:
    assert (
        parse_spec(_chart(), SCHEMA, SOURCES).charts[0].repo == "oci://registry.example.org/charts"
    )
    for repo, why in (
        (
            "oci://registry.example.org.evil.test/charts",
            "the repo must be oci://registry.example.org",
        ),
        ("oci://registry.example.org:5000/charts", "the repo must be oci://registry.example.org"),
        ("https://registry.example.org/charts", "the repo must be oci://registry.example.org"),
        ("oci://user:secret@registry.example.org/charts", "put no user name or password"),
        ("oci://registry.example.org/charts?x=1", "the repo must be oci://registry.example.org"),
        ("http://169.254.169.254/latest", "the repo must be oci://registry.example.org"),
    ):
        assert why in _refused(_chart(repo=repo))["charts.1"], repo
    # Listed sources cover the paths below them only at a path boundary.
    listed = ("https://charts.example.org/team",)
    assert chart_source_problem("https://charts.example.org/team/x", listed) is None
    assert chart_source_problem("https://charts.example.org/teams", listed) is not None


def _resolves_to(address: str) -> Any:
    def resolver(host: str, port: int, **kwargs: Any) -> list[tuple[Any, ...]]:
        return [(2, 1, 6, "", (address, port))]

    return resolver


def test_without_a_list_a_charts_source_is_public() -> None:
    public = _resolves_to("93.184.215.14")
    assert chart_source_problem("oci://registry.example.org/c", (), public) is None
    assert chart_source_problem("https://charts.example.org", (), public) is None
    for address in ("127.0.0.1", "10.0.0.5", "169.254.169.254", "::1", "192.0.0.192"):
        problem = chart_source_problem("oci://registry.example.org/c", (), _resolves_to(address))
        assert problem is not None, address
        assert f"({address})" in problem
    assert "https:// or oci://" in str(
        chart_source_problem("http://charts.example.org", (), public)
    )
    unresolved = chart_source_problem("oci://nowhere.invalid/c", ())
    assert unresolved is not None
    assert "cannot be resolved" in unresolved
    assert "PORTAL_TEMPLATE_CHART_SOURCES" in unresolved


def test_a_charts_name_and_version_cannot_be_a_flag() -> None:
    for name in ("-x", "--post-renderer=/bin/sh", "Hello", "a b", ""):
        assert "charts.1" in _refused(_chart(name=name, release="hello")), name
    assert "is not a chart name" in _refused(_chart(name="-x", release="hello"))["charts.1"]
    assert "chart version" in _refused(_chart(version="--devel"))["charts.1"]
    string = {"name": "ver", "type": "string", "default": "1.0.0"}
    spec = parse_spec({**_chart(version="${ver}"), "parameters": [string]}, SCHEMA, SOURCES)
    with pytest.raises(InvalidInput) as caught:
        parse_parameters(spec, {"ver": "--devel"})
    assert "not starting with -" in caught.value.errors["parameters.ver"]


def test_control_plane_volumes_cannot_reach_past_the_team() -> None:
    def volumes(key: str, *listed: dict[str, Any]) -> dict[str, Any]:
        persistence = {key: list(listed)}
        return {"vcluster_values": {"controlPlane": {"statefulSet": {"persistence": persistence}}}}

    ok = volumes("addVolumes", {"name": "scratch", "emptyDir": {}})
    assert parse_spec(ok, SCHEMA, SOURCES).vcluster_values == ok["vcluster_values"]
    where = "vcluster_values.controlPlane.statefulSet.persistence"
    sources: tuple[dict[str, Any], ...] = (
        {"hostPath": {"path": "/"}},
        {"secret": {"secretName": "vc-nlp-certs"}},
        {"configMap": {"name": "x"}},
        {"projected": {"sources": []}},
        {"persistentVolumeClaim": {"claimName": "other"}},
        {"emptyDir": {}, "hostPath": {"path": "/"}},
    )
    for key in ("addVolumes", "dataVolume", "binariesVolume"):
        for source in sources:
            errors = _refused(volumes(key, {"name": "v", **source}))
            assert f"{where}.{key}.1" in errors, (key, source)
            assert "emptyDir or ephemeral only" in errors[f"{where}.{key}.1"]


def test_yaml_aliases_are_refused_before_they_expand() -> None:
    bomb = "a: &a [x, x, x, x, x, x, x, x, x]\nb: &b [*a, *a, *a, *a, *a, *a, *a, *a, *a]\n"
    manifests = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: x\ndata:\n  " + bomb.replace(
        "\n", "\n  "
    )
    errors = _refused({"manifests": manifests})
    assert "anchors and aliases (&name, *name) are not accepted" in errors["manifests"]
    values = _refused({**_chart(values=bomb)})
    assert values["charts.1"] == "hello: its values are not YAML"


TYPED = {
    "manifests": (
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: sizes, labels: {by: '${who}'}}\n"
        'data:\n  who: ${who}\n  quoted: "${replicas}"\n  line: run-${who}\n'
        "  ${who}-key: k\n"
        "---\napiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: d\n"
        "spec:\n  replicas: ${replicas}\n  paused: ${paused}\n"
    ),
    "parameters": [
        {"name": "who", "type": "string", "default": "x"},
        {"name": "replicas", "type": "integer", "default": "1"},
        {"name": "paused", "type": "boolean", "default": "false"},
    ],
}


@pytest.mark.parametrize(
    "who", ["x:", "@x", "=", "true", "null", "0x10", "2024-01-01", "a:b", ":x", "1e3", "0o17"]
)
def test_a_leads_value_is_a_yaml_scalar_of_its_type(who: str) -> None:
    """A lead's text stays text: it cannot end a scalar, add a key or change a type."""
    import yaml

    spec = parse_spec(TYPED, SCHEMA, SOURCES)
    values = parse_parameters(spec, {"who": who, "replicas": "3", "paused": "true"})
    rendered = deploy_values(spec, values)["manifests"]
    config, deployment = yaml.safe_load_all(rendered)
    assert config["metadata"] == {"name": "sizes", "labels": {"by": who}}
    assert config["data"] == {
        "who": who,
        "quoted": "3",
        "line": f"run-{who}",
        f"{who}-key": "k",
    }
    assert deployment["spec"] == {"replicas": 3, "paused": True}


def test_an_integer_is_written_in_ascii_digits() -> None:
    spec = parse_spec(TYPED, SCHEMA, SOURCES)
    for digits in ("²", "①", "\u0663", "\uff13"):
        with pytest.raises(InvalidInput) as caught:
            parse_parameters(spec, {"replicas": digits})
        assert "a whole number" in caught.value.errors["parameters.replicas"]


def test_the_drift_check_reads_any_manifest_without_failing_the_team() -> None:
    from app.provisioning.backend import BackendError, template_objects

    with pytest.raises(BackendError, match="the template's manifests cannot be read"):
        template_objects("kind: [unclosed")
    mixed = (
        "apiVersion: v1\nkind: Namespace\nmetadata: {name: a}\n---\n- a list\n---\n"
        "kind: Namespace\nmetadata: {name: b}\n---\napiVersion: v1\nkind: Namespace\n"
        "metadata: just text\n---\n"
    )
    assert [d["metadata"]["name"] for d in template_objects(mixed)] == ["a"]


def test_a_template_may_suggest_quota_in_other_node_pools() -> None:
    """A suggestion names another pool's field as the request form does; a bad pool
    field or value is refused naming the key."""
    quota = {"gpu_quota": "0.5", "pools.l40s.gpu_quota": "1", "pools.l40s.gpu_limit": "2"}
    spec = parse_spec({**KUBEFLOW, "default_quota": quota}, SCHEMA, SOURCES)
    assert spec.default_quota["pools.l40s.gpu_limit"] == "2"
    errors = _refused(
        {**KUBEFLOW, "default_quota": {"pools.l40s.cpu_quota": "1", "pools.L40S.gpu_quota": "1"}}
    )
    assert set(errors) == {
        "default_quota.pools.l40s.cpu_quota",
        "default_quota.pools.L40S.gpu_quota",
    }
    assert "pools.<pool>.<field>" in errors["default_quota.pools.l40s.cpu_quota"]
    assert (
        "at most two decimals"
        in _refused({**KUBEFLOW, "default_quota": {"pools.l40s.gpu_quota": "0.333"}})[
            "default_quota.pools.l40s.gpu_quota"
        ]
    )
