"""The `kubernetes` cluster backend: KAI queues, namespaces, admission policies, vClusters.

Only this package imports the `kubernetes` client; everything else speaks in the portal's
terms (TeamSpec, Step, Observation). The work is split into parts over one connection
(``client.Kube``): cluster-scoped objects and the namespace (``objects``), the vCluster
installer (``vcluster``), the vCluster's kubeconfig secret (``kubeconfig``) and the
personal credentials issued inside each vCluster (``access``).
"""

from __future__ import annotations

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
from app.adapters.k8s.kubeconfig import Kubeconfigs
from app.adapters.k8s.objects import ClusterObjects
from app.adapters.k8s.vcluster import VClusterInstaller
from app.core.config import Settings
from app.core.models import Step
from app.provisioning.backend import DONE, Observation, RefusedPod, TeamSpec
from app.usage.sources import ClusterTop, QueueUsage, TopQueue

__all__ = ["KubernetesBackend"]

# Slow namespaced checks that an apply of a step makes stale.
DEEP_CHECKS_OF = {
    Step.NAMESPACE: ("role binding",),
    Step.VCLUSTER: ("vCluster", "kubeconfig"),
}
GPU = "nvidia.com/gpu"


class KubernetesBackend:
    kind = "kubernetes"
    simulated = False

    def __init__(self, settings: Settings, api: client.ApiClient | None = None) -> None:
        self.kube = Kube(settings, api)
        self.objects = ClusterObjects(self.kube)
        self.vclusters = VClusterInstaller(self.kube)
        self.kubeconfigs = Kubeconfigs(self.kube)
        self.access = Access(self.kube, self.kubeconfigs)

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

    # --- personal credentials ---------------------------------------------------------

    def issue_credential(
        self, spec: TeamSpec, person: Person, *, ttl_seconds: int
    ) -> IssuedCredential:
        return self.access.issue(spec, person, ttl_seconds=ttl_seconds)

    def credential_accounts(self, spec: TeamSpec) -> list[Account]:
        return self.access.accounts(spec)

    def refused_pods(self, spec: TeamSpec) -> list[RefusedPod]:
        return self.access.refused_pods(spec)

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
        listed: Any = self.kube.call(
            "listing queues",
            lambda: self.kube.custom.list_cluster_custom_object(
                m.QUEUE_GROUP, m.QUEUE_VERSION, m.QUEUE_PLURAL
            ),
        )
        wanted = set(queue_names)
        items = (listed or {}).get("items", [])
        # KAI's queue controller writes status (childQueues on every parent, allocated and
        # requested where non-zero); its first release writes none on any queue. A queue
        # without status is idle on the former and unknown on the latter.
        reports = any(item.get("status") for item in items)
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
            )
        return result

    def cluster_top(self) -> ClusterTop | None:
        """KAI's top level: the allocatable GPUs of every ready node (as KAI's proportion
        plugin counts them) and every queue without a parent, with its request."""
        nodes: Any = self.kube.call("listing nodes", lambda: self.kube.core.list_node())
        total = 0.0
        for node in getattr(nodes, "items", None) or []:
            conditions = (node.status.conditions if node.status else None) or []
            ready = any(c.type == "Ready" and c.status == "True" for c in conditions)
            if not ready or (node.spec is not None and node.spec.unschedulable):
                continue
            total += _gpus((node.status.allocatable if node.status else None) or {})
        listed: Any = self.kube.call(
            "listing queues",
            lambda: self.kube.custom.list_cluster_custom_object(
                m.QUEUE_GROUP, m.QUEUE_VERSION, m.QUEUE_PLURAL
            ),
        )
        queues = []
        for item in (listed or {}).get("items", []):
            spec = item.get("spec") or {}
            if spec.get("parentQueue"):
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
                )
            )
        return ClusterTop(gpus=total, queues=tuple(queues))


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
