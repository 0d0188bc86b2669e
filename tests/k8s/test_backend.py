"""The kubernetes backend against a real kube-apiserver with KAI's Queue CRD."""

from __future__ import annotations

import re
import time
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from fastapi import FastAPI
from kubernetes import client

from app.core.models import TeamSchedule, TeamStatus
from app.runtime import portal_of
from app.teams import repository as repo
from tests.k8s.conftest import (
    all_ready,
    hanging_server,
    reconcile_until,
    serve_folder,
    statuses,
)
from tests.parts import kubernetes_backend
from tests.servers import tool

pytestmark = pytest.mark.parametrize("db_url", ["sqlite"], indirect=True)
QUEUES = ("scheduling.run.ai", "v2", "queues")


def queue(api: Any, name: str) -> dict[str, Any]:
    found: dict[str, Any] = client.CustomObjectsApi(api).get_cluster_custom_object(*QUEUES, name)
    return found


def test_example_org_as_the_design_source_writes_it(kube_app: FastAPI, admin_api: Any) -> None:
    reconcile_until(kube_app, lambda: all_ready(kube_app))
    parent = queue(admin_api, "ml-org")
    assert parent["spec"]["resources"]["gpu"] == {"quota": 1, "limit": -1, "overQuotaWeight": 1}
    assert parent["metadata"]["labels"]["app.kubernetes.io/managed-by"] == "gpu-portal"
    for team in ("nlp", "vision", "recommender"):
        q = queue(admin_api, f"team-{team}")
        assert q["spec"]["parentQueue"] == "ml-org"
        assert q["spec"]["priority"] == 100
        assert q["spec"]["resources"]["gpu"] == {"quota": 0.33, "limit": 1, "overQuotaWeight": 1}
        # cpu and memory carry all three fields too: an omitted limit would be 0.
        assert set(q["spec"]["resources"]["cpu"]) == {"quota", "limit", "overQuotaWeight"}
        assert q["spec"]["resources"]["memory"]["limit"] == -1
        assert q["metadata"]["managedFields"][0]["manager"] == "gpu-portal"
        assert q["metadata"]["managedFields"][0]["operation"] == "Apply"
    core = client.CoreV1Api(admin_api)
    ns = core.read_namespace("vcluster-nlp")
    assert ns.metadata.labels["gpu-portal.io/team"] == "nlp"
    admission = client.AdmissionregistrationV1Api(admin_api)
    assert admission.read_validating_admission_policy("gpu-portal-queue-nlp").spec.validations


def synced_pod(name: str, queue_label: str | None, scheduler: str | None) -> dict[str, Any]:
    labels = {"vcluster.loft.sh/managed-by": "nlp", "vcluster.loft.sh/namespace": "default"}
    if queue_label:
        labels["kai.scheduler/queue"] = queue_label
    spec: dict[str, Any] = {"containers": [{"name": "c", "image": "busybox"}]}
    if scheduler:
        spec["schedulerName"] = scheduler
    return {"metadata": {"name": name, "labels": labels}, "spec": spec}


def test_the_api_server_pins_synced_pods_to_the_team_queue(
    kube_app: FastAPI, admin_api: Any
) -> None:
    reconcile_until(kube_app, lambda: all_ready(kube_app))
    core = client.CoreV1Api(admin_api)
    cases = [
        ("other-queue", "team-vision", "kai-scheduler", "kai.scheduler/queue: team-nlp"),
        ("no-queue", None, "kai-scheduler", "kai.scheduler/queue: team-nlp"),
        ("default-scheduler", "team-nlp", None, "spec.schedulerName: kai-scheduler"),
    ]
    for name, label, scheduler, message in cases:
        refused = refused_once_in_force(core, "vcluster-nlp", synced_pod(name, label, scheduler))
        assert refused.status == 403, name
        assert message in refused.body, refused.body
    admitted = core.create_namespaced_pod(
        "vcluster-nlp", synced_pod("right", "team-nlp", "kai-scheduler")
    )
    assert admitted.metadata.name == "right"
    # The vCluster's own control-plane pod carries no synced-pod label: untouched.
    assert core.read_namespaced_pod("nlp-0", "vcluster-nlp").status.phase == "Running"
    # Another team's namespace pins to its own queue.
    sneaky = refused_once_in_force(
        core, "vcluster-vision", synced_pod("sneaky", "team-nlp", "kai-scheduler")
    )
    assert "kai.scheduler/queue: team-vision" in sneaky.body


def refused_once_in_force(core: Any, namespace: str, pod: dict[str, Any]) -> Any:
    """The API server starts enforcing a new ValidatingAdmissionPolicy a moment after it
    is created (its informer catches up; longer on a loaded machine): a pod admitted in
    that window is deleted and tried again, for up to 20 s."""
    deadline = time.monotonic() + 20
    while True:
        try:
            core.create_namespaced_pod(namespace, pod)
        except client.ApiException as exc:
            return exc
        core.delete_namespaced_pod(pod["metadata"]["name"], namespace, grace_period_seconds=0)
        assert time.monotonic() < deadline, f"{pod['metadata']['name']} was never refused"
        time.sleep(0.5)


def test_a_foreign_queue_with_the_same_name_is_left_alone(
    kube_settings: Any, admin_api: Any, clean_cluster: None
) -> None:
    from fastapi.testclient import TestClient

    from app.core.db import unit_of_work
    from app.main import create_app
    from app.teams.seed import seed_example

    custom = client.CustomObjectsApi(admin_api)
    foreign = {
        "apiVersion": "scheduling.run.ai/v2",
        "kind": "Queue",
        "metadata": {"name": "team-nlp"},
        "spec": {"resources": {"gpu": {"quota": 5, "limit": 5, "overQuotaWeight": 1}}},
    }
    custom.create_cluster_custom_object(*QUEUES, foreign)
    app = create_app(kube_settings)
    with TestClient(app):
        with unit_of_work(portal_of(app).session_factory) as session:
            seed_example(session)
        reconcile_until(app, lambda: statuses(app)["nlp"] == TeamStatus.FAILED)
        with portal_of(app).session_factory() as session:
            nlp = repo.get_team(session, 1)
        assert "a queue named team-nlp already exists and is not managed by the portal" in (
            nlp.last_error or ""
        )
        assert queue(admin_api, "team-nlp")["spec"]["resources"]["gpu"]["quota"] == 5


def test_drift_is_repaired(kube_app: FastAPI, admin_api: Any) -> None:
    from sqlalchemy import select

    from app.core.models import AuditEvent

    reconcile_until(kube_app, lambda: all_ready(kube_app))
    custom = client.CustomObjectsApi(admin_api)
    custom.delete_cluster_custom_object(*QUEUES, "team-vision")
    custom.patch_cluster_custom_object(
        *QUEUES, "team-nlp", {"spec": {"resources": {"gpu": {"limit": 0}}}}
    )
    admission = client.AdmissionregistrationV1Api(admin_api)
    admission.delete_validating_admission_policy_binding("gpu-portal-queue-recommender")
    reconcile_until(kube_app, lambda: _queue_exists(admin_api, "team-vision"))
    assert queue(admin_api, "team-nlp")["spec"]["resources"]["gpu"]["limit"] == 1
    assert admission.read_validating_admission_policy_binding("gpu-portal-queue-recommender")
    with portal_of(kube_app).session_factory() as session:
        repaired = session.scalars(
            select(AuditEvent.summary).where(AuditEvent.action == "provisioning.drift_repaired")
        ).all()
    text = " ".join(repaired)
    from tests.web.conftest import client_for

    overview = client_for(kube_app, "admin@example.org", admin=True).get("/admin").text
    assert "Repaired in the cluster" in overview
    # Grouped by what was put back, each with the teams it was put back for.
    assert re.search(r"KAI queue put back</b> for [^<]*\bvision\b", overview), overview
    assert "queue team-vision does not exist" in text
    assert "queue team-nlp differs from the approved quota" in text
    assert "admission policy gpu-portal-queue-recommender does not exist" in text


def test_ready_teams_found_as_recorded_are_rechecked_together(kube_app: FastAPI) -> None:
    # The worker's steady re-check on the real cluster: every object of the three ready
    # teams is observed in the API server and found exactly as the steps record it, so
    # the teams are written back together, with no repair, no audit and no new message.
    from sqlalchemy import func, select, update

    from app.core import metrics
    from app.core.db import unit_of_work
    from app.core.models import AuditEvent, ProvisioningStep, Team, utcnow

    reconcile_until(kube_app, lambda: all_ready(kube_app))
    portal = portal_of(kube_app)
    recorded = select(
        ProvisioningStep.team_id,
        ProvisioningStep.step,
        ProvisioningStep.message,
        ProvisioningStep.updated_at,
    ).order_by(ProvisioningStep.team_id, ProvisioningStep.position)
    with portal.session_factory() as session:
        steps = session.execute(recorded).all()
        events = session.scalar(select(func.count()).select_from(AuditEvent))
    with unit_of_work(portal.session_factory) as session:
        # Teams without a cluster template (the fixture's have one, whose contents the
        # full pass checks inside the vCluster): every object observed here is as recorded.
        session.execute(update(Team).values(template_version_id=None, template_installed_id=None))
        session.execute(update(TeamSchedule).values(next_attempt_at=utcnow(), lease_until=None))
    counted, started = metrics.STEADY_RECHECKS._value.get(), utcnow()
    resync = portal.reconciler.timing.resync_seconds
    assert portal.reconciler.run_once() == 3
    assert metrics.STEADY_RECHECKS._value.get() - counted == 3, "each team in the batch"
    with portal.session_factory() as session:
        assert session.execute(recorded).all() == steps
        assert session.scalar(select(func.count()).select_from(AuditEvent)) == events
        for team in session.scalars(select(Team)):
            assert team.lease_owner is None
            assert team.next_attempt_at is not None
            assert team.next_attempt_at >= started + timedelta(seconds=resync - 1)


def _queue_exists(api: Any, name: str) -> bool:
    try:
        queue(api, name)
    except client.ApiException:
        return False
    return True


def test_usage_is_read_from_queue_status(kube_app: FastAPI, admin_api: Any) -> None:
    from tests.web.conftest import client_for

    reconcile_until(kube_app, lambda: all_ready(kube_app))
    lead = client_for(kube_app, "lead-nlp@example.org")
    # No queue carries status yet (as under KAI 0.1.0, which writes none): unknown, not 0.
    portal_of(kube_app).usage_cache.ttl = 0
    before = lead.get("/api/v1/teams/1").json()["gpu_share"]
    assert before["allocated"] is None
    assert "In use: not reported by this KAI version" in lead.get("/teams/1").text
    client.CustomObjectsApi(admin_api).patch_cluster_custom_object_status(
        *QUEUES,
        "team-nlp",
        {
            "status": {
                "allocated": {"nvidia.com/gpu": "500m", "cpu": "2"},
                "requested": {"nvidia.com/gpu": "1500m"},
            }
        },
    )
    kube = portal_of(kube_app).backend.kube  # type: ignore[attr-defined]
    lists = kube.calls["list"]
    share = lead.get("/api/v1/teams/1").json()["gpu_share"]
    # One read of usage and KAI's top level: queues (once), waiting pods, nodes, shards.
    assert kube.calls["list"] - lists == 4
    assert share["allocated"] == 0.5
    assert share["requested"] == 1.5
    assert share["borrowed"] == 0.17
    # Once KAI writes status somewhere, a queue without it is idle: 0, not unknown.
    admin = client_for(kube_app, "admin@example.org", admin=True)
    vision = admin.get("/api/v1/teams/2").json()["gpu_share"]
    assert vision["allocated"] == 0.0


def test_an_unreachable_api_server_is_failed_retried_and_recovers(
    kube_app: FastAPI, cluster: Any
) -> None:
    cluster.stop_apiserver()
    try:
        portal_of(kube_app).reconciler.run_once()
        with portal_of(kube_app).session_factory() as session:
            nlp = repo.get_team(session, 1)
        assert nlp.status == TeamStatus.FAILED
        assert "could not be reached" in (nlp.last_error or "")
        assert nlp.attempts == 1
    finally:
        cluster.start_apiserver()
    reconcile_until(kube_app, lambda: all_ready(kube_app))


def test_a_portal_killed_mid_provisioning_resumes_without_duplicates(
    kube_settings: Any, admin_api: Any, clean_cluster: None
) -> None:
    from datetime import timedelta

    from fastapi.testclient import TestClient
    from sqlalchemy import update

    from app.core.db import unit_of_work
    from app.core.models import utcnow
    from app.main import create_app
    from app.provisioning.backend import spec_for
    from app.teams.seed import seed_example

    first = create_app(kube_settings)
    with TestClient(first):
        with unit_of_work(portal_of(first).session_factory) as session:
            seed_example(session)
        claimed = portal_of(first).reconciler.claim()
        assert claimed == [1, 2, 3]
        # It got as far as the queue and the namespace of nlp, then the process died.
        with portal_of(first).session_factory() as session:
            spec = spec_for(repo.get_team(session, 1), repo.get_org(session))
        from app.core.models import Step

        portal_of(first).backend.apply(Step.QUEUE, spec)
        portal_of(first).backend.apply(Step.NAMESPACE, spec)
        # The first process never shuts down (a crash: no lifespan end hands its leases
        # back), so the second one starts while the first one's leases are in the table.
        second = create_app(kube_settings)
        with TestClient(second):
            assert portal_of(second).reconciler.run_once() == 0, "leases still protect the teams"
            with unit_of_work(portal_of(second).session_factory) as session:
                session.execute(
                    update(TeamSchedule).values(lease_until=utcnow() - timedelta(seconds=1))
                )
            reconcile_until(second, lambda: all_ready(second))
    names = sorted(
        q["metadata"]["name"]
        for q in client.CustomObjectsApi(admin_api).list_cluster_custom_object(*QUEUES)["items"]
    )
    assert names == ["ml-org", "team-nlp", "team-recommender", "team-vision"]
    # One control plane (the synced CoreDNS pod beside it is the vCluster's own).
    pods = (
        client.CoreV1Api(admin_api)
        .list_namespaced_pod("vcluster-nlp", label_selector="app=vcluster")
        .items
    )
    assert [p.metadata.name for p in pods] == ["nlp-0"]


def test_quota_change_and_decommission(kube_app: FastAPI, admin_api: Any) -> None:
    from tests.web.conftest import client_for

    reconcile_until(kube_app, lambda: all_ready(kube_app))
    lead = client_for(kube_app, "lead-nlp@example.org")
    admin = client_for(kube_app, "admin@example.org", admin=True)
    lead.refresh_csrf()
    admin.refresh_csrf()
    change = lead.api(
        "POST", "/api/v1/teams/1/quota-requests", {"gpu_quota": "0.2", "gpu_limit": "0.8"}
    )
    assert (
        admin.api("POST", f"/api/v1/requests/{change.json()['id']}/approve", {}).status_code == 200
    )
    reconcile_until(
        kube_app, lambda: queue(admin_api, "team-nlp")["spec"]["resources"]["gpu"]["quota"] == 0.2
    )
    assert queue(admin_api, "team-nlp")["spec"]["resources"]["gpu"]["limit"] == 0.8

    for team_id in (1, 2, 3):
        owner = client_for(
            kube_app, ["lead-nlp", "lead-vision", "lead-recommender"][team_id - 1] + "@example.org"
        )
        owner.refresh_csrf()
        assert owner.api("POST", f"/api/v1/teams/{team_id}/decommission").status_code == 200
        if team_id == 1:
            reconcile_until(
                kube_app, lambda: statuses(kube_app)["nlp"] == TeamStatus.DECOMMISSIONED, timeout=90
            )
            assert not _queue_exists(admin_api, "team-nlp")
            assert _queue_exists(admin_api, "ml-org"), "the parent stays while it has children"
            core = client.CoreV1Api(admin_api)
            assert "vcluster-nlp" not in [n.metadata.name for n in core.list_namespace().items]
    reconcile_until(
        kube_app,
        lambda: set(statuses(kube_app).values()) == {TeamStatus.DECOMMISSIONED},
        timeout=90,
    )
    assert not _queue_exists(admin_api, "ml-org"), "the parent goes with its last child"


def test_a_grant_raises_the_queue_at_its_start_and_lowers_it_at_its_end(
    kube_app: FastAPI, admin_api: Any
) -> None:
    """A temporary grant on the real API server's Queue, with a clock the test holds:
    both of the queue's values raised at the grant's start and back at its end, without
    a repair (a change the portal made)."""
    from app.core.db import unit_of_work
    from app.core.models import AuditEvent, User, utcnow
    from app.teams import grants
    from tests.web.conftest import client_for

    reconcile_until(kube_app, lambda: all_ready(kube_app))
    admin = client_for(kube_app, "admin@example.org", admin=True)
    admin.refresh_csrf()
    assert admin.api("PUT", "/api/v1/pool", {"gpus": "2"}).status_code == 200
    start = utcnow() + timedelta(hours=1)
    factory = portal_of(kube_app).session_factory
    with unit_of_work(factory) as session:
        team = repo.get_live_team_by_name(session, "vision")
        lead = session.query(User).filter(User.email == "lead-vision@example.org").one()
        asked = grants.parse_ask(
            {
                "gpus": "0.5",
                "limit": "1",
                "starts_at": start.isoformat(),
                "ends_at": (start + timedelta(days=1)).isoformat(),
                "reason": "a two-day fine-tuning run",
            },
            now=utcnow(),
            max_days=31,
        )
        assert team is not None
        grant_id = grants.ask(session, actor=lead, team=team, asked=asked, now=utcnow()).id
    assert admin.api("POST", f"/api/v1/grants/{grant_id}/approve").status_code == 200

    def gpu() -> tuple[float, float]:
        spec = queue(admin_api, "team-vision")["spec"]["resources"]["gpu"]
        return spec["quota"], spec["limit"]

    assert gpu() == (0.33, 1), "not before its start"
    with unit_of_work(factory) as session:
        assert grants.tick(session, start) == 1
    reconcile_until(kube_app, lambda: gpu() == (0.83, 2))
    with unit_of_work(factory) as session:
        assert grants.tick(session, start + timedelta(days=1)) == 1
    reconcile_until(kube_app, lambda: gpu() == (0.33, 1))
    with factory() as session:
        repaired = session.query(AuditEvent).filter(
            AuditEvent.action == "provisioning.drift_repaired"
        )
        assert [e.summary for e in repaired] == []


def test_vcluster_cli_failures_are_shown(kube_app: FastAPI, tmp_path: Path) -> None:
    """Real failures of the real CLI: a chart mirror that has no such chart, then one that
    never answers (the CLI and the helm it runs are stopped at the time-out)."""
    backend = kubernetes_backend(kube_app)
    good = backend.settings
    with serve_folder(tmp_path) as empty_mirror:
        backend.settings = good.model_copy(update={"vcluster_chart_repo": empty_mirror})
        reconcile_until(kube_app, lambda: statuses(kube_app)["nlp"] == TeamStatus.FAILED)
    error = _error(kube_app, 1)
    assert "installing vCluster nlp: vcluster exited with 1" in error
    assert "404" in error or "not found" in error.lower(), error
    with hanging_server() as silent:
        backend.settings = good.model_copy(
            update={"vcluster_chart_repo": silent, "vcluster_timeout_seconds": 2.0}
        )
        reconcile_until(kube_app, lambda: "did not finish in 2s" in _error(kube_app, 1))
        assert not _processes_of(tool("helm"), silent), "helm was left running after the time-out"
    backend.settings = good
    reconcile_until(kube_app, lambda: all_ready(kube_app))


def _processes_of(executable: Path, mentioning: str) -> list[int]:
    """Processes of ``executable`` whose command line names ``mentioning`` (this test's
    own server: another test running helm at the same time is not this one's leftover,
    and an orphaned helm is no longer our child, so ancestry cannot tell)."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if (entry / "exe").resolve() != executable.resolve():
                    continue
                if mentioning.encode() in (entry / "cmdline").read_bytes():
                    found.append(int(entry.name))
            except OSError:
                continue
    return found


def _error(app: FastAPI, team_id: int) -> str:
    with portal_of(app).session_factory() as session:
        return repo.get_team(session, team_id).last_error or ""


def test_what_the_portals_rbac_does_not_allow(kube_app: FastAPI, cluster: Any) -> None:
    from kubernetes import config as kube_config

    reconcile_until(kube_app, lambda: all_ready(kube_app))
    portal = kube_config.new_client_from_config(portal_of(kube_app).settings.kubeconfig)
    core = client.CoreV1Api(portal)
    assert len(core.list_namespaced_secret("vcluster-nlp").items) >= 1, "its own namespaces"
    refused = [
        lambda: core.list_namespaced_secret("kube-system"),
        lambda: core.list_namespaced_secret("default"),
        # It reads pods everywhere (the vCluster chart's node sync needs that, so the
        # portal must hold it to grant it), but changes them nowhere but its namespaces.
        lambda: core.create_namespaced_pod(
            "default", {"metadata": {"name": "x"}, "spec": {"containers": [{"name": "x"}]}}
        ),
        lambda: core.delete_collection_namespaced_pod("default"),
        # No kubelet access: the vCluster's kubelet proxies are off.
        lambda: core.connect_get_node_proxy("any"),
        lambda: core.delete_node("any"),
        lambda: client.CustomObjectsApi(portal).patch_cluster_custom_object_status(
            *QUEUES, "team-nlp", {"status": {"allocated": {"nvidia.com/gpu": "8"}}}
        ),
        lambda: client.RbacAuthorizationV1Api(portal).create_namespaced_role_binding(
            "vcluster-nlp",
            {
                "metadata": {"name": "escalate"},
                "subjects": [{"kind": "User", "name": "mallory"}],
                "roleRef": {
                    "apiGroup": "rbac.authorization.k8s.io",
                    "kind": "ClusterRole",
                    "name": "cluster-admin",
                },
            },
        ),
    ]
    for call in refused:
        with pytest.raises(client.ApiException) as denied:
            call()
        assert denied.value.status == 403


def test_the_helm_installer_does_the_same(
    kube_settings: Any, admin_api: Any, clean_cluster: None
) -> None:
    from fastapi.testclient import TestClient

    from app.core.db import unit_of_work
    from app.main import create_app
    from app.teams.seed import seed_example

    app = create_app(kube_settings.model_copy(update={"vcluster_installer": "helm"}))
    with TestClient(app):
        with unit_of_work(portal_of(app).session_factory) as session:
            seed_example(session)
        reconcile_until(app, lambda: all_ready(app))
        pods = (
            client.CoreV1Api(admin_api)
            .list_namespaced_pod("vcluster-vision", label_selector="app=vcluster")
            .items
        )
        assert [p.metadata.name for p in pods] == ["vision-0"]
        sets = client.AppsV1Api(admin_api).list_namespaced_stateful_set("vcluster-vision").items
        assert [s.metadata.labels["chart"] for s in sets] == ["vcluster-0.36.1"]


def test_hand_edits_to_the_queue_pinning_policy_are_restored(
    kube_app: FastAPI, admin_api: Any
) -> None:
    """Each of these edits lets a team's pods escape its queue while both objects still
    exist; the next pass must put back exactly what the portal wants, and say so."""
    from sqlalchemy import select

    from app.core.models import AuditEvent

    reconcile_until(kube_app, lambda: all_ready(kube_app))
    admission = client.AdmissionregistrationV1Api(admin_api)
    name = "gpu-portal-queue-nlp"
    wanted_policy = admission.read_validating_admission_policy(name).spec.to_dict()
    wanted_binding = admission.read_validating_admission_policy_binding(name).spec.to_dict()
    edits = [
        (
            "binding",
            {
                "spec": {
                    "matchResources": {
                        "namespaceSelector": {
                            "matchLabels": {"kubernetes.io/metadata.name": "elsewhere"}
                        }
                    }
                }
            },
        ),
        ("binding", {"spec": {"validationActions": ["Audit"]}}),
        ("policy", {"spec": {"failurePolicy": "Ignore"}}),
        (
            "policy",
            {"spec": {"matchConditions": [{"name": "never", "expression": "false"}]}},
        ),
    ]
    for kind, patch in edits:
        if kind == "binding":
            admission.patch_validating_admission_policy_binding(name, patch)
        else:
            admission.patch_validating_admission_policy(name, patch)
        reconcile_until(
            kube_app,
            lambda: (
                admission.read_validating_admission_policy(name).spec.to_dict() == wanted_policy
                and admission.read_validating_admission_policy_binding(name).spec.to_dict()
                == wanted_binding
            ),
        )
    with portal_of(kube_app).session_factory() as session:
        repaired = session.scalars(
            select(AuditEvent.summary).where(AuditEvent.action == "provisioning.drift_repaired")
        ).all()
    text = " ".join(repaired)
    assert "spec.matchResources.namespaceSelector.matchLabels" in text
    assert "spec.validationActions" in text
    assert "spec.failurePolicy differs" in text
    assert "spec.matchConditions added" in text


def test_a_team_in_a_second_pool_gets_a_labelled_queue_there_and_pods_must_match_it(
    kube_app: FastAPI, admin_api: Any
) -> None:
    """The team's queue in the L40S pool and the org's queue there, both labelled for that
    pool's shard; the policy admits a pod only with a queue and the pool label that goes
    with it; leaving the pool deletes the team's queue there, and the org's with its last
    team."""
    from app.core.db import unit_of_work
    from app.core.models import Team, utcnow
    from app.core.quota import Quota

    reconcile_until(kube_app, lambda: all_ready(kube_app))
    factory = portal_of(kube_app).session_factory

    def hold_in_l40s(value: Quota | None) -> None:
        with unit_of_work(factory) as session:
            org = repo.get_org(session)
            l40s = next(p for p in repo.get_pools(session, org.id) if p.name == "l40s")
            team = session.get_one(Team, 1)
            if value is None:
                for line in [ln for ln in team.quota_lines if ln.pool_id == l40s.id]:
                    team.quota_lines.remove(line)
            else:
                team.set_quota(l40s, value)
            team.desired_generation += 1
            team.next_attempt_at = utcnow()

    hold_in_l40s(Quota.of_gpu(150, 200, weight=300))
    reconcile_until(kube_app, lambda: _queue_exists(admin_api, "team-nlp-l40s"))
    reconcile_until(kube_app, lambda: all_ready(kube_app))
    leaf, parent = queue(admin_api, "team-nlp-l40s"), queue(admin_api, "ml-org-l40s")
    assert leaf["metadata"]["labels"]["kai.scheduler/node-pool"] == "l40s"
    assert parent["metadata"]["labels"]["kai.scheduler/node-pool"] == "l40s"
    assert leaf["spec"]["parentQueue"] == "ml-org-l40s"
    assert leaf["spec"]["resources"]["gpu"] == {"quota": 1.5, "limit": 2, "overQuotaWeight": 3}
    assert parent["spec"]["resources"]["gpu"] == {"quota": 2, "limit": -1, "overQuotaWeight": 1}
    assert "kai.scheduler/node-pool" not in queue(admin_api, "team-nlp")["metadata"]["labels"]

    core = client.CoreV1Api(admin_api)
    wrong = synced_pod("l40s-unlabelled", "team-nlp-l40s", "kai-scheduler")
    pairs = "kai.scheduler/queue: team-nlp-l40s with kai.scheduler/node-pool: l40s"
    # The policy's new rule is in force a moment after it is written (the API server's
    # informer catches up): until then the old one answers.
    deadline = time.monotonic() + 20
    refused = refused_once_in_force(core, "vcluster-nlp", wrong)
    while pairs not in refused.body and time.monotonic() < deadline:
        time.sleep(0.5)
        refused = refused_once_in_force(core, "vcluster-nlp", wrong)
    assert refused.status == 403
    assert pairs in refused.body
    crossed = synced_pod("default-labelled", "team-nlp", "kai-scheduler")
    crossed["metadata"]["labels"]["kai.scheduler/node-pool"] = "l40s"
    assert refused_once_in_force(core, "vcluster-nlp", crossed).status == 403
    right = synced_pod("l40s-right", "team-nlp-l40s", "kai-scheduler")
    right["metadata"]["labels"]["kai.scheduler/node-pool"] = "l40s"
    assert core.create_namespaced_pod("vcluster-nlp", right).metadata.name == "l40s-right"
    assert (
        core.create_namespaced_pod(
            "vcluster-nlp", synced_pod("default-right", "team-nlp", "kai-scheduler")
        ).metadata.name
        == "default-right"
    )

    hold_in_l40s(None)
    reconcile_until(kube_app, lambda: not _queue_exists(admin_api, "team-nlp-l40s"))
    assert not _queue_exists(admin_api, "ml-org-l40s"), (
        "the pool's org queue goes with its last team"
    )
    assert _queue_exists(admin_api, "team-nlp")
    assert _queue_exists(admin_api, "ml-org")

    # Decommissioned, the team's queues go in every pool, and the pool's org queue too.
    hold_in_l40s(Quota.of_gpu(100, 200))
    reconcile_until(kube_app, lambda: _queue_exists(admin_api, "team-nlp-l40s"))
    from tests.web.conftest import client_for

    lead = client_for(kube_app, "lead-nlp@example.org")
    assert lead.api("POST", "/api/v1/teams/1/decommission").status_code == 200
    reconcile_until(
        kube_app, lambda: statuses(kube_app)["nlp"] == TeamStatus.DECOMMISSIONED, timeout=90
    )
    assert not _queue_exists(admin_api, "team-nlp-l40s")
    assert not _queue_exists(admin_api, "ml-org-l40s")
    assert not _queue_exists(admin_api, "team-nlp")
