"""The design source's step 7, end to end on the real runtime: each team's lead downloads a
personal kubeconfig, creates inside their vCluster the pod spec their team page offers,
the real vCluster syncer copies it to the host, and the real KAI Scheduler v0.17.0
(scheduler, binder, pod-grouper, pod-group controller, queue controller, admission)
schedules it into the team's queue on the shared GPUs. Prometheus scrapes KAI's own
metrics, and the team pages show KAI's numbers.

Its own host cluster: KAI's v0.17.0 CRDs replace the v0.13.0 ones the other tests use,
and KAI's admission webhook judges every pod there.
"""

from __future__ import annotations

import contextlib
import html
import re
import shutil
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml
from fastapi import FastAPI
from fastapi.testclient import TestClient
from kubernetes import client, config
from sqlalchemy import select

from app.core.db import unit_of_work
from app.core.models import AuditEvent
from app.main import create_app
from app.runtime import portal_of
from app.teams import repository as repo
from app.teams.seed import seed_example
from tests.conftest import settings_for
from tests.k8s import kai
from tests.k8s.conftest import all_ready, portal_identity, real_installer, reconcile_until
from tests.k8s.control_plane import ControlPlane, control_plane
from tests.k8s.vcluster_runtime import VClusterRuntime, vcluster_runtime
from tests.servers import free_port, prometheus_server, tool, wait_http
from tests.web.conftest import Client, client_for

TEAMS = {"nlp": 1, "vision": 2, "recommender": 3}
QUEUES = ("scheduling.run.ai", "v2", "queues")
OBJECT_NAME = "vcluster.loft.sh/object-name"


@dataclass
class Host:
    plane: ControlPlane
    api: client.ApiClient
    scheduler: kai.Kai
    nodes: kai.GpuNodes
    runtime: VClusterRuntime
    prometheus: str
    portal_kubeconfig: Path


@pytest.fixture(scope="module")
def host() -> Iterator[Host]:
    with one_gpu_host() as found:
        yield found


@contextlib.contextmanager
def one_gpu_host() -> Iterator[Host]:
    """A host cluster with KAI, one GPU (the design source's pool) and a CPU node."""
    with control_plane() as plane:
        api = config.new_client_from_config(str(plane.kubeconfig))
        kai.install(api)
        portal_kubeconfig = portal_identity(plane)
        with (
            kai.kai_scheduler(plane) as running,
            kai.gpu_nodes(api) as nodes,
            vcluster_runtime(plane, api) as runtime,
            prometheus_server(running.scheduler_metrics, running.queue_metrics) as prometheus,
        ):
            nodes.add("gpu-node-1", 1)
            nodes.add("cpu-node-1", 0)
            yield Host(plane, api, running, nodes, runtime, prometheus, portal_kubeconfig)
            assert not runtime.errors, runtime.errors
            assert not nodes.errors, nodes.errors
            running.check()


@pytest.fixture(scope="module")
def portal(
    host: Host, tmp_path_factory: pytest.TempPathFactory, sqlite_template: Path
) -> Iterator[FastAPI]:
    """The portal as its ServiceAccount, KAI's numbers from Prometheus, the example org
    approved and provisioned."""
    with seeded_kube_portal(
        host.portal_kubeconfig, tmp_path_factory, sqlite_template, prometheus_url=host.prometheus
    ) as app:
        yield app


@contextlib.contextmanager
def seeded_kube_portal(
    portal_kubeconfig: Path,
    tmp_path_factory: pytest.TempPathFactory,
    sqlite_template: Path,
    **extra: Any,
) -> Iterator[FastAPI]:
    """The portal on the real host as its ServiceAccount (``extra``: more settings), the
    example org seeded, approved and provisioned by the real installer."""
    import os

    home = tmp_path_factory.mktemp("home")
    old_home = os.environ.get("HOME")
    os.environ["HOME"] = str(home)
    database = tmp_path_factory.mktemp("db") / "portal.db"
    shutil.copy(sqlite_template, database)  # the migrated schema
    settings = settings_for(
        f"sqlite:///{database}",
        cluster_backend="kubernetes",
        kubeconfig=str(portal_kubeconfig),
        kube_service_account="gpu-portal/gpu-portal",
        vcluster_expose="LoadBalancer",
        vcluster_api_address="service",
        vcluster_timeout_seconds=150.0,
        **extra,
        **real_installer(),
    )
    app = create_app(settings)
    try:
        with TestClient(app):
            with unit_of_work(portal_of(app).session_factory) as session:
                seed_example(session)
            reconcile_until(app, lambda: all_ready(app))
            yield app
    finally:
        if old_home is None:
            os.environ.pop("HOME", None)
        else:
            os.environ["HOME"] = old_home


def wait_for(what: str, check: Callable[[], Any], timeout: float = 90) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        found = check()
        if found:
            return found
        if time.monotonic() > deadline:
            raise AssertionError(f"{what}: not after {timeout} s")
        time.sleep(0.5)


def lead_of(app: FastAPI, team: str) -> Client:
    return client_for(app, f"lead-{team}@example.org")


_DOWNLOADED: dict[tuple[int, str], dict[str, Any]] = {}


def inside(app: FastAPI, team: str) -> client.ApiClient:
    """The team's vCluster, through the lead's own downloaded kubeconfig: downloaded once
    per portal and kept, as a person keeps theirs (each download is a live credential, and
    one person may hold ten: the module's polls would reach that)."""
    key = (id(app), team)
    if key not in _DOWNLOADED:
        answer = lead_of(app, team).api("POST", f"/api/v1/teams/{TEAMS[team]}/kubeconfig?ttl=1h")
        assert answer.status_code == 200, answer.text
        _DOWNLOADED[key] = yaml.safe_load(answer.text)
    return config.new_client_from_config_dict(_DOWNLOADED[key])


def offered_pod(app: FastAPI, team: str, key: str) -> dict[str, Any]:
    """The pod spec the team page offers (``fraction`` or ``whole``), as shown."""
    page = lead_of(app, team).get(f"/teams/{TEAMS[team]}").text
    found = re.search(rf'<pre id="pod-spec-{key}"[^>]*><code>(.*?)</code></pre>', page, re.S)
    assert found, f"the team page of {team} offers no {key} pod"
    pod: dict[str, Any] = yaml.safe_load(html.unescape(found.group(1)))
    for container in pod["spec"]["containers"]:  # quantities as kubectl sends them
        limits = container.get("resources", {}).get("limits", {})
        container.get("resources", {})["limits"] = {k: str(v) for k, v in limits.items()}
    return pod


def host_pod(host: Host, team: str, name: str, namespace: str = "default") -> Any:
    pods = client.CoreV1Api(host.api).list_namespaced_pod(f"vcluster-{team}").items
    for pod in pods:
        annotations = pod.metadata.annotations or {}
        if (
            annotations.get(OBJECT_NAME) == name
            and annotations.get("vcluster.loft.sh/object-namespace") == namespace
        ):
            return pod
    return None


def gpu_allocated(host: Host, team: str) -> str | None:
    queue: dict[str, Any] = client.CustomObjectsApi(host.api).get_cluster_custom_object(
        *QUEUES, f"team-{team}"
    )
    value = ((queue.get("status") or {}).get("allocated") or {}).get("nvidia.com/gpu")
    return str(value) if value is not None else None


def absent(host: Host, team: str, name: str) -> bool:
    return host_pod(host, team, name) is None


def bound_pod(host: Host, team: str, name: str, namespace: str = "default") -> Any:
    pod = host_pod(host, team, name, namespace)
    return pod if pod is not None and pod.spec.node_name else None


def running_inside(api: client.ApiClient, name: str, namespace: str = "default") -> bool:
    pod = client.CoreV1Api(api).read_namespaced_pod(name, namespace)
    return bool(pod.status.phase == "Running")


def page_number(page: str, attribute: str) -> str:
    found = re.search(rf'{attribute}">([0-9.]+)', page)
    assert found, f"{attribute} is not on the page"
    return found.group(1)


def test_each_teams_pod_runs_in_its_queue_on_the_shared_gpu(host: Host, portal: FastAPI) -> None:
    apis = {team: inside(portal, team) for team in TEAMS}
    for team, api in apis.items():
        pod = offered_pod(portal, team, "fraction")
        assert pod["metadata"]["annotations"]["gpu-fraction"] == "0.33"
        client.CoreV1Api(api).create_namespaced_pod("default", pod)

    for team in TEAMS:
        name = f"{team}-gpu-check"
        synced = wait_for(f"{team}'s pod on the host", partial(host_pod, host, team, name))
        assert synced.metadata.labels["kai.scheduler/queue"] == f"team-{team}"
        assert synced.spec.scheduler_name == "kai-scheduler"
        # The pod's service-account token is in a secret, not in an annotation.
        tokens = [a for a in synced.metadata.annotations if a.startswith("vcluster.loft.sh/token")]
        assert tokens == [], tokens
        bound = wait_for(f"KAI binding {team}'s pod", partial(bound_pod, host, team, name))
        assert bound.spec.node_name == "gpu-node-1"
        # Running on the host, and so inside the vCluster, as its lead sees it.
        wait_for(f"{team}'s pod running inside", partial(running_inside, apis[team], name))
    for team in TEAMS:
        assert wait_for(f"{team}'s queue", partial(gpu_allocated, host, team)) == "330m"

    # The team page shows KAI's own figures (read from Prometheus), and KAI's fair share is
    # what the portal computes itself from the same queues.
    for team in TEAMS:
        assert wait_for(f"KAI's fair share of {team}", partial(kai_fair_share, host, team)) == 0.33

        def shown(team: str = team) -> str | None:
            page = lead_of(portal, team).get(f"/teams/{TEAMS[team]}").text
            allocated = page_number(page, 'data-gauge="allocated')
            return page if allocated == "0.33" else None

        page = wait_for(f"{team}'s gauge at 0.33", shown, timeout=30)
        assert page_number(page, 'data-explain="fair') == "0.33"

    computed = portal_of(portal).settings.model_copy(update={"prometheus_url": None})
    own = create_app(computed)
    with TestClient(own):
        for team in TEAMS:
            page = lead_of(own, team).get(f"/teams/{TEAMS[team]}").text
            assert page_number(page, 'data-gauge="allocated') == "0.33"
            assert page_number(page, 'data-explain="fair') == "0.33"


def test_the_vclusters_own_coredns_comes_back_on_the_host(host: Host, portal: FastAPI) -> None:
    """CoreDNS is synced like any team pod: once re-created (an eviction, a drain, an
    upgrade) the host's queue policy judges it, and it must pass."""
    api = inside(portal, "vision")  # the lead is cluster-admin inside
    core = client.CoreV1Api(api)
    first = wait_for(
        "CoreDNS inside",
        lambda: (
            core.list_namespaced_pod(
                "kube-system", label_selector="k8s-app=vcluster-kube-dns"
            ).items
        ),
    )[0]
    core.delete_namespaced_pod(first.metadata.name, "kube-system", grace_period_seconds=0)

    def recreated() -> Any:
        pods = core.list_namespaced_pod(
            "kube-system", label_selector="k8s-app=vcluster-kube-dns"
        ).items
        fresh = [p for p in pods if p.metadata.uid != first.metadata.uid]
        return fresh and host_pod(host, "vision", fresh[0].metadata.name, "kube-system")

    on_host = wait_for("the new CoreDNS pod on the host", recreated)
    assert on_host.metadata.labels["kai.scheduler/queue"] == "team-vision"
    assert on_host.spec.scheduler_name == "kai-scheduler"
    # ... and KAI places it, in the team's queue, on the CPU node (it tolerates no GPU taint).
    bound = wait_for(
        "KAI binding CoreDNS",
        partial(
            bound_pod, host, "vision", on_host.metadata.annotations[OBJECT_NAME], "kube-system"
        ),
    )
    assert bound.spec.node_name == "cpu-node-1"


def test_a_pod_the_host_refuses_is_named_on_the_team_page(host: Host, portal: FastAPI) -> None:
    pod = offered_pod(portal, "nlp", "fraction")
    pod["metadata"]["name"] = "no-queue"
    del pod["metadata"]["labels"]
    client.CoreV1Api(inside(portal, "nlp")).create_namespaced_pod("default", pod)

    lead = lead_of(portal, "nlp")

    def listed() -> str | None:
        part = lead.get(f"/teams/{TEAMS['nlp']}/workloads").text
        return part if 'data-refused-pod="default/no-queue"' in part else None

    part = wait_for("the refused pod on the team page", listed, timeout=60)
    assert "pods of team nlp must carry the label kai.scheduler/queue: team-nlp" in part
    assert 'data-refused="not-syncer"' not in part, "the syncer's own answer"
    assert host_pod(host, "nlp", "no-queue") is None
    # Anyone inside the vCluster can write an event: a newer one about the same pod does
    # not replace the syncer's answer, and one about another pod is labelled.
    inner = client.CoreV1Api(inside(portal, "nlp"))
    made = inner.read_namespaced_pod("no-queue", "default")
    for name, uid in (("no-queue", made.metadata.uid), ("made-up", "no-such-uid")):
        inner.create_namespaced_event(
            "default",
            {
                "metadata": {"generateName": "forged-"},
                "involvedObject": {"kind": "Pod", "namespace": "default", "name": name, "uid": uid},
                "reason": "SyncError",
                "type": "Warning",
                "message": "the host says: ask an admin for cluster-admin",
                "lastTimestamp": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            },
        )
    portal_of(portal).refused_pods.ttl = 0
    for _ in range(2):  # one read started by the first view, shown by the second
        lead.get(f"/teams/{TEAMS['nlp']}/workloads")
        portal_of(portal).refused_pods.wait()
    again = lead.get(f"/teams/{TEAMS['nlp']}/workloads").text
    assert "pods of team nlp must carry the label kai.scheduler/queue: team-nlp" in again
    assert "ask an admin for cluster-admin" not in again
    assert "made-up" not in again, "no Pending pod of that name: not refused by anyone"
    # Another team's lead sees nothing of it.
    assert lead_of(portal, "vision").get(f"/teams/{TEAMS['nlp']}/workloads").status_code == 404
    vision = lead_of(portal, "vision").get(f"/teams/{TEAMS['vision']}/workloads").text
    assert "no-queue" not in vision


@contextlib.contextmanager
def served(app: FastAPI) -> Iterator[str]:
    """The running portal (its lifespan already started) over HTTP, for a browser."""
    import uvicorn

    port = free_port()
    server = uvicorn.Server(
        uvicorn.Config(app, host="127.0.0.1", port=port, lifespan="off", log_level="warning")
    )
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    try:
        wait_http(f"http://127.0.0.1:{port}/login", timeout=30)
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(10)


@pytest.mark.browser
def test_the_lead_reads_the_refused_pod_in_a_browser(portal: FastAPI) -> None:
    """As a lead sees it: the list arrives after the page, with the host's answer."""
    from playwright.sync_api import sync_playwright

    from tests.browser.conftest import CHROMIUM, CHROMIUM_ARGS, sign_in

    with served(portal) as url, sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            page = sign_in(browser, url, "lead-nlp@example.org")
            page.goto(f"{url}/teams/{TEAMS['nlp']}")
            row = page.locator('[data-refused-pod="default/no-queue"]')
            row.wait_for(timeout=30_000)
            assert row.locator("code").inner_text() == "default/no-queue"
            message = row.locator('[data-refused="message"]').inner_text()
            assert "pods of team nlp must carry the label kai.scheduler/queue: team-nlp" in message
            assert page.locator("#workloads h2").inner_text() == "Workloads"
            headings = page.locator("#workloads h3").all_inner_texts()
            assert headings[-1] == "Pods the host refused", headings
        finally:
            browser.close()


def test_each_teams_template_is_applied_inside_its_vcluster_by_the_real_syncer(
    portal: FastAPI,
) -> None:
    """The example org's kinds: the real syncer's deploy controller applies what the
    portal rendered into each vCluster's values (the lead's parameter in it), and the
    team page says it is installed."""

    def objects(team: str) -> tuple[set[str], set[str], dict[str, dict[str, str]]]:
        api = inside(portal, team)
        namespaces = client.CoreV1Api(api).list_namespace().items
        crds = client.ApiextensionsV1Api(api).list_custom_resource_definition().items
        return (
            {str(n.metadata.name) for n in namespaces},
            {str(c.metadata.name) for c in crds},
            {str(n.metadata.name): dict(n.metadata.labels or {}) for n in namespaces},
        )

    nlp = wait_for(
        "the crd-playground objects inside nlp's vCluster",
        lambda: (
            (found := objects("nlp"))
            and "playground" in found[0]
            and "experiments.nlp.example.org" in found[1]
            and found
        ),
        timeout=180,
    )
    assert "kubeflow" not in nlp[0]
    recommender = wait_for(
        "the kubeflow-training objects inside recommender's vCluster",
        lambda: (
            (found := objects("recommender"))
            and "kubeflow" in found[0]
            and "pytorchjobs.kubeflow.org" in found[1]
            and found
        ),
        timeout=180,
    )
    assert recommender[2]["kubeflow"]["training-operator.kubeflow.org/version"] == "v1.7.0"
    vision = objects("vision")  # bare: nothing of the others
    assert not {"playground", "kubeflow"} & vision[0]
    assert not {"experiments.nlp.example.org", "pytorchjobs.kubeflow.org"} & vision[1]
    # Checked inside by the portal's own pass a few seconds after ready: "all in place".
    reconcile_until(
        portal,
        lambda: (
            'data-template-state="installed">installed, all in place'
            in lead_of(portal, "recommender").get(f"/teams/{TEAMS['recommender']}").text
        ),
        timeout=120,
    )
    # A CRD of crd-playground deleted inside (the syncer re-applies manifests only when
    # they change): the portal finds it gone through its own connection and puts it back.
    crd = "experiments.nlp.example.org"
    client.ApiextensionsV1Api(inside(portal, "nlp")).delete_custom_resource_definition(crd)
    wait_for("the CRD deleted inside nlp's vCluster", lambda: crd not in objects("nlp")[1])
    reconcile_until(portal, lambda: crd in objects("nlp")[1])
    with unit_of_work(portal_of(portal).session_factory) as session:
        repaired = [
            e.summary
            for e in session.scalars(
                select(AuditEvent).where(AuditEvent.action == "provisioning.drift_repaired")
            )
        ]
    assert f"restored nlp: template: CustomResourceDefinition {crd} put back" in repaired


def test_what_one_lead_installs_inside_the_other_cannot_see(portal: FastAPI) -> None:
    crd = {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": "probes.vision.example.org"},
        "spec": {
            "group": "vision.example.org",
            "names": {"kind": "Probe", "plural": "probes", "singular": "probe"},
            "scope": "Namespaced",
            "versions": [
                {
                    "name": "v1",
                    "served": True,
                    "storage": True,
                    "schema": {"openAPIV3Schema": {"type": "object"}},
                }
            ],
        },
    }
    vision = client.ApiextensionsV1Api(inside(portal, "vision"))
    vision.create_custom_resource_definition(crd)
    assert vision.read_custom_resource_definition("probes.vision.example.org")
    nlp = client.ApiextensionsV1Api(inside(portal, "nlp"))
    names = {c.metadata.name for c in nlp.list_custom_resource_definition().items}
    assert "probes.vision.example.org" not in names


def test_a_fourth_teams_whole_gpu_pod_waits_and_its_page_says_why(
    host: Host, portal: FastAPI
) -> None:
    """The one GPU is shared by the three teams' fractions: a whole-GPU pod of a new team
    (no guarantee left in the pool) is refused a place by KAI, and its page says so."""
    lead = client_for(portal, "lead-audio@example.org")
    asked = lead.api(
        "POST",
        "/api/v1/requests",
        {"name": "audio", "gpu_quota": "0", "gpu_limit": "1", "purpose": "speech"},
    )
    assert asked.status_code == 201, asked.text
    admin = client_for(portal, "admin@example.org", admin=True)
    approved = admin.api("POST", f"/api/v1/requests/{asked.json()['id']}/approve", {})
    assert approved.status_code == 200, approved.text
    reconcile_until(portal, lambda: all_ready(portal))
    team_id = asked.json()["team_id"]
    TEAMS["audio"] = team_id
    try:
        pod = offered_pod(portal, "audio", "whole")
        assert pod["spec"]["containers"][0]["resources"]["limits"]["nvidia.com/gpu"] == "1"
        client.CoreV1Api(inside(portal, "audio")).create_namespaced_pod("default", pod)
        synced = wait_for(
            "audio's pod on the host", partial(host_pod, host, "audio", pod["metadata"]["name"])
        )
        assert synced.metadata.labels["kai.scheduler/queue"] == "team-audio"

        def refused_by_kai() -> bool:
            groups = client.CustomObjectsApi(host.api).list_namespaced_custom_object(
                "scheduling.run.ai", "v2alpha2", "vcluster-audio", "podgroups"
            )["items"]
            conditions = [
                c for g in groups for c in (g.get("status") or {}).get("schedulingConditions", [])
            ]
            return any(c.get("reason") == "Unschedulable" for c in conditions)

        wait_for("KAI's verdict on audio's pod", refused_by_kai)
        time.sleep(3)  # several scheduling cycles: it stays unbound
        assert bound_pod(host, "audio", pod["metadata"]["name"]) is None

        def explained() -> str | None:
            page = lead.get(f"/teams/{team_id}").text
            found = re.search(r'data-explain="why">(.*?)</p>', page, re.S)
            return " ".join(found.group(1).split()) if found else None

        why = wait_for("the team page's explanation", explained, timeout=30)
        assert why.startswith("1 GPU of your work is waiting"), why
    finally:
        TEAMS.pop("audio")


class Mismatch(AssertionError):
    """The portal's own figures differ from KAI's."""


def kai_fair_share(host: Host, team: str) -> float | None:
    query = f'kai_queue_fair_share_gpu{{queue_metadata_name="team-{team}"}}'
    result = httpx.get(f"{host.prometheus}/api/v1/query", params={"query": query}).json()
    found = result["data"]["result"]
    return float(found[0]["value"][1]) if found else None


def test_on_a_cluster_larger_than_the_pool_the_portal_agrees_with_kai(
    host: Host, portal: FastAPI
) -> None:
    """Two nodes of 4 GPUs beside the pool's one; every team now runs a whole-GPU pod
    instead of its fraction (its limit is 1)."""
    host.nodes.add("gpu-node-2", 4)
    host.nodes.add("gpu-node-3", 4)
    for team in ("nlp", "vision", "recommender"):
        core = client.CoreV1Api(inside(portal, team))
        core.delete_namespaced_pod(f"{team}-gpu-check", "default", grace_period_seconds=0)
        wait_for(
            f"{team}'s fraction gone from the host",
            partial(absent, host, team, f"{team}-gpu-check"),
        )
        pod = offered_pod(portal, team, "whole")
        pod["metadata"]["name"] = f"{team}-whole"
        core.create_namespaced_pod("default", pod)
        wait_for(f"{team}'s whole-GPU pod bound", partial(bound_pod, host, team, f"{team}-whole"))
    time.sleep(5)  # KAI's metrics after the binding, scraped
    kai_says = {team: kai_fair_share(host, team) for team in ("nlp", "vision", "recommender")}
    computed = portal_of(portal).settings.model_copy(update={"prometheus_url": None})
    own = create_app(computed)
    with TestClient(own):
        portal_says = {
            team: float(
                page_number(
                    lead_of(own, team).get(f"/teams/{TEAMS[team]}").text, 'data-explain="fair'
                )
            )
            for team in ("nlp", "vision", "recommender")
        }
    if portal_says != kai_says:
        every = httpx.get(
            f"{host.prometheus}/api/v1/query",
            params={"query": '{__name__=~"kai_queue_.*gpu.*"}'},
        ).json()["data"]["result"]
        print(
            "DEBUG-KAI",
            [
                (r["metric"].get("__name__"), r["metric"].get("queue_metadata_name"), r["value"][1])
                for r in every
            ],
        )
        raise Mismatch(f"the portal says {portal_says}, KAI {kai_says}")


def test_with_time_based_fairshare_the_portal_agrees_with_kai(host: Host, portal: FastAPI) -> None:
    """Last: KAI's scheduler restarted with a Prometheus usage database (what the
    operator renders from a SchedulingShard's usageDBConfig; kValue KAI's default 1.0),
    and another tenant's top-level queue guaranteed 6 of the 9 GPUs, so that the org's
    share (3) is contested by its four teams and past usage weighs in. The portal, given
    each queue's usage from KAI's own kai_queue_gpu_usage, computes every team's and the
    org's fair share as KAI does."""
    from app.adapters.prometheus import PrometheusSource
    from app.reads.org import org_view
    from app.teams import repository as teams_repo
    from app.usage.service import UsageCache, shares_for

    custom = client.CustomObjectsApi(host.api)
    custom.create_cluster_custom_object(
        "scheduling.run.ai",
        "v2",
        "queues",
        {
            "apiVersion": "scheduling.run.ai/v2",
            "kind": "Queue",
            "metadata": {"name": "tenant-b"},
            "spec": {
                "displayName": "tenant-b",
                "resources": {
                    "gpu": {"quota": 6, "limit": -1, "overQuotaWeight": 1},
                    "cpu": {"quota": -1, "limit": -1, "overQuotaWeight": 1},
                    "memory": {"quota": -1, "limit": -1, "overQuotaWeight": 1},
                },
            },
        },
    )
    core = client.CoreV1Api(host.api)
    core.create_namespace({"metadata": {"name": "tenant-b"}})
    for i in range(6):
        core.create_namespaced_pod(
            "tenant-b",
            {
                "metadata": {"name": f"train-{i}", "labels": {kai.QUEUE_LABEL: "tenant-b"}},
                "spec": {
                    "schedulerName": kai.SCHEDULER,
                    "containers": [
                        {
                            "name": "train",
                            "image": "registry.local/train:1",
                            "resources": {"limits": {kai.GPU: "1"}},
                        }
                    ],
                },
            },
        )
    host.scheduler.restart_scheduler(
        usageDBConfig={
            "clientType": "prometheus",
            "connectionString": host.prometheus,
            "usageParams": {
                "windowSize": "10m",
                "fetchInterval": "5s",
                "stalenessPeriod": "2m",
                "waitTimeout": "30s",
                # The cluster's capacity as kube-state-metrics would export it (none
                # runs here): 9 GPUs; CPU and memory are not divided in these tests.
                "extraParams": {
                    "gpuCapacityMetric": "vector(9)",
                    "cpuCapacityMetric": "vector(1)",
                    "memoryCapacityMetric": "vector(1)",
                    "queryResolution": "5s",
                },
            },
        }
    )
    teams = ("nlp", "vision", "recommender", "audio")

    def kai_usage() -> dict[str, float] | None:
        found = httpx.get(
            f"{host.prometheus}/api/v1/query", params={"query": "kai_queue_gpu_usage"}
        ).json()["data"]["result"]
        usage = {r["metric"]["queue_metadata_name"]: float(r["value"][1]) for r in found}
        return usage if any(usage.get(f"team-{t}", 0) > 0 for t in teams) else None

    try:
        wait_for("KAI's usage of each queue, from its usage database", kai_usage, timeout=120)
    except AssertionError as exc:
        said = [
            line
            for line in host.scheduler.log("scheduler", 4000).splitlines()
            if "sage" in line or "rror" in line
        ]
        raise AssertionError(f"{exc}\n" + "\n".join(said[-30:])) from None
    cache = UsageCache(
        portal_of(portal).backend, ttl=0, prometheus=PrometheusSource(host.prometheus)
    )

    def compare() -> tuple[dict[str, float | None], dict[str, float | None]]:
        with portal_of(portal).session_factory() as session:
            org = teams_repo.get_org(session)
            rows = org_view(session, cache, org).rows
            usage = cache.get([row.queue_name for row in rows])
            shares = shares_for(
                rows, usage, pool_centi=org.gpus_centi, parent=org.parent_queue, model=cache.model
            )
        ids = {row.name: row.id for row in rows}
        portal_says = {t: shares[ids[t]].fair_now for t in teams}
        kai_says = {t: kai_fair_share(host, t) for t in teams}
        return portal_says, {t: None if v is None else round(v, 2) for t, v in kai_says.items()}

    deadline = time.monotonic() + 90
    while True:
        portal_says, kai_says = compare()
        if portal_says == kai_says or time.monotonic() > deadline:
            break
        time.sleep(2)
    assert cache.model.weighs_history, cache.model  # KAI's usage reached the calculator
    assert cache.model.k_value == 1.0
    if portal_says != kai_says:
        raise Mismatch(f"the portal says {portal_says}, KAI {kai_says} ({cache.model})")


def test_two_queues_whose_names_clash_each_get_their_own_numbers(host: Host) -> None:
    """Teams `a` and `team-a` (names the portal accepts) have queues team-a and
    team-team-a, with the team's name as displayName. KAI's scheduler labels its series'
    queue_name with the displayName and its queue controller with metadata.name, so on
    queue_name one team's series is the other's; the portal reads queue_metadata_name,
    and gets from the real KAI each queue's own allocation and fair share."""
    from app.adapters.prometheus import PrometheusSource

    custom = client.CustomObjectsApi(host.api)
    core = client.CoreV1Api(host.api)
    host.nodes.add("gpu-node-4", 4)
    for team, pods in (("a", 1), ("team-a", 2)):
        queue = f"team-{team}"
        custom.create_cluster_custom_object(
            "scheduling.run.ai",
            "v2",
            "queues",
            {
                "apiVersion": "scheduling.run.ai/v2",
                "kind": "Queue",
                "metadata": {"name": queue},
                "spec": {
                    "displayName": team,
                    "parentQueue": "ml-org",
                    "resources": {
                        "gpu": {"quota": 0, "limit": -1, "overQuotaWeight": 1},
                        "cpu": {"quota": -1, "limit": -1, "overQuotaWeight": 1},
                        "memory": {"quota": -1, "limit": -1, "overQuotaWeight": 1},
                    },
                },
            },
        )
        namespace = f"clash-{team}"
        core.create_namespace({"metadata": {"name": namespace}})
        for i in range(pods):
            core.create_namespaced_pod(
                namespace,
                {
                    "metadata": {"name": f"job-{i}", "labels": {kai.QUEUE_LABEL: queue}},
                    "spec": {
                        "schedulerName": kai.SCHEDULER,
                        "containers": [
                            {
                                "name": "job",
                                "image": "registry.local/job:1",
                                "resources": {"limits": {kai.GPU: "1"}},
                            }
                        ],
                    },
                },
            )

    def kai_says(metric: str, nonzero: bool = True) -> dict[str, float] | None:
        found = httpx.get(f"{host.prometheus}/api/v1/query", params={"query": metric}).json()[
            "data"
        ]["result"]
        values = {
            r["metric"]["queue_metadata_name"]: float(r["value"][1])
            for r in found
            if r["metric"].get("queue_metadata_name") in ("team-a", "team-team-a")
        }
        complete = len(values) == 2 and (all(values.values()) or not nonzero)
        return values if complete else None

    # (Both are above their fair share of 0 while tenant-b waits: KAI may not place them.)
    allocated = wait_for(
        "KAI's allocation of both", partial(kai_says, "kai_queue_allocated_gpus", nonzero=False)
    )
    fair = wait_for(
        "KAI's fair share of both", partial(kai_says, "kai_queue_fair_share_gpu", nonzero=False)
    )
    # KAI's figures move while it places the pods: the portal's reading and KAI's own
    # series are compared until one pair of reads agrees (a wrong label never would).
    queues = ("team-a", "team-team-a")
    deadline = time.monotonic() + 60
    while True:
        read = PrometheusSource(host.prometheus).read()
        allocated = kai_says("kai_queue_allocated_gpus", nonzero=False) or {}
        fair = kai_says("kai_queue_fair_share_gpu", nonzero=False) or {}
        portal_says = (
            {q: read.allocated.get(q) for q in queues},
            {q: read.fair_share.get(q) for q in queues},
        )
        if portal_says == (allocated, fair) or time.monotonic() > deadline:
            break
        time.sleep(1)
    assert read.by_metadata_name
    assert portal_says == (allocated, fair)
    # On queue_name alone the scheduler's "team-a" is team-team-a's fair share.
    by_name = httpx.get(
        f"{host.prometheus}/api/v1/query",
        params={"query": 'kai_queue_fair_share_gpu{queue_name="team-a"}'},
    ).json()["data"]["result"]
    assert {r["metric"]["queue_metadata_name"] for r in by_name} == {"team-team-a"}


def _sleep_of(app: FastAPI, team: str) -> str:
    with portal_of(app).session_factory() as session:
        found = repo.get_live_team_by_name(session, team)
        assert found is not None
        return str(found.sleep)


def _statefulset(host: Host, team: str) -> Any:
    return client.AppsV1Api(host.api).read_namespaced_stateful_set(team, f"vcluster-{team}")


def _host_pods(host: Host, team: str, selector: str) -> list[str]:
    pods = client.CoreV1Api(host.api).list_namespaced_pod(
        f"vcluster-{team}", label_selector=selector
    )
    return [str(p.metadata.name) for p in pods.items]


def _vcluster_list(host: Host) -> dict[str, str]:
    """`vcluster list` as a platform engineer runs it: each vCluster's status."""
    import json
    import os
    import subprocess

    env = {**os.environ, "KUBECONFIG": str(host.plane.kubeconfig)}
    env["VCLUSTER_SKIP_VERSION_CHECK"] = "true"
    env["PATH"] = f"{tool('helm').parent}{os.pathsep}{env.get('PATH', '')}"
    done = subprocess.run(
        [str(tool("vcluster")), "list", "--output", "json", "--driver", "helm"],
        capture_output=True,
        text=True,
        env=env,
        check=True,
        timeout=60,
    )
    return {item["Name"]: item["Status"] for item in json.loads(done.stdout)}


def _vcluster_cli(host: Host, *args: str) -> None:
    import os
    import subprocess

    env = {**os.environ, "KUBECONFIG": str(host.plane.kubeconfig)}
    env["VCLUSTER_SKIP_VERSION_CHECK"] = "true"
    env["PATH"] = f"{tool('helm').parent}{os.pathsep}{env.get('PATH', '')}"
    subprocess.run(
        [str(tool("vcluster")), *args, "--driver", "helm"],
        capture_output=True,
        text=True,
        env=env,
        check=True,
        timeout=240,
    )


def _look_now(app: FastAPI, team: str) -> None:
    """The reconciler's next look at ``team`` now, its vCluster read afresh (as its
    resync would, within the deep-check interval)."""
    from app.core.models import utcnow
    from tests.parts import kubernetes_backend

    kubernetes_backend(app).kube.forget(team, ("vCluster",))
    with unit_of_work(portal_of(app).session_factory) as session:
        found = repo.get_live_team_by_name(session, team)
        assert found is not None
        found.next_attempt_at = utcnow()


def test_a_team_sleeps_once_its_pods_are_gone_and_wakes_to_kai(host: Host, portal: FastAPI) -> None:
    """Sleep and wake on the real syncer and KAI: refused while a team pod runs; asleep,
    the StatefulSet holds the CLI's annotations at 0 replicas, no pod of it is left on the
    host, its queue stays, and `vcluster list` says Paused; woken from the team page, the
    syncer serves again and a new pod of the lead is bound by KAI. A pause and a resume by
    hand (the real CLI) are taken as the team's state."""
    team, team_id = "recommender", TEAMS["recommender"]
    lead = lead_of(portal, team)
    api = inside(portal, team)
    core = client.CoreV1Api(api)
    busy = offered_pod(portal, team, "fraction")
    busy["metadata"]["name"] = f"{team}-busy"
    core.create_namespaced_pod("default", busy)
    wait_for("the pod on the host", partial(host_pod, host, team, f"{team}-busy"))
    # Nothing sleeps while a team pod runs (the earlier tests' pods may run beside it).
    refused = lead.api("POST", f"/api/v1/teams/{team_id}/sleep")
    assert refused.status_code == 409, refused.text
    assert "on the cluster: nothing sleeps while a team pod runs" in refused.json()["detail"]
    names = [p.metadata.name for p in core.list_namespaced_pod("default").items]
    for name in names:
        core.delete_namespaced_pod(name, "default", grace_period_seconds=0)
    for name in names:
        wait_for(f"{name} gone from the host", partial(absent, host, team, name))
    # Its own CoreDNS (kube-system inside) stays on the host: it is not use.
    assert _host_pods(host, team, f"vcluster.loft.sh/managed-by={team}") != []
    slept = lead.api("POST", f"/api/v1/teams/{team_id}/sleep")
    assert slept.status_code == 200, slept.text
    reconcile_until(portal, lambda: _sleep_of(portal, team) == "asleep", timeout=120)

    sts = _statefulset(host, team)
    assert sts.spec.replicas == 0
    marks = sts.metadata.annotations
    assert marks["loft.sh/paused"] == "true"
    assert marks["loft.sh/paused-replicas"] == "1"
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z", marks["loft.sh/paused-date"])
    # (A terminating pod is its node's to finish: asleep does not wait for that.)
    wait_for(
        "no pod of it left on the host",
        lambda: not _host_pods(host, team, f"vcluster.loft.sh/managed-by={team}"),
        timeout=180,  # three KAI hosts side by side on two cores: 60 s was once too few
    )
    assert _host_pods(host, team, f"app=vcluster,release={team}") == []
    assert client.CustomObjectsApi(host.api).get_cluster_custom_object(*QUEUES, f"team-{team}")
    assert _vcluster_list(host)[team] == "Paused"
    page = " ".join(re.sub(r"<[^>]+>", " ", lead.get(f"/teams/{team_id}").text).split())
    assert "Asleep since" in page
    assert "put to sleep by lead-recommender@example.org" in page
    # A resync of the sleeping team changes nothing (asleep is expected, not drift).
    _look_now(portal, team)
    portal_of(portal).reconciler.run_once()
    assert _statefulset(host, team).spec.replicas == 0

    woke = lead.form(f"/teams/{team_id}/wake", follow_redirects=True)
    assert f"Waking {team}" in woke.text
    reconcile_until(portal, lambda: _sleep_of(portal, team) == "awake", timeout=180)
    assert "loft.sh/paused" not in (_statefulset(host, team).metadata.annotations or {})
    # The kubeconfig from before the sleep still works; the lead's new pod is bound by KAI.
    pod = offered_pod(portal, team, "fraction")
    pod["metadata"]["name"] = f"{team}-after-sleep"
    try:
        wait_for("the woken vCluster's API", lambda: _created(api, pod), timeout=60)
    except AssertionError as exc:
        raise AssertionError(f"{exc}; last answers: {_CREATE_ERRORS[-3:]}") from None
    bound = wait_for(
        "KAI binding the pod after the wake",
        partial(bound_pod, host, team, pod["metadata"]["name"]),
    )
    assert bound.metadata.labels["kai.scheduler/queue"] == f"team-{team}"

    # By hand, with the real CLI: paused is shown as asleep, resumed as awake.
    _vcluster_cli(host, "pause", "vision", "--namespace", "vcluster-vision")
    _look_now(portal, "vision")
    reconcile_until(portal, lambda: _sleep_of(portal, "vision") == "asleep", timeout=60)
    _vcluster_cli(host, "resume", "vision", "--namespace", "vcluster-vision")
    _look_now(portal, "vision")
    reconcile_until(portal, lambda: _sleep_of(portal, "vision") == "awake", timeout=180)
    with portal_of(portal).session_factory() as session:
        summaries = session.scalars(
            select(AuditEvent.summary)
            .where(AuditEvent.action.in_(["vcluster.asleep", "vcluster.awake"]))
            .order_by(AuditEvent.id)
        ).all()
    assert [s.split(": ", 1)[1] for s in summaries[-2:]] == [
        "paused outside the portal (vcluster pause)",
        "resumed outside the portal (vcluster resume)",
    ]


_CREATE_ERRORS: list[str] = []


def _created(api: client.ApiClient, pod: dict[str, Any]) -> bool:
    try:
        client.CoreV1Api(api).create_namespaced_pod("default", pod)
    except Exception as exc:  # the woken API server is not serving yet
        _CREATE_ERRORS.append(f"{type(exc).__name__}: {str(exc)[:300]}")
        return False
    return True
