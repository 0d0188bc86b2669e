"""KAI's own decisions about a team's work, on the real runtime: the real vCluster syncer
copies each lead's pods to the host, the real KAI Scheduler v0.17.0 decides, and the
portal reads what KAI wrote (PodGroups' scheduling conditions, Evict events) through
its own ServiceAccount and says it on the team pages, in the bell and through the API.

One GPU, the example org's three teams (each 0.33 GPU guaranteed, limit 1): vision
borrows the whole GPU with preemptible work while nlp is idle; nlp then asks for work
within its guarantee and KAI reclaims the GPU from vision. Then nlp asks for more than
its limit (KAI's OverLimit) and for non-preemptible work above its guarantee (KAI's
NonPreemptibleOverQuota), and both wait with KAI's reason and figures on its page.
"""

from __future__ import annotations

import html
import re
from collections.abc import Iterator
from functools import partial
from pathlib import Path
from typing import Any

import pytest
from fastapi import FastAPI
from kubernetes import client

from app.provisioning.decisions import DecisionsPass
from app.runtime import portal_of
from tests.k8s.test_teams_pods_run_in_their_kai_queues import (
    TEAMS,
    Host,
    bound_pod,
    host_pod,
    inside,
    lead_of,
    offered_pod,
    one_gpu_host,
    seeded_kube_portal,
    served,
    wait_for,
)
from tests.web.conftest import client_for

PODGROUPS = ("scheduling.run.ai", "v2alpha2")


@pytest.fixture(scope="module")
def host() -> Iterator[Host]:
    with one_gpu_host() as found:
        yield found


@pytest.fixture(scope="module")
def portal(
    host: Host, tmp_path_factory: pytest.TempPathFactory, sqlite_template: Path
) -> Iterator[FastAPI]:
    with seeded_kube_portal(host.portal_kubeconfig, tmp_path_factory, sqlite_template) as app:
        yield app


def read_kai(app: FastAPI) -> None:
    """One pass of the worker's job: KAI's decisions read for every awake team, evictions
    kept and told."""
    portal = portal_of(app)
    DecisionsPass(
        portal.session_factory, portal.workloads.reader, portal.settings, portal.workloads
    ).run_once()


def create(app: FastAPI, team: str, pod: dict[str, Any]) -> None:
    client.CoreV1Api(inside(app, team)).create_namespaced_pod("default", pod)


def kai_wrote(host: Host, team: str, name: str, reason: str) -> bool:
    """Whether KAI wrote ``reason`` on the PodGroup of the team's pod ``name``."""
    pod = host_pod(host, team, name)
    if pod is None:
        return False
    group = (pod.metadata.annotations or {}).get("pod-group-name")
    groups = client.CustomObjectsApi(host.api).list_namespaced_custom_object(
        *PODGROUPS, f"vcluster-{team}", "podgroups"
    )["items"]
    for found in groups:
        if found["metadata"]["name"] != group:
            continue
        for condition in (found.get("status") or {}).get("schedulingConditions") or []:
            if any(r.get("reason") == reason for r in condition.get("reasons") or []):
                return True
    return False


def workload(app: FastAPI, team: str, name: str) -> dict[str, Any] | None:
    """The workload as the team's lead reads it through the API, after a pass."""
    read_kai(app)
    answer = lead_of(app, team).api("GET", f"/api/v1/teams/{TEAMS[team]}/workloads")
    assert answer.status_code == 200, answer.text
    for item in answer.json():
        if item["name"] == name and item["namespace"] == "default":
            return dict(item)
    return None


def evictions(app: FastAPI, team: str) -> list[dict[str, Any]]:
    read_kai(app)
    answer = lead_of(app, team).api(
        "GET", f"/api/v1/teams/{TEAMS[team]}/workload-events?kind=evicted"
    )
    assert answer.status_code == 200, answer.text
    return list(answer.json())


def text_of(page: str) -> str:
    return " ".join(html.unescape(re.sub(r"<[^>]+>", " ", page)).split())


def test_kai_reclaims_the_gpu_vision_borrowed_when_nlp_asks_within_its_guarantee(
    host: Host, portal: FastAPI
) -> None:
    borrow = offered_pod(portal, "vision", "whole")  # preemptible: KAI's default for a pod
    borrow["metadata"]["name"] = "borrow"
    create(portal, "vision", borrow)
    wait_for("vision's whole-GPU pod bound", partial(bound_pod, host, "vision", "borrow"))
    running = wait_for(
        "vision's workload read as running",
        lambda: (w := workload(portal, "vision", "borrow")) and w["state"] == "running" and w,
    )
    assert (running["gpus"], running["preemptible"], running["queue"]) == (
        "1",
        True,
        "team-vision",
    )

    within = offered_pod(portal, "nlp", "fraction")  # 0.33: exactly nlp's guarantee
    within["metadata"]["name"] = "within"
    create(portal, "nlp", within)
    wait_for("KAI reclaiming for nlp", partial(bound_pod, host, "nlp", "within"), timeout=120)

    kept = wait_for("vision's eviction kept", lambda: evictions(portal, "vision"))
    assert len(kept) == 1, kept
    evicted = kept[0]
    assert (evicted["workload"], evicted["action"], evicted["by_team"]) == (
        "default/borrow",
        "reclaim",
        "nlp",
    )
    assert evicted["gpus"] == "1"
    assert evicted["said"] == "Reclaimed by team nlp"
    # KAI's figures of that moment (its Evict event): vision's queue first, then nlp's.
    assert evicted["why"].startswith("Your queue used 1 GPU with a guarantee of 0.33"), evicted
    assert "nlp's queue used" in evicted["why"], evicted

    # vision's page names the eviction, the action and the team it went to.
    vision = lead_of(portal, "vision")
    card = text_of(vision.get(f"/teams/{TEAMS['vision']}/workloads").text)
    assert "default/borrow" in card
    assert "Reclaimed by team nlp" in card, card
    # ... and so does its bell, once.
    titles = [
        n["title"]
        for n in vision.api("GET", "/api/v1/notifications").json()["items"]
        if n["event"] == "workload.evicted"
    ]
    assert titles == ["KAI evicted 1 workload of vision for team nlp (1 GPU)"], titles
    # nlp's page: its pod runs; nlp itself lost nothing.
    nlp_card = lead_of(portal, "nlp").get(f"/teams/{TEAMS['nlp']}/workloads").text
    assert re.search(r'data-workload="default/within" data-state="running"', nlp_card)
    assert 'data-evictions="none"' in nlp_card
    # The admin overview: who reclaimed from whom in the last day.
    overview = client_for(portal, "admin@example.org", admin=True).get("/admin").text
    line = re.search(r'<li data-reclaim="nlp>vision">(.*?)</li>', overview, re.S)
    assert line, "no reclaim of nlp from vision on the overview"
    assert text_of(line.group(1)) == "nlp reclaimed from vision : 1 workload, 1 GPU"


def test_work_above_the_limit_or_the_guarantee_waits_with_kais_reason(
    host: Host, portal: FastAPI
) -> None:
    """nlp runs 0.33 (the pod above); a whole GPU more is above its limit of 1, and a
    non-preemptible half GPU is above its guarantee of 0.33."""
    whole = offered_pod(portal, "nlp", "whole")
    whole["metadata"]["name"] = "too-big"
    create(portal, "nlp", whole)
    steady = offered_pod(portal, "nlp", "fraction")
    steady["metadata"]["name"] = "steady"
    steady["metadata"]["annotations"]["gpu-fraction"] = "0.5"
    steady["metadata"]["labels"]["kai.scheduler/preemptibility"] = "non-preemptible"
    create(portal, "nlp", steady)
    wait_for("KAI's OverLimit", partial(kai_wrote, host, "nlp", "too-big", "OverLimit"))
    wait_for(
        "KAI's NonPreemptibleOverQuota",
        partial(kai_wrote, host, "nlp", "steady", "NonPreemptibleOverQuota"),
    )
    assert bound_pod(host, "nlp", "too-big") is None
    assert bound_pod(host, "nlp", "steady") is None

    big = wait_for(
        "too-big read with KAI's reason",
        lambda: (w := workload(portal, "nlp", "too-big")) and w["reasons"] and w,
    )
    assert big["state"] == "waiting"
    reason = big["reasons"][0]
    assert reason["kai_reason"] == "OverLimit"
    assert (reason["figures"]["limit"], reason["figures"]["allocated"]) == ("1", "0.33")
    assert "Limit is 1 GPUs" in reason["message"], reason
    held = wait_for(
        "steady read with KAI's reason",
        lambda: (w := workload(portal, "nlp", "steady")) and w["reasons"] and w,
    )
    assert (held["preemptible"], held["gpus"]) == (False, "0.5")
    assert held["reasons"][0]["kai_reason"] == "NonPreemptibleOverQuota"
    assert held["reasons"][0]["figures"]["guarantee"] == "0.33"

    card = text_of(lead_of(portal, "nlp").get(f"/teams/{TEAMS['nlp']}/workloads").text)
    # Its own pod runs; the vCluster's CoreDNS (on the host in the team's queue) is not
    # the team's work.
    assert ": 1 running, 2 waiting." in card, card
    assert "coredns" not in card, card
    assert (
        "Your queue's limit is 1 GPU and your running work uses 0.33: this 1-GPU workload "
        "would take it to 1.33."
    ) in card, card
    assert (
        "Your guarantee is 0.33 GPU and this workload is non-preemptible: it can only "
        "start within the guarantee"
    ) in card, card


@pytest.mark.browser
def test_the_leads_read_kais_decisions_in_a_browser(portal: FastAPI) -> None:
    """As the leads see them: nlp's two waiting workloads with KAI's reasons, vision's
    reclaimed one with the team it went to."""
    from playwright.sync_api import sync_playwright

    from tests.browser.conftest import CHROMIUM, CHROMIUM_ARGS, sign_in

    with served(portal) as url, sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            page = sign_in(browser, url, "lead-nlp@example.org")
            page.goto(f"{url}/teams/{TEAMS['nlp']}")
            big = page.locator('[data-workload="default/too-big"]')
            big.wait_for(timeout=30_000)
            assert big.get_attribute("data-state") == "waiting"
            assert (
                big.locator('[data-why="OverLimit"]')
                .inner_text()
                .startswith("Your queue's limit is 1 GPU and your running work uses 0.33")
            )
            steady = page.locator('[data-workload="default/steady"]')
            assert steady.locator('[data-workload="non-preemptible"]').is_visible()
            why = steady.locator('[data-why="NonPreemptibleOverQuota"]').inner_text()
            assert why.startswith("Your guarantee is 0.33 GPU and this workload is")
            assert "(KAI: NonPreemptibleOverQuota)" in why

            page = sign_in(browser, url, "lead-vision@example.org")
            page.goto(f"{url}/teams/{TEAMS['vision']}")
            row = page.locator('[data-evictions="list"] tr[data-eviction]').first
            row.wait_for(timeout=30_000)
            assert row.locator("code").inner_text() == "default/borrow"
            assert "nlp" in row.locator('[data-eviction="how"]').inner_text()
        finally:
            browser.close()
