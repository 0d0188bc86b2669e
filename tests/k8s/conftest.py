"""A real API server with KAI's Queue CRD, and a portal whose backend talks to it."""

from __future__ import annotations

import base64
import contextlib
import functools
import os
import socket
import subprocess
import time
from collections.abc import Iterator
from http.server import SimpleHTTPRequestHandler
from pathlib import Path
from typing import Any

import pytest
import yaml
from fastapi import FastAPI
from fastapi.testclient import TestClient
from kubernetes import client, config

from app.core.db import unit_of_work
from app.core.models import TeamSchedule, TeamStatus
from app.main import create_app
from app.runtime import portal_of
from app.teams import repository as repo
from app.teams.seed import seed_example
from tests.conftest import settings_for
from tests.k8s.control_plane import ControlPlane, control_plane
from tests.k8s.vcluster_runtime import VClusterRuntime, vcluster_runtime
from tests.servers import http_server, tool
from tests.shared import kai_crds, shared

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="session")
def cluster() -> Iterator[ControlPlane]:
    with control_plane() as plane:
        api = config.new_client_from_config(str(plane.kubeconfig))
        for crd in kai_crds():
            client.ApiextensionsV1Api(api).create_custom_resource_definition(crd)
        deadline = time.monotonic() + 30
        custom = client.CustomObjectsApi(api)
        while True:
            try:
                custom.list_cluster_custom_object("scheduling.run.ai", "v2", "queues")
                break
            except client.ApiException:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.2)
        yield plane


CHART = ROOT / "deploy/helm/gpu-portal"


def helm(cluster: ControlPlane, *args: str) -> subprocess.CompletedProcess[str]:
    """The project's helm (built into the cache) against the test API server, as its admin."""
    return subprocess.run(
        [str(tool("helm")), "--kubeconfig", str(cluster.kubeconfig), *args],
        capture_output=True,
        text=True,
        timeout=120,
        env={
            **os.environ,
            "HELM_CACHE_HOME": str(cluster.kubeconfig.parent / "helm-cache"),
            "HELM_CONFIG_HOME": str(cluster.kubeconfig.parent / "helm-config"),
            "HELM_DATA_HOME": str(cluster.kubeconfig.parent / "helm-data"),
        },
    )


def install_portal_chart(cluster: ControlPlane) -> None:
    """The portal installed from its own chart (the one source of its RBAC), without pods
    (nothing here runs a kubelet): release gpu-portal in namespace gpu-portal."""
    installed = helm(
        cluster,
        "install",
        "gpu-portal",
        str(CHART),
        "--namespace",
        "gpu-portal",
        "--create-namespace",
        "--set",
        "replicaCount=0",
    )
    assert installed.returncode == 0, installed.stderr


def portal_identity(plane: ControlPlane) -> Path:
    """The portal's chart installed, and a kubeconfig with a token of its ServiceAccount:
    the portal's identity on ``plane``."""
    install_portal_chart(plane)
    api = config.new_client_from_config(str(plane.kubeconfig))
    token = (
        client.CoreV1Api(api)
        .create_namespaced_service_account_token(
            "gpu-portal", "gpu-portal", {"spec": {"expirationSeconds": 86400}}
        )
        .status.token
    )
    return plane.kubeconfig_for("gpu-portal", token)


@pytest.fixture(scope="session")
def portal_kubeconfig(cluster: ControlPlane) -> Path:
    """The chart's ServiceAccount, with a token, as the portal's identity."""
    return portal_identity(cluster)


@pytest.fixture(scope="session")
def runtime(cluster: ControlPlane) -> Iterator[VClusterRuntime]:
    """Plays the kubelet, the storage provisioner and the load balancer; the real syncer
    runs each vCluster."""
    api = config.new_client_from_config(str(cluster.kubeconfig))
    with vcluster_runtime(cluster, api) as played:
        yield played
    assert not played.errors, played.errors


def vcluster_admin(runtime: VClusterRuntime, admin_api: Any, team: str) -> client.ApiClient:
    """The vCluster's own admin kubeconfig (secret vc-NAME, written by its syncer), sent to
    its load balancer: what a platform engineer would use."""
    namespace = f"vcluster-{team}"
    secret = client.CoreV1Api(admin_api).read_namespaced_secret(f"vc-{team}", namespace)
    loaded = yaml.safe_load(base64.b64decode(secret.data["config"]))
    loaded["clusters"][0]["cluster"]["server"] = f"https://{runtime.address(namespace, team)}"
    return config.new_client_from_config_dict(loaded)


@contextlib.contextmanager
def serve_folder(folder: Path) -> Iterator[str]:
    """A folder over plain HTTP on loopback (a chart repository mirror)."""
    with http_server(functools.partial(SimpleHTTPRequestHandler, directory=str(folder))) as url:
        yield url


@contextlib.contextmanager
def hanging_server() -> Iterator[str]:
    """Accepts connections and never answers."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(16)
    try:
        yield f"http://127.0.0.1:{listener.getsockname()[1]}"
    finally:
        listener.close()


VCLUSTER_CHART = "third_party/vcluster/vcluster-{version}.tgz"


def real_installer(version: str = "0.36.1") -> dict[str, Any]:
    """Settings for the real vcluster CLI and helm (built into the cache) installing the
    real chart from ../shared."""
    return {
        "vcluster_cli": str(tool("vcluster")),
        "helm_cli": str(tool("helm")),
        "vcluster_chart_repo": str(shared(VCLUSTER_CHART.format(version=version))),
        "vcluster_chart_version": version,
    }


@pytest.fixture
def admin_api(cluster: ControlPlane) -> Any:
    return config.new_client_from_config(str(cluster.kubeconfig))


@pytest.fixture
def clean_cluster(admin_api: Any) -> Iterator[None]:
    """Each test starts with no queues, policies or team namespaces."""
    yield
    custom = client.CustomObjectsApi(admin_api)
    for item in custom.list_cluster_custom_object("scheduling.run.ai", "v2", "queues")["items"]:
        custom.delete_cluster_custom_object(
            "scheduling.run.ai", "v2", "queues", item["metadata"]["name"]
        )
    admission = client.AdmissionregistrationV1Api(admin_api)
    for binding in admission.list_validating_admission_policy_binding().items:
        admission.delete_validating_admission_policy_binding(binding.metadata.name)
    for policy in admission.list_validating_admission_policy().items:
        admission.delete_validating_admission_policy(policy.metadata.name)
    core = client.CoreV1Api(admin_api)
    selector = "app.kubernetes.io/managed-by=gpu-portal"
    for ns in core.list_namespace(label_selector=selector).items:
        if not ns.metadata.deletion_timestamp:
            core.delete_namespace(ns.metadata.name)
    deadline = time.monotonic() + 60
    while core.list_namespace(label_selector=selector).items:
        if time.monotonic() > deadline:
            raise AssertionError("team namespaces were not deleted by the namespace controller")
        time.sleep(0.3)


@pytest.fixture
def kube_settings(
    cluster: ControlPlane,
    runtime: VClusterRuntime,
    portal_kubeconfig: Path,
    db_url: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> Any:
    """The portal acts as its ServiceAccount: every test proves the RBAC is enough. The
    real CLI writes its config under HOME, and helm its caches."""
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    return settings_for(
        db_url,
        cluster_backend="kubernetes",
        kubeconfig=str(portal_kubeconfig),
        kube_service_account="gpu-portal/gpu-portal",
        vcluster_expose="LoadBalancer",
        vcluster_timeout_seconds=150.0,
        # As from inside the host cluster: the vCluster's Service (tests/k8s/vcluster_runtime
        # plays the cluster's DNS for this process).
        vcluster_api_address="service",
        **real_installer(),
    )


@pytest.fixture
def kube_app(kube_settings: Any, clean_cluster: None) -> Iterator[FastAPI]:
    application = create_app(kube_settings)
    with TestClient(application):
        with unit_of_work(portal_of(application).session_factory) as session:
            seed_example(session)
        yield application


def statuses(app: FastAPI) -> dict[str, str]:
    with portal_of(app).session_factory() as session:
        return {t.name: t.status for t in repo.get_teams(session)}


def all_ready(app: FastAPI) -> bool:
    return set(statuses(app).values()) == {TeamStatus.READY}


def reconcile_until(app: FastAPI, done: Any, timeout: float = 300.0) -> None:
    """Run reconciler passes (as the worker would) until ``done()`` holds. A real syncer
    serves its vCluster about 15 s after it starts; with three starting at once beside
    another test file's (two run at a time) it took over 150 s on a loaded 2-core
    machine."""
    from sqlalchemy import select, update

    from app.core.models import ChartRollout, utcnow

    deadline = time.monotonic() + timeout
    while not done():
        if time.monotonic() > deadline:
            with portal_of(app).session_factory() as session:
                from app.teams import repository as repo

                errors = {
                    t.name: t.last_error
                    or "; ".join(f"{s.step}: {s.message}" for s in t.steps if s.status != "done")
                    for t in repo.get_teams(session, with_steps=True)
                }
                rollouts = {
                    r.version: f"{r.state}: {r.error or ''}"
                    for r in session.scalars(select(ChartRollout))
                }
            raise AssertionError(
                f"the reconciler did not get there in time: {errors}; rollouts: {rollouts}"
            )
        with unit_of_work(portal_of(app).session_factory) as session:
            session.execute(update(TeamSchedule).values(next_attempt_at=utcnow(), lease_until=None))
        portal_of(app).reconciler.run_once()
        time.sleep(0.2)
