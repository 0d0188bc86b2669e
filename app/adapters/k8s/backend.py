"""The `kubernetes` cluster backend: KAI queues, namespaces, admission policies, vClusters.

Only this package imports the `kubernetes` client; everything else speaks in the portal's
terms (TeamSpec, Step, Observation). The work is split into parts over one connection
(``client.Kube``): cluster-scoped objects and the namespace (``objects``), the vCluster
installer (``vcluster``), the vCluster's kubeconfig secret (``kubeconfig``) and the
personal credentials issued inside each vCluster (``access``).
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Collection, Mapping
from datetime import datetime
from decimal import Decimal
from typing import Any

from kubernetes import client
from kubernetes.utils import parse_quantity

from app.access.credentials import Account, IssuedCredential, Person
from app.adapters.k8s import manifests as m
from app.adapters.k8s.access import Access
from app.adapters.k8s.client import Kube
from app.adapters.k8s.decisions import KaiDecisions
from app.adapters.k8s.kubeconfig import Kubeconfigs
from app.adapters.k8s.objects import ClusterObjects
from app.adapters.k8s.vcluster import VClusterInstaller
from app.core.config import Settings
from app.core.models import Step
from app.provisioning.backend import (
    DONE,
    BackendError,
    Eviction,
    Observation,
    RefusedPod,
    TeamSpec,
    TemplateCheck,
    Workload,
)
from app.teams.pools import NodePool
from app.usage.sources import ClusterTop, QueueUsage, TopQueue

__all__ = ["KubernetesBackend"]

# Slow namespaced checks that an apply of a step makes stale.
DEEP_CHECKS_OF = {
    Step.NAMESPACE: ("role binding",),
    Step.VCLUSTER: ("vCluster", "kubeconfig"),
}
GPU = "nvidia.com/gpu"


# usage() hands its listing of every queue to the cluster_top() that follows it (once).
QUEUES_REUSED_SECONDS = 2.0


class KubernetesBackend:
    kind = "kubernetes"
    simulated = False

    def __init__(self, settings: Settings, api: client.ApiClient | None = None) -> None:
        self.kube = Kube(settings, api)
        self.objects = ClusterObjects(self.kube)
        self.vclusters = VClusterInstaller(self.kube)
        self.kubeconfigs = Kubeconfigs(self.kube)
        self.access = Access(self.kube, self.kubeconfigs)
        self.decisions = KaiDecisions(self.kube)
        self._queues_read: tuple[float, Any] | None = None

    @property
    def settings(self) -> Settings:
        return self.kube.settings

    @settings.setter
    def settings(self, value: Settings) -> None:
        self.kube.settings = value

    @property
    def requests(self) -> int:
        return self.kube.requests

    @property
    def calls(self) -> Counter[str]:
        return self.kube.calls

    # --- passes ---------------------------------------------------------------------

    def begin_pass(self) -> None:
        self.objects.begin_pass()

    def end_pass(self) -> None:
        self.objects.end_pass()

    # --- steps ----------------------------------------------------------------------

    def observe(self, step: Step, spec: TeamSpec) -> Observation:
        return {
            Step.QUEUE: self.objects.observe_queue,
            Step.NAMESPACE: self.objects.observe_namespace,
            Step.VCLUSTER: self.vclusters.observe,
            Step.ADMISSION_POLICY: self.objects.observe_policy,
            Step.KUBECONFIG: self.kubeconfigs.observe,
        }[step](spec)

    def apply(self, step: Step, spec: TeamSpec) -> Observation:
        self.kube.forget(spec.team, DEEP_CHECKS_OF.get(step, ()))
        {
            Step.QUEUE: self.objects.apply_queues,
            Step.NAMESPACE: self.objects.apply_namespace,
            Step.VCLUSTER: self.vclusters.install,
            Step.ADMISSION_POLICY: self.objects.apply_policy,
            Step.KUBECONFIG: lambda _spec: None,
        }[step](spec)
        return self.observe(step, spec)

    def remove(self, step: Step, spec: TeamSpec) -> Observation:
        self.kube.forget(spec.team, ("role binding", "vCluster", "kubeconfig"))
        if step == Step.VCLUSTER:
            self.access.forget(spec.team)  # no more calls to a vCluster on its way out
        return {
            Step.QUEUE: self.objects.remove_queue,
            Step.NAMESPACE: self.objects.remove_namespace,
            Step.VCLUSTER: self.vclusters.remove,
            Step.ADMISSION_POLICY: self.objects.remove_policy,
            Step.KUBECONFIG: lambda _spec: Observation(DONE, "goes with the vCluster"),
        }[step](spec)

    def sleep(self, spec: TeamSpec) -> Observation:
        self.kube.forget(spec.team, ("vCluster", "kubeconfig"))
        self.access.forget(spec.team)  # no calls into a paused vCluster
        return self.vclusters.pause(spec)

    def wake(self, spec: TeamSpec) -> Observation:
        self.kube.forget(spec.team, ("vCluster", "kubeconfig"))
        return self.vclusters.resume(spec)

    def running_pods(self) -> dict[str, int]:
        return self.vclusters.running_pods()

    def check_template(self, spec: TeamSpec, *, repair: bool) -> TemplateCheck:
        return self.access.check_template(spec, repair=repair)

    # --- personal credentials ---------------------------------------------------------

    def issue_credential(
        self, spec: TeamSpec, person: Person, *, ttl_seconds: int
    ) -> IssuedCredential:
        return self.access.issue(spec, person, ttl_seconds=ttl_seconds)

    def credential_accounts(self, spec: TeamSpec) -> list[Account]:
        return self.access.accounts(spec)

    def refused_pods(self, spec: TeamSpec) -> list[RefusedPod]:
        return self.access.refused_pods(spec)

    def workloads(self, spec: TeamSpec) -> list[Workload]:
        return self.decisions.workloads(spec)

    def evictions(self, spec: TeamSpec) -> list[Eviction]:
        return self.decisions.evictions(spec)

    def revoke_credentials(
        self, spec: TeamSpec, accounts: Collection[str], *, uids: Mapping[str, str] | None = None
    ) -> None:
        self.access.revoke(spec, accounts, uids=uids)

    def oidc_kubeconfig(
        self, spec: TeamSpec, person: Person, *, issuer: str, client_id: str
    ) -> str:
        return self.access.oidc_kubeconfig(spec, person, issuer=issuer, client_id=client_id)

    # --- usage ----------------------------------------------------------------------

    def usage(self, queue_names: list[str]) -> dict[str, QueueUsage]:
        """One list call for every queue's status.allocated and status.requested."""
        listed = self._list_queues()
        self._queues_read = (time.monotonic(), listed)  # for the cluster_top() that follows
        wanted = set(queue_names)
        items = (listed or {}).get("items", [])
        # KAI's queue controller writes status (childQueues on every parent, allocated and
        # requested where non-zero); its first release writes none on any queue. A queue
        # without status is idle on the former and unknown on the latter.
        reports = any(item.get("status") for item in items)
        smallest = self._smallest_waiting(wanted)
        result: dict[str, QueueUsage] = {}
        for item in items:
            name = item.get("metadata", {}).get("name")
            if name not in wanted:
                continue
            status = item.get("status") or {}
            result[name] = QueueUsage(
                allocated_gpu=_gpus(status.get("allocated")),
                requested_gpu=_gpus(status.get("requested")),
                created=_seconds(item.get("metadata", {}).get("creationTimestamp")),
                reported=reports,
                uid=str(item.get("metadata", {}).get("uid") or ""),
                smallest_waiting=smallest.get(name),
            )
        return result

    def _list_queues(self) -> Any:
        return self.kube.call(
            "listing queues",
            lambda: self.kube.custom.list_cluster_custom_object(
                m.QUEUE_GROUP, m.QUEUE_VERSION, m.QUEUE_PLURAL
            ),
        )

    def _smallest_waiting(self, queues: set[str]) -> dict[str, float]:
        """Per queue, the GPUs of its smallest unscheduled pod that asks for any (one
        list call: pending pods carrying the queue label, in every namespace)."""
        label = self.settings.kai_queue_label
        listed: Any = self.kube.call(
            "listing waiting pods",
            lambda: self.kube.core.list_pod_for_all_namespaces(
                label_selector=label, field_selector="status.phase=Pending"
            ),
        )
        smallest: dict[str, float] = {}
        for pod in getattr(listed, "items", None) or []:
            if pod.spec is not None and pod.spec.node_name:
                continue  # bound (KAI placed it), starting on its node
            queue = (pod.metadata.labels or {}).get(label)
            size = pod_gpus(pod)
            if queue in queues and size > 0:
                smallest[queue] = min(size, smallest.get(queue, size))
        return smallest

    def cluster_top(self, pool: str = "") -> ClusterTop | None:
        """The top level of KAI's shard for ``pool`` (a label value; "" the default
        shard): the allocatable GPUs of its ready nodes (as KAI's proportion plugin counts
        them) and its queues without a parent, with their requests. A shard sees only the
        nodes and queues labelled with its value; the default one those without the
        label."""
        nodes: Any = self.kube.call("listing nodes", lambda: self.kube.core.list_node())
        key = self.settings.node_pool_label_key
        total = 0.0
        for node in getattr(nodes, "items", None) or []:
            if ((node.metadata.labels if node.metadata else None) or {}).get(key, "") != pool:
                continue
            if _schedulable(node):
                total += _gpus((node.status.allocatable if node.status else None) or {})
        # The queues usage() has just listed (the usage cache reads both at once), else
        # a list of its own: one listing of every queue per refresh, not one per shard.
        read = self._queues_read
        fresh = read is not None and time.monotonic() - read[0] < QUEUES_REUSED_SECONDS
        listed: Any = read[1] if read is not None and fresh else self._list_queues()
        queues = []
        for item in (listed or {}).get("items", []):
            spec = item.get("spec") or {}
            labels = item.get("metadata", {}).get("labels") or {}
            # Another pool's queue belongs to that pool's shard, not to this top level.
            if spec.get("parentQueue") or labels.get(key, "") != pool:
                continue
            gpu = (spec.get("resources") or {}).get("gpu") or {}
            queues.append(
                TopQueue(
                    name=item.get("metadata", {}).get("name", ""),
                    quota=float(gpu.get("quota") or 0),
                    limit=float(gpu["limit"]) if gpu.get("limit") is not None else -1.0,
                    weight=float(gpu["overQuotaWeight"])
                    if gpu.get("overQuotaWeight") is not None
                    else 1.0,
                    priority=int(spec["priority"]) if spec.get("priority") is not None else 100,
                    requested=_gpus((item.get("status") or {}).get("requested")),
                    created=_seconds(item.get("metadata", {}).get("creationTimestamp")),
                    uid=str(item.get("metadata", {}).get("uid") or ""),
                )
            )
        k_value, usage_db = self._fairness()
        return ClusterTop(gpus=total, queues=tuple(queues), k_value=k_value, usage_db=usage_db)

    def node_pools(self, label_key: str) -> list[NodePool]:
        """Every value of ``label_key`` on the nodes ("" for nodes without it): their
        count, their schedulable GPUs, their GPU type, and whether a SchedulingShard
        serves the value (None where shards cannot be read)."""
        nodes: Any = self.kube.call("listing nodes", lambda: self.kube.core.list_node())
        found: dict[str, tuple[int, float, list[str]]] = {}
        for node in getattr(nodes, "items", None) or []:
            labels = (node.metadata.labels if node.metadata else None) or {}
            value = labels.get(label_key, "")
            count, gpus, products = found.get(value, (0, 0.0, []))
            held = _gpus((node.status.allocatable if node.status else None) or {})
            product = labels.get(GPU_PRODUCT_LABEL, "")
            found[value] = (
                count + 1,
                gpus + (held if _schedulable(node) else 0.0),
                [*products, product] if product else products,
            )
        served = self._shard_values()
        return [
            NodePool(
                label_value=value,
                gpu_product=max(set(products), key=products.count) if products else "",
                gpus=round(gpus, 2),
                nodes=count,
                shard=None if served is None else value in served,
            )
            for value, (count, gpus, products) in sorted(found.items())
        ]

    def _shards(self) -> list[dict[str, Any]] | None:
        """KAI's SchedulingShards (None: not readable, KAI's operator absent)."""
        try:
            listed: Any = self.kube.call(
                "listing KAI's scheduling shards",
                lambda: self.kube.custom.list_cluster_custom_object(
                    "kai.scheduler", "v1", "schedulingshards"
                ),
                missing_ok=True,
            )
        except BackendError:
            return None
        if listed is None:
            return None
        return list(listed.get("items", []))

    def _shard_values(self) -> set[str] | None:
        shards = self._shards()
        if shards is None:
            return None
        return {str((s.get("spec") or {}).get("partitionLabelValue") or "") for s in shards}

    def _fairness(self) -> tuple[float | None, bool]:
        """The default SchedulingShard's kValue and whether it sets a usage database
        (KAI's operator renders these into the proportion plugin's arguments). A cluster
        without KAI's operator (or without the right to read shards): unknown."""
        shards = self._shards()
        if not shards:
            return None, False
        chosen = next(
            (s for s in shards if s.get("metadata", {}).get("name") == "default"), shards[0]
        )
        spec = chosen.get("spec") or {}
        k_value = spec.get("kValue")
        return (float(k_value) if k_value is not None else None), bool(spec.get("usageDBConfig"))


GPU_PRODUCT_LABEL = "nvidia.com/gpu.product"  # set by the GPU Operator's feature discovery


def _schedulable(node: Any) -> bool:
    """A ready node that takes pods (as KAI's proportion plugin counts nodes)."""
    conditions = (node.status.conditions if node.status else None) or []
    ready = any(c.type == "Ready" and c.status == "True" for c in conditions)
    return ready and not (node.spec is not None and node.spec.unschedulable)


def pod_gpus(pod: Any) -> float:
    """The GPUs a pod asks KAI for: its containers' nvidia.com/gpu, or a fraction
    (``gpu-fraction`` x ``gpu-fraction-num-devices``)."""
    annotations = (pod.metadata.annotations if pod.metadata else None) or {}
    fraction = annotations.get("gpu-fraction")
    if fraction:
        try:
            devices = int(annotations.get("gpu-fraction-num-devices", "1") or 1)
            return float(fraction) * max(1, devices)
        except ValueError:
            return 0.0
    total = 0.0
    for container in (pod.spec.containers if pod.spec else None) or []:
        resources = container.resources
        if resources is None:
            continue
        asked = (resources.limits or {}).get(GPU) or (resources.requests or {}).get(GPU)
        if asked is not None:
            total += float(parse_quantity(asked))
    return total


def _seconds(stamp: object) -> int | None:
    """A Kubernetes timestamp ("2026-11-30T04:00:00Z") in whole seconds since the epoch."""
    if not isinstance(stamp, str):
        return None
    try:
        return int(datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp())
    except ValueError:
        return None


def _gpus(resources: dict[str, Any] | None) -> float:
    if not resources or GPU not in resources:
        return 0.0
    value: Decimal = parse_quantity(resources[GPU])
    return float(value)
