"""KAI's decisions per workload: what the host holds (PodGroups and Evict events, in the
shapes KAI v0.17.0's code writes them) read into the team's words, each eviction kept once
and told once per burst, long waits on the timeline."""

from __future__ import annotations

import math
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import Any

from sqlalchemy import func, select
from sqlalchemy.orm import Session, sessionmaker

from app.adapters.k8s.decisions import evictions_of, pod_gpus, queues_in, workloads_of
from app.adapters.simulated import PlayedWorkload, SimulatedBackend, judged
from app.core.db import unit_of_work
from app.core.models import AuditEvent, Notification, User, WorkloadEvent
from app.provisioning.backend import (
    Eviction,
    QueueFigures,
    ResourceQuota,
    TeamSpec,
    Workload,
    each_resource,
)
from app.provisioning.decisions import DecisionsPass, as_last_seen, evicted_words, explain
from app.provisioning.reconciler import Reconciler
from app.provisioning.specs import spec_of
from app.provisioning.workloads import Workloads
from app.teams import repository as teams_repo
from tests.conftest import settings_for
from tests.provisioning.test_sleep import ready_team

_ANY = ResourceQuota(0.33, 1.0, 1.0)
SPEC = TeamSpec(
    "nlp", "vcluster-nlp", "nlp", "team-nlp", "org", 100, each_resource(_ANY), each_resource(_ANY)
)
T0 = "2026-12-07T10:00:00Z"
UID = "0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0"


def host_pod(name: str, *, bound: bool, gpus: str = "0.5", group: str = "") -> dict[str, Any]:
    """A pod as the vCluster syncer writes it on the host (v0.36)."""
    host = f"{name}-x-default-x-nlp"
    return {
        "metadata": {
            "name": host,
            "namespace": "vcluster-nlp",
            "creationTimestamp": T0,
            "labels": {"vcluster.loft.sh/managed-by": "nlp", "kai.scheduler/queue": "team-nlp"},
            "annotations": {
                "vcluster.loft.sh/object-name": name,
                "vcluster.loft.sh/object-namespace": "default",
                "gpu-fraction": gpus,
                "pod-group-name": group or f"pg-{host}-{UID}",
            },
        },
        "spec": {"nodeName": "gpu-node-1" if bound else "", "containers": [{"name": "c"}]},
        "status": {"phase": "Running" if bound else "Pending", "startTime": T0},
    }


def pod_group(name: str, reason: str, details: dict[str, Any], **spec: Any) -> dict[str, Any]:
    """A PodGroup with the scheduling condition KAI's status updater writes."""
    return {
        "metadata": {"name": name, "namespace": "vcluster-nlp"},
        "spec": {"queue": "team-nlp", **spec},
        "status": {
            "schedulingConditions": [
                {
                    "type": "UnschedulableOnNodePool",
                    "nodePool": "default",
                    "reason": "Unschedulable",
                    "message": "Unschedulable",
                    "lastTransitionTime": "2026-12-07T10:00:05Z",
                    "status": "True",
                    "transitionID": "0",
                    "reasons": [
                        {"reason": reason, "message": f"{reason} said", "details": details}
                    ],
                }
            ]
        },
    }


def queue_details(**resources: str) -> dict[str, Any]:
    """``details.queueDetails`` as KAI writes it: resource lists with GPUs as quantities
    (a fraction in milli, ``ResourceRequirements.ToResourceList``)."""
    names = {
        "requested": "queueRequestedResources",
        "deserved": "queueDeservedResources",
        "allocated": "queueAllocatedResources",
        "np": "queueAllocatedNonPreemptibleResources",
        "limit": "queueResourceLimits",
        "asked": "podGroupRequestedResources",
        "asked_np": "podGroupRequestedNonPreemptibleResources",
    }
    found: dict[str, Any] = {"name": "team-nlp"}
    for key, value in resources.items():
        found[names[key]] = {"cpu": "0", "memory": "0", "nvidia.com/gpu": value}
    return {"queueDetails": found}


def test_a_waiting_pod_reads_as_kai_judged_it_in_the_teams_words() -> None:
    over = host_pod("sweep-2", bound=False, group="pg-over")
    nonp = host_pod("finetune", bound=False, group="pg-nonp")
    running = host_pod("train", bound=True, gpus="0.33")
    silent = host_pod("fresh", bound=False, group="pg-silent")
    groups = {
        "pg-over": pod_group(
            "pg-over",
            "OverLimit",
            queue_details(allocated="1", limit="1", deserved="330m", asked="500m"),
        ),
        "pg-nonp": pod_group(
            "pg-nonp",
            "NonPreemptibleOverQuota",
            queue_details(deserved="330m", np="0", asked="500m", asked_np="500m"),
            preemptibility="non-preemptible",
        ),
        "pg-silent": {"metadata": {"name": "pg-silent"}, "spec": {}, "status": {}},
    }
    found = workloads_of([running, over, nonp, silent], groups, SPEC)
    assert [(w.name, w.running) for w in found] == [
        ("fresh", False),
        ("finetune", False),
        ("sweep-2", False),
        ("train", True),
    ]
    fresh, finetune, sweep, train = found
    assert train.gpus == 0.33
    assert train.preemptible
    assert not explain(train)
    assert sweep.since == datetime(2026, 12, 7, 10, 0, 5, tzinfo=UTC)  # KAI's verdict
    figures = sweep.reasons[0].figures
    assert figures is not None
    assert (figures.allocated, figures.limit, figures.asked, figures.deserved) == (
        1.0,
        1.0,
        0.5,
        0.33,
    )
    why = explain(sweep)[0]
    assert why.kai == "OverLimit"
    assert why.said == (
        "Your queue's limit is 1 GPU and your running work uses 1: this 0.5-GPU workload "
        "would take it to 1.5. It waits until some of it ends."
    )
    assert why.remedy == (
        "Let 0.5 GPU of running work end, or ask for a limit of at least 1.5 GPU (a quota change)."
    )
    assert not finetune.preemptible
    said = explain(finetune)[0]
    assert said.kai == "NonPreemptibleOverQuota"
    assert said.said.startswith(
        "Your guarantee is 0.33 GPU and this workload is non-preemptible: it can only start "
        "within the guarantee"
    )
    assert "guarantee of at least 0.5 GPU" in said.remedy
    # Where KAI wrote nothing, nothing is made up: it says so.
    assert fresh.reasons == ()
    assert explain(fresh)[0].kai == ""
    assert "KAI has not said why" in explain(fresh)[0].said


def test_an_unknown_reason_is_shown_in_kais_own_words_and_a_limit_of_the_org_as_the_orgs() -> None:
    group = pod_group("pg-x", "SomethingNew", {})
    work = workloads_of([host_pod("x", bound=False, group="pg-x")], {"pg-x": group}, SPEC)[0]
    assert explain(work)[0].said == "KAI says: SomethingNew said"
    parent = pod_group("pg-y", "OverLimit", queue_details(allocated="2", limit="2", asked="1"))
    parent["status"]["schedulingConditions"][0]["reasons"][0]["details"]["queueDetails"]["name"] = (
        "org-ml"
    )
    work = workloads_of([host_pod("y", bound=False, group="pg-y")], {"pg-y": parent}, SPEC)[0]
    why = explain(work)[0]
    assert why.said.startswith("Your org's queue's limit is 2 GPU and the org running work")
    assert "admin raises the org's limit" in why.remedy
    # A condition with only its (older) reason and message: those, as KAI wrote them.
    bare = pod_group("pg-z", "", {})
    condition = bare["status"]["schedulingConditions"][0]
    del condition["reasons"]
    condition["message"] = "0/2 nodes are available: 2 node(s) didn't have enough GPUs."
    work = workloads_of([host_pod("z", bound=False, group="pg-z")], {"pg-z": bare}, SPEC)[0]
    assert [(r.reason, r.message) for r in work.reasons] == [
        ("Unschedulable", "0/2 nodes are available: 2 node(s) didn't have enough GPUs.")
    ]
    assert explain(work)[0].said == (
        "KAI says: 0/2 nodes are available: 2 node(s) didn't have enough GPUs."
    )


def test_the_vclusters_own_coredns_is_not_the_teams_work() -> None:
    dns = host_pod("coredns-5dfd945795-tdhlx", bound=True, gpus="0")
    dns["metadata"]["annotations"]["vcluster.loft.sh/object-namespace"] = "kube-system"
    dns["metadata"]["labels"]["k8s-app"] = "vcluster-kube-dns"
    mine = host_pod("my-dns", bound=True, gpus="0")  # a lead's pod in kube-system
    mine["metadata"]["annotations"]["vcluster.loft.sh/object-namespace"] = "kube-system"
    found = workloads_of([dns, mine], {}, SPEC)
    assert [(w.namespace, w.name) for w in found] == [("kube-system", "my-dns")]


def test_gpus_asked_are_read_from_the_fraction_or_the_whole_gpus() -> None:
    pod = host_pod("w", bound=True)
    pod["metadata"]["annotations"].pop("gpu-fraction")
    pod["spec"]["containers"] = [
        {"name": "a", "resources": {"limits": {"nvidia.com/gpu": "2"}}},
        {"name": "b", "resources": {"limits": {"nvidia.com/gpu": 1}}},
    ]
    assert pod_gpus(pod) == 3.0


RECLAIM = (
    "Pod vcluster-nlp/sweep-3-x-default-x-nlp was preempted by workload "
    "vcluster-vision/pg-eval-x-default-x-vision-1.\n"
    "team-nlp uses <GPU: 1, CPU: 0 (cores), memory: 0 (GB)> with a quota of "
    "<GPU: 0.33, CPU: 0 (cores), memory: 0 (GB)>, fair-share of "
    "<GPU: 0.33, CPU: 0 (cores), memory: 0 (GB)> and queue priority of <100>.\n"
    "team-vision uses <GPU: 0, CPU: 0 (cores), memory: 0 (GB)> with a quota of "
    "<GPU: 0.33, CPU: 0 (cores), memory: 0 (GB)>, fair-share of "
    "<GPU: Unlimited, CPU: 0 (cores), memory: 0 (GB)> and queue priority of <100>."
)


def evict_event(group: str, uid: str = "e-1", **notes: str) -> dict[str, Any]:
    """KAI's ``Evict`` event, as ``AnnotatedEventf`` records it on the PodGroup."""
    return {
        "metadata": {
            "name": f"{group}.1",
            "uid": uid,
            "annotations": {
                "num-evicted-pods": "1",
                "evictor-action-type": "reclaim",
                "evictor-pod-group-name": "pg-eval-x-default-x-vision-1",
                "evictor-pod-group-namespace": "vcluster-vision",
                **notes,
            },
        },
        "involvedObject": {"kind": "PodGroup", "name": group, "namespace": "vcluster-nlp"},
        "reason": "Evict",
        "message": RECLAIM,
        "lastTimestamp": "2026-12-07T12:30:00Z",
        "type": "Normal",
    }


def test_an_eviction_names_the_workload_the_action_and_the_preemptors_namespace() -> None:
    pod = host_pod("sweep-3", bound=True, gpus="0.67")
    group_name = pod["metadata"]["annotations"]["pod-group-name"]
    group = {
        "metadata": {
            "name": group_name,
            # A bare pod is its own top owner: the PodGroup inherits its annotations.
            "annotations": dict(pod["metadata"]["annotations"]),
            "ownerReferences": [{"kind": "Pod", "name": pod["metadata"]["name"]}],
        }
    }
    found = evictions_of(
        [evict_event(group_name)], {group_name: group}, {pod["metadata"]["name"]: pod}, SPEC
    )
    assert len(found) == 1
    e = found[0]
    assert (e.namespace, e.name, e.action, e.pods, e.by_namespace) == (
        "default",
        "sweep-3",
        "reclaim",
        1,
        "vcluster-vision",
    )
    assert e.gpus == 0.67
    assert e.started == datetime(2026, 12, 7, 10, 0, tzinfo=UTC)
    own, other = e.queues
    assert (own.queue, own.allocated, own.deserved, own.fair_share, own.priority) == (
        "team-nlp",
        1.0,
        0.33,
        0.33,
        100,
    )
    assert other.fair_share == math.inf
    # Gone from the host (the pod deleted, its PodGroup collected): the syncer's
    # translation of the name still says whose it was.
    gone = evictions_of([evict_event(group_name)], {}, {}, SPEC)[0]
    assert (gone.namespace, gone.name, gone.gpus) == ("default", "sweep-3", None)
    # The pod gone, its PodGroup still there: what KAI's pod-group controller last wrote.
    group["status"] = {"resourcesStatus": {"allocated": {"nvidia.com/gpu": "670m"}}}
    kept = evictions_of([evict_event(group_name)], {group_name: group}, {}, SPEC)[0]
    assert (kept.name, kept.gpus) == ("sweep-3", 0.67)
    assert queues_in("Pod a/b was preempted and rescheduled due to bin packing") == ()
    # Pod and group both gone: what the last reading saw of it running.
    seen = workloads_of([pod], {group_name: group}, SPEC)
    assert [(w.name, w.running) for w in seen] == [("sweep-3", True)]
    (told,) = as_last_seen([gone], seen)
    assert (told.name, told.gpus, told.started) == ("sweep-3", 0.67, seen[0].since)
    assert as_last_seen([gone], []) == [gone], "never seen: not known"


def test_each_eviction_is_kept_once_and_told_once_per_burst(
    session_factory: sessionmaker[Session], reconciler: Reconciler, db_url: str
) -> None:
    nlp = ready_team(session_factory, reconciler, "nlp")
    vision = ready_team(session_factory, reconciler, "vision")
    now = datetime.now(UTC)

    def eviction(uid: str, minutes: int) -> Eviction:
        at = now - timedelta(minutes=minutes)
        return Eviction(
            uid=uid,
            group=f"pg-{uid}",
            namespace="default",
            name=f"sweep-{uid}",
            at=at,
            action="reclaim",
            pods=1,
            by_namespace="vcluster-vision",
            gpus=0.5,
            started=at - timedelta(hours=2),
            queues=(
                QueueFigures("team-nlp", allocated=1.0, deserved=0.33, fair_share=0.33),
                QueueFigures("team-vision", allocated=0.0, deserved=0.33, fair_share=0.5),
            ),
        )

    class Reader:
        evicted: list[Eviction] = []

        def refused_pods(self, spec: TeamSpec) -> list[Any]:
            return []

        def workloads(self, spec: TeamSpec) -> list[Workload]:
            return []

        def evictions(self, spec: TeamSpec) -> list[Eviction]:
            return list(self.evicted) if spec.team == "nlp" else []

    reader = Reader()
    settings = settings_for(db_url, eviction_burst_minutes=10)
    run = DecisionsPass(session_factory, reader, settings)

    def told() -> list[str]:
        with session_factory() as session:
            lead = session.scalars(select(User.id).where(User.email == "lead-nlp@example.org"))
            return list(
                session.scalars(
                    select(Notification.title)
                    .where(
                        Notification.event == "workload.evicted",
                        Notification.user_id == lead.one(),
                    )
                    .order_by(Notification.id)
                )
            )

    reader.evicted = [eviction("a", 3), eviction("b", 2)]
    assert run.run_once(now) == 2
    assert run.run_once(now) == 0, "kept once: the event's uid is its key"
    assert told() == ["KAI evicted 2 workloads of nlp for team vision (1 GPU)"]
    reader.evicted.append(eviction("c", 1))
    assert run.run_once(now + timedelta(minutes=5)) == 1
    assert len(told()) == 1, "within the burst: no second notice"
    run.run_once(now + timedelta(minutes=11))
    assert told()[-1] == "KAI evicted 1 workload of nlp for team vision (0.5 GPU)"
    with session_factory() as session:
        rows = session.scalars(select(WorkloadEvent).order_by(WorkloadEvent.at)).all()
        assert [(r.workload, r.by_team_id, r.gpu_centi, r.ran_seconds) for r in rows] == [
            ("default/sweep-a", vision, 50, 7200),
            ("default/sweep-b", vision, 50, 7200),
            ("default/sweep-c", vision, 50, 7200),
        ]
        assert {r.team_id for r in rows} == {nlp}
        assert rows[0].lost_gpu_hours == 1.0
        how = evicted_words(rows[0], "vision")
        assert how.action == "Reclaimed by team vision"
        assert how.why.startswith(
            "Your queue used 1 GPU with a guarantee of 0.33 and a fair share of 0.33; "
            "vision's queue used 0 of its fair share of 0.5."
        )
        # The timeline (its own time: when they were read) says when they happened.
        summaries = session.scalars(
            select(AuditEvent.summary)
            .where(AuditEvent.action == "workload.evicted")
            .order_by(AuditEvent.id)
        ).all()
    a, b, c = (now - timedelta(minutes=m) for m in (3, 2, 1))
    assert summaries == [
        f"KAI evicted 2 workloads of nlp for team vision (reclaim) between "
        f"{a:%Y-%m-%d %H:%M} and {b:%H:%M} UTC",
        f"KAI evicted 1 workload of nlp for team vision (reclaim) at {c:%Y-%m-%d %H:%M} UTC",
    ]


def test_a_long_wait_is_written_on_the_timeline_once(
    session_factory: sessionmaker[Session], reconciler: Reconciler, db_url: str
) -> None:
    ready_team(session_factory, reconciler, "nlp")
    since = datetime.now(UTC) - timedelta(minutes=45)
    waiting = Workload("default", "big", "", "team-nlp", 1.0, False, since, True, (), "pg-big")
    fresh = replace_since(waiting, datetime.now(UTC), "pg-fresh")

    class Reader:
        def refused_pods(self, spec: TeamSpec) -> list[Any]:
            return []

        def workloads(self, spec: TeamSpec) -> list[Workload]:
            return [waiting, fresh]

        def evictions(self, spec: TeamSpec) -> list[Eviction]:
            return []

    reader = Reader()
    cache = Workloads(reader)
    run = DecisionsPass(session_factory, reader, settings_for(db_url), cache)
    run.run_once()
    run.run_once()
    with session_factory() as session:
        lines = session.scalars(
            select(AuditEvent.summary).where(AuditEvent.action == "workload.waiting")
        ).all()
        assert len(lines) == 1
        assert lines[0].startswith("default/big of nlp has waited 45 min for 1 GPU: KAI has")
        assert session.scalar(select(func.count()).select_from(WorkloadEvent)) == 1
    # The pass's reading is the team page's: served without another read.
    assert [w.name for w in cache.get(SPEC).pods] == ["big", "fresh"]
    cache.close()


def replace_since(work: Workload, since: datetime, group: str) -> Workload:
    return replace(work, name="fresh", since=since, group=group)


def test_the_simulated_kai_applies_kais_two_capacity_checks_in_its_order() -> None:
    entry = ResourceQuota(0.33, 1.0, 1.0)
    small = PlayedWorkload("default", "s", gpus=0.25)
    assert judged(small, "team-nlp", entry, allocated=0.5) == ()
    over = judged(small, "team-nlp", entry, allocated=0.9)
    assert [r.reason for r in over] == ["OverLimit"]
    assert over[0].message == (
        "team-nlp quota has reached the allowable limit of GPUs. Limit is 1 GPUs, currently "
        "0.9 GPUs allocated and workload requested 0.25 GPUs"
    )
    nonp = PlayedWorkload("default", "n", gpus=0.5, preemptible=False)
    assert [r.reason for r in judged(nonp, "team-nlp", entry, allocated=0.0)] == [
        "NonPreemptibleOverQuota"
    ]
    # The limit is checked first, as KAI's capacity policy does.
    assert [r.reason for r in judged(nonp, "team-nlp", entry, allocated=0.8)] == ["OverLimit"]


def test_the_example_org_waits_and_was_reclaimed_on_the_simulated_cluster(
    session_factory: sessionmaker[Session], db_url: str
) -> None:
    backend = SimulatedBackend(step_seconds=0, example_work=True)
    settings = settings_for(db_url)
    nlp = ready_team(session_factory, Reconciler(session_factory, backend, settings))
    with unit_of_work(session_factory) as session:
        spec = spec_of(session, teams_repo.get_team(session, nlp), settings)
    # Within its limit (0.25 + 0.5 <= 1) but above its 0.33 guarantee, non-preemptible.
    backend.pin_usage("nlp", allocated=0.25, requested=0.75)
    found = backend.workloads(spec)
    waiting = [w for w in found if not w.running]
    assert [(w.name, w.gpus, w.reasons[0].reason) for w in waiting] == [
        ("finetune-13b", 0.5, "NonPreemptibleOverQuota")
    ]
    # Its queue busier (0.75 + 0.5 > 1): the limit is what KAI names first.
    backend.pin_usage("nlp", allocated=0.75, requested=1.25)
    again = [w for w in backend.workloads(spec) if not w.running]
    assert [w.reasons[0].reason for w in again] == ["OverLimit"]
    assert backend.evictions(spec)[0].by_namespace == "vcluster-vision"
