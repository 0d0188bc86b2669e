"""Node pools end to end on the real runtime: two KAI scheduler shards (the default one
and one for an L40S pool, each its own scheduler process of the same build, with the
operator's --nodepool-label-key and --partition-label-value), fake nodes of both kinds,
the real vCluster syncer. Teams ask for quota in the L40S pool through the portal and an
admin approves it; each lead creates, inside its vCluster, the pod spec its team page
offers for that pool, and the L40S shard binds it to an L40S node in the team's queue of
that pool, while the default pool's pod stays on the default pool's node; the fair share
of each team in the L40S pool on its page equals what the L40S shard's scheduler exports
(a real Prometheus scrapes both schedulers). A pod naming the L40S queue without the pool
label is refused by the host and named on the team page.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

import httpx
import pytest
from fastapi import FastAPI
from kubernetes import client, config

from tests.k8s import kai
from tests.k8s.conftest import all_ready, portal_identity, reconcile_until
from tests.k8s.control_plane import ControlPlane, control_plane
from tests.k8s.test_teams_pods_run_in_their_kai_queues import (
    QUEUES,
    TEAMS,
    bound_pod,
    host_pod,
    inside,
    lead_of,
    offered_pod,
    seeded_kube_portal,
    wait_for,
)
from tests.k8s.vcluster_runtime import VClusterRuntime, vcluster_runtime
from tests.servers import prometheus_server

POOL_LABEL = "kai.scheduler/node-pool"


@dataclass
class Host:
    plane: ControlPlane
    api: client.ApiClient
    scheduler: kai.Kai
    nodes: kai.GpuNodes
    runtime: VClusterRuntime
    portal_kubeconfig: Path
    prometheus: str


@pytest.fixture(scope="module")
def host() -> Iterator[Host]:
    """KAI with a second shard for the L40S pool; one GPU of the default pool (the design
    source's), two L40S GPUs, and a CPU node."""
    with control_plane() as plane:
        api = config.new_client_from_config(str(plane.kubeconfig))
        kai.install(api)
        portal_kubeconfig = portal_identity(plane)
        with (
            kai.kai_scheduler(plane) as running,
            kai.gpu_nodes(api) as nodes,
            vcluster_runtime(plane, api) as runtime,
        ):
            shard_metrics = running.add_shard("l40s")
            nodes.add("gpu-node-1", 1)
            nodes.add(
                "l40s-node-1",
                2,
                {POOL_LABEL: "l40s", "nvidia.com/gpu.product": "NVIDIA-L40S"},
            )
            nodes.add("cpu-node-1", 0)
            with prometheus_server(running.scheduler_metrics, shard_metrics) as prometheus:
                yield Host(plane, api, running, nodes, runtime, portal_kubeconfig, prometheus)
            assert not runtime.errors, runtime.errors
            assert not nodes.errors, nodes.errors
            running.check()


@pytest.fixture(scope="module")
def portal(
    host: Host, tmp_path_factory: pytest.TempPathFactory, sqlite_template: Path
) -> Iterator[FastAPI]:
    """The portal as its ServiceAccount, the example org approved and provisioned."""
    with seeded_kube_portal(host.portal_kubeconfig, tmp_path_factory, sqlite_template) as app:
        yield app


def _queue(host: Host, name: str) -> dict[str, Any] | None:
    try:
        found: dict[str, Any] = client.CustomObjectsApi(host.api).get_cluster_custom_object(
            *QUEUES, name
        )
    except client.ApiException:
        return None
    return found


def _allocated(host: Host, queue: str) -> str | None:
    found = _queue(host, queue) or {}
    value = ((found.get("status") or {}).get("allocated") or {}).get("nvidia.com/gpu")
    return str(value) if value is not None else None


def test_pods_sent_to_the_l40s_pool_run_there_in_the_teams_queue_of_that_pool(
    host: Host, portal: FastAPI
) -> None:
    admin = client_for_admin(portal)
    # Three teams with different guarantees in each pool (the default pool's 1 GPU: the
    # smaller ones first, so that each approval fits); recommender runs nothing.
    for team, default, guarantee in (
        ("vision", "0.25", "0.5"),
        ("recommender", "0.25", "0.25"),
        ("nlp", "0.5", "1"),
    ):
        asked = lead_of(portal, team).api(
            "POST",
            f"/api/v1/teams/{TEAMS[team]}/quota-requests",
            {
                "gpu_quota": default,
                "gpu_limit": "1",
                "pools": {"l40s": {"gpu_quota": guarantee, "gpu_limit": "2"}},
            },
        )
        assert asked.status_code == 201, asked.text
        approved = admin.api("POST", f"/api/v1/requests/{asked.json()['id']}/approve", {})
        assert approved.status_code == 200, approved.text
    reconcile_until(portal, lambda: _queue(host, "team-recommender-l40s") is not None)
    reconcile_until(portal, lambda: all_ready(portal))
    for team in ("nlp", "vision", "recommender"):
        queue = _queue(host, f"team-{team}-l40s")
        assert queue is not None
        assert queue["metadata"]["labels"][POOL_LABEL] == "l40s"
        assert queue["spec"]["parentQueue"] == "ml-org-l40s"

    # Each lead creates, inside its vCluster, the L40S pod its team page offers.
    for team in ("nlp", "vision"):
        pod = offered_pod(portal, team, "pool-l40s")
        assert pod["metadata"]["labels"] == {
            "kai.scheduler/queue": f"team-{team}-l40s",
            POOL_LABEL: "l40s",
        }
        client.CoreV1Api(inside(portal, team)).create_namespaced_pod("default", pod)
    # And nlp the default pool's whole-GPU pod beside it.
    whole = offered_pod(portal, "nlp", "whole")
    client.CoreV1Api(inside(portal, "nlp")).create_namespaced_pod("default", whole)

    for team in ("nlp", "vision"):
        name = f"{team}-l40s-gpu-check"
        bound = wait_for(f"{team}'s L40S pod bound", partial(bound_pod, host, team, name), 120)
        assert bound.spec.node_name == "l40s-node-1", "the L40S shard placed it"
        assert bound.metadata.labels["kai.scheduler/queue"] == f"team-{team}-l40s"
    default = wait_for("nlp's default pod bound", partial(bound_pod, host, "nlp", "nlp-gpu-check"))
    assert default.spec.node_name == "gpu-node-1", "the default shard never uses L40S nodes"
    for team in ("nlp", "vision"):
        assert (
            wait_for(f"{team}'s L40S queue", partial(_allocated, host, f"team-{team}-l40s")) == "1"
        )
    assert wait_for("nlp's default queue", partial(_allocated, host, "team-nlp")) == "1"
    _fair_shares_agree(host, portal)

    # The L40S queue without the pool label: the host refuses it, and says what pairs hold.
    unlabelled = offered_pod(portal, "nlp", "pool-l40s")
    unlabelled["metadata"]["name"] = "no-pool-label"
    del unlabelled["metadata"]["labels"][POOL_LABEL]
    client.CoreV1Api(inside(portal, "nlp")).create_namespaced_pod("default", unlabelled)
    lead = lead_of(portal, "nlp")

    def listed() -> str | None:
        part = lead.get(f"/teams/{TEAMS['nlp']}/workloads").text
        return part if 'data-refused-pod="default/no-pool-label"' in part else None

    part = wait_for("the refused pod on the team page", listed, timeout=90)
    assert "kai.scheduler/queue: team-nlp-l40s with kai.scheduler/node-pool: l40s" in part
    assert host_pod(host, "nlp", "no-pool-label") is None


def client_for_admin(app: FastAPI) -> Any:
    from tests.web.conftest import client_for

    return client_for(app, "admin@example.org", admin=True)


def _kai_fair_share(host: Host, queue: str) -> float | None:
    """What a KAI scheduler exports as ``queue``'s fair share (the L40S queues: the L40S
    shard's scheduler, the only one that sees them)."""
    query = f'kai_queue_fair_share_gpu{{queue_metadata_name="{queue}"}}'
    found = httpx.get(f"{host.prometheus}/api/v1/query", params={"query": query}).json()
    values = {float(r["value"][1]) for r in found["data"]["result"]}
    return values.pop() if len(values) == 1 else None


def _page_fair_share(portal: FastAPI, team: str, pool: str) -> float | None:
    """The fair share now on the team's gauge of ``pool`` ("": the default pool's, the
    first gauge), as its lead reads it."""
    page = lead_of(portal, team).get(f"/teams/{TEAMS[team]}").text
    _, found, rest = page.partition(f'data-key="GPU in pool {pool}"' if pool else 'id="share"')
    shown = re.search(r'data-gauge="fair">([0-9.]+)<', rest) if found else None
    return float(shown.group(1)) if shown else None


def _fair_shares_agree(host: Host, portal: FastAPI) -> None:
    """Every team's fair share in each pool, on its page, equals what that pool's KAI
    shard exports: in the L40S pool its 2 GPUs (the shard's top level: the org's L40S
    queue alone) among three teams asking 1, 1 and nothing; in the default pool its one
    GPU, all asked by nlp's whole-GPU pod."""
    teams = ("nlp", "vision", "recommender")
    last: dict[tuple[str, str], tuple[float | None, float | None]] = {}

    def agree() -> bool | None:
        for team in teams:
            for pool, queue in (("l40s", f"team-{team}-l40s"), ("", f"team-{team}")):
                last[team, pool] = (
                    _page_fair_share(portal, team, pool),
                    _kai_fair_share(host, queue),
                )
        return all(ours is not None and ours == kai for ours, kai in last.values()) or None

    try:
        wait_for("the fair shares on the pages to equal KAI's", agree, timeout=90)
    except AssertionError:
        raise AssertionError(f"(page, KAI) per team and pool: {last}") from None
    in_l40s = [kai or 0 for (_, pool), (_, kai) in last.items() if pool == "l40s"]
    assert sum(in_l40s) == pytest.approx(2.0, abs=0.02)
    assert last["nlp", ""][1] == pytest.approx(1.0)
