"""The portal's Helm chart: linted, rendered and installed (server-side dry run) by the
project's helm into the tests' real API server, with default and with full values."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes import client, config, utils

from app.core.config import Settings
from tests.k8s.conftest import CHART, helm
from tests.k8s.control_plane import ControlPlane
from tests.servers import cache_dir, tool

FULL = CHART / "ci/full-values.yaml"
KUBE = "1.35.0"
CACHE = cache_dir()


def _helm(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(tool("helm")), *args], capture_output=True, text=True, timeout=120, check=False
    )


def _render(*values: str, release: str = "portal") -> list[dict[str, Any]]:
    rendered = _helm(
        "template",
        release,
        str(CHART),
        "--namespace",
        "platform",
        "--kube-version",
        KUBE,
        *values,
    )
    assert rendered.returncode == 0, rendered.stderr
    return [d for d in yaml.safe_load_all(rendered.stdout) if d]


def _kind(docs: list[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    return [d for d in docs if d["kind"] == kind]


def test_lint_with_default_and_full_values() -> None:
    for values in ([], ["-f", str(FULL)]):
        linted = _helm("lint", "--strict", str(CHART), *values)
        assert linted.returncode == 0, linted.stdout + linted.stderr


def test_default_values_render_a_safe_two_replica_deployment() -> None:
    docs = _render()
    assert sorted(d["kind"] for d in docs) == [
        "ClusterRole",
        "ClusterRole",
        "ClusterRoleBinding",
        "ConfigMap",
        "Deployment",
        "PodDisruptionBudget",
        "Service",
        "ServiceAccount",
    ]
    deployment = _kind(docs, "Deployment")[0]
    spec = deployment["spec"]["template"]["spec"]
    assert deployment["spec"]["replicas"] == 2
    container = spec["containers"][0]
    assert container["livenessProbe"]["httpGet"]["path"] == "/healthz"
    assert container["readinessProbe"]["httpGet"]["path"] == "/readyz"
    assert spec["securityContext"]["runAsNonRoot"] is True
    assert container["securityContext"] == {
        "allowPrivilegeEscalation": False,
        "readOnlyRootFilesystem": True,
        "capabilities": {"drop": ["ALL"]},
    }
    assert {"name": "tmp", "mountPath": "/tmp"} in container["volumeMounts"]
    assert {"secretRef": {"name": "gpu-portal"}} in container["envFrom"]
    assert "PORTAL_WORKER_ENABLED" not in {e["name"] for e in container["env"]}
    assert _kind(docs, "PodDisruptionBudget")[0]["spec"]["minAvailable"] == 1


def test_settings_name_real_fields_and_the_charts_own_identity() -> None:
    docs = _render()
    settings = _kind(docs, "ConfigMap")[0]["data"]
    known = {f"PORTAL_{name.upper()}" for name in Settings.model_fields}
    assert set(settings) <= known, set(settings) - known
    account = _kind(docs, "ServiceAccount")[0]["metadata"]["name"]
    assert settings["PORTAL_KUBE_SERVICE_ACCOUNT"] == f"platform/{account}"
    deployment = _kind(docs, "Deployment")[0]
    assert deployment["spec"]["template"]["spec"]["serviceAccountName"] == account
    roles = {r["metadata"]["name"]: r for r in _kind(docs, "ClusterRole")}
    team_role = settings["PORTAL_KUBE_TEAM_ROLE"]
    assert team_role in roles
    binds = [r for r in roles["portal-gpu-portal"]["rules"] if r["verbs"] == ["bind"]]
    assert binds[0]["resourceNames"] == [team_role], "it may bind its team role and no other"
    # Metrics on their own port, which the Ingress never routes to.
    assert settings["PORTAL_METRICS_PORT"] == "9100"


def test_every_rbac_rule_says_why() -> None:
    lines = (CHART / "templates/rbac.yaml").read_text().splitlines()
    rules = [i for i, line in enumerate(lines) if line.strip().startswith("- apiGroups:")]
    assert len(rules) >= 10
    silent = [
        lines[i].strip()
        for i in rules
        if not any(lines[j].strip().startswith("#") for j in range(max(0, i - 4), i))
    ]
    assert silent == [], "each rule needs a comment that says why"


def test_full_values_render_every_optional_part() -> None:
    docs = _render("-f", str(FULL))
    ingress = _kind(docs, "Ingress")[0]
    assert ingress["spec"]["tls"][0]["secretName"] == "gpu-portal-tls"
    backend = ingress["spec"]["rules"][0]["http"]["paths"][0]["backend"]["service"]
    assert backend["port"] == {"name": "http"}
    monitor = _kind(docs, "ServiceMonitor")[0]
    assert monitor["spec"]["endpoints"][0]["port"] == "metrics"
    assert monitor["metadata"]["labels"]["release"] == "prometheus"
    service = _kind(docs, "Service")[0]
    assert {"name": "metrics", "port": 9300, "targetPort": "metrics"} in service["spec"]["ports"]
    deployments = {d["metadata"]["name"]: d for d in _kind(docs, "Deployment")}
    web, worker = deployments["portal-gpu-portal"], deployments["portal-gpu-portal-worker"]
    assert web["spec"]["replicas"] == 3
    assert _kind(docs, "ServiceAccount")[0]["metadata"]["name"] == "portal"
    # A large org's split: the worker Deployment runs `gpu-portal work`, the web pods
    # serve pages only, and nothing that routes or budgets web pods selects worker pods.
    assert worker["spec"]["replicas"] == 2
    pod = worker["spec"]["template"]
    container = pod["spec"]["containers"][0]
    assert container["command"] == ["gpu-portal", "work"]
    assert "ports" not in container
    assert pod["spec"]["serviceAccountName"] == "portal"
    assert container["securityContext"]["readOnlyRootFilesystem"] is True
    web_env = web["spec"]["template"]["spec"]["containers"][0]["env"]
    assert {"name": "PORTAL_WORKER_ENABLED", "value": "false"} in web_env
    labels = pod["metadata"]["labels"]
    for selecting in (service["spec"]["selector"], web["spec"]["selector"]["matchLabels"]):
        assert not selecting.items() <= labels.items()
    pdb = _kind(docs, "PodDisruptionBudget")[0]["spec"]["selector"]["matchLabels"]
    assert not pdb.items() <= labels.items()


@pytest.mark.parametrize(
    ("values", "complaint"),
    [
        (["--set", "config.PORTAL_SECRET_KEY=in-the-clear"], "at '/config'"),
        (["--set", "replicas=3"], "additional properties 'replicas' not allowed"),
        (["--set", "metrics.port=8000"], "at '/metrics/port'"),
        (["--set", "image.pullPolicy=Sometimes"], "at '/image/pullPolicy'"),
        (["--set", "worker.replicaCount=0"], "at '/worker/replicaCount'"),
    ],
)
def test_the_schema_refuses_bad_values(values: list[str], complaint: str) -> None:
    rendered = _helm("template", "portal", str(CHART), "--kube-version", KUBE, *values)
    assert rendered.returncode != 0
    assert complaint in rendered.stderr


def _install_crds(cluster: ControlPlane) -> None:
    crd = CACHE / "crds/monitoring/monitoring.coreos.com_servicemonitors.yaml"
    api = config.new_client_from_config(str(cluster.kubeconfig))
    try:
        utils.create_from_yaml(api, str(crd))
    except utils.FailToCreateError as exc:
        if not all(e.status == 409 for e in exc.api_exceptions):
            raise


@pytest.mark.parametrize("values", [[], ["-f", str(FULL)]], ids=["default", "full"])
def test_install_dry_run_on_the_server(
    cluster: ControlPlane, portal_kubeconfig: Path, values: list[str]
) -> None:
    _install_crds(cluster)
    namespace = "chart-" + ("full" if values else "default")
    core = client.CoreV1Api(config.new_client_from_config(str(cluster.kubeconfig)))
    if namespace not in {n.metadata.name for n in core.list_namespace().items}:
        core.create_namespace({"metadata": {"name": namespace}})
    installed = helm(
        cluster,
        "install",
        "portal",
        str(CHART),
        "--namespace",
        namespace,
        "--dry-run=server",
        *values,
    )
    assert installed.returncode == 0, installed.stderr
    assert "STATUS: pending-install" in installed.stdout
    assert "kind: Deployment" in installed.stdout
    # Nothing was created by the dry run.
    apps = client.AppsV1Api(config.new_client_from_config(str(cluster.kubeconfig)))
    assert apps.list_namespaced_deployment(namespace).items == []


def test_the_real_install_of_the_tests_holds_the_charts_rbac(
    cluster: ControlPlane, portal_kubeconfig: Path
) -> None:
    listed = helm(cluster, "list", "--namespace", "gpu-portal", "--output", "json")
    releases = yaml.safe_load(listed.stdout)
    assert [(r["name"], r["status"]) for r in releases] == [("gpu-portal", "deployed")]
    rbac = client.RbacAuthorizationV1Api(config.new_client_from_config(str(cluster.kubeconfig)))
    assert rbac.read_cluster_role("gpu-portal-team-namespace").rules
