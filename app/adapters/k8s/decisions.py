"""KAI's decisions about a team's work, read off the host: its PodGroups' scheduling
conditions (why a workload waits, with the queue's figures at that moment) and the
``Evict`` events KAI writes on a PodGroup it evicts (the action, the gang's size, the
preemptor's namespace, and for a reclaim the queues' figures in the message).

Everything here is in the team's host namespace and much of it is written from what the
team typed (pod names, labels, annotations): read as plain JSON, bounded, and never a
field of another team's object."""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

from app.adapters.k8s import manifests as m
from app.adapters.k8s.client import Part
from app.core.quantities import is_plain_number
from app.provisioning.backend import (
    Eviction,
    KaiReason,
    QueueFigures,
    TeamSpec,
    Workload,
)

KAI_GROUP = ("scheduling.run.ai", "v2alpha2")
GPU = "nvidia.com/gpu"
OBJECT_NAME = "vcluster.loft.sh/object-name"
OBJECT_NAMESPACE = "vcluster.loft.sh/object-namespace"
FRACTION = "gpu-fraction"
PREEMPTIBILITY = "kai.scheduler/preemptibility"
VCLUSTER_DNS = "vcluster-kube-dns"  # the label k8s-app of the vCluster's own CoreDNS
GROUP_ANNOTATION = "pod-group-name"
READ_LIMIT = 1000  # objects of each kind read per team
MESSAGE_KEPT = 600
NON_PREEMPTIBLE_CLASSES = frozenset({"build", "inference"})  # priority >= 100 in KAI's
# "<queue> uses <GPU: 1, CPU: ...> with a quota of <...>, fair-share of <...> and queue
# priority of <N>." (pkg/scheduler/api/unschedule_info.go, GetReclaimQueueDetailsMessage)
QUEUE_LINE = re.compile(
    r"^(?P<queue>\S+) uses <(?P<uses>[^>]*)> with a quota of <(?P<quota>[^>]*)>, "
    r"fair-share of <(?P<fair>[^>]*)> and queue priority of <(?P<priority>-?\d+)>\.$"
)
GPU_IN_TEXT = re.compile(r"GPU: (?P<gpu>Unlimited|-?[0-9.]+)")


class KaiDecisions(Part):
    """The team's workloads and evictions as KAI wrote them, in one list of each kind."""

    def _list(self, what: str, fn: Any) -> list[dict[str, Any]]:
        response = self._call(what, fn)
        if response is None:
            return []
        data = response.data if hasattr(response, "data") else response
        parsed = json.loads(data) if isinstance(data, bytes | str) else data
        items = parsed.get("items") if isinstance(parsed, Mapping) else None
        return [dict(i) for i in items or [] if isinstance(i, Mapping)]

    def _groups(self, spec: TeamSpec) -> list[dict[str, Any]]:
        return self._list(
            f"listing KAI's pod groups in {spec.namespace}",
            lambda: self.kube.custom.list_namespaced_custom_object(
                *KAI_GROUP, spec.namespace, "podgroups", limit=READ_LIMIT, _preload_content=False
            ),
        )

    def _pods(self, spec: TeamSpec) -> list[dict[str, Any]]:
        return self._list(
            f"listing the synced pods in {spec.namespace}",
            lambda: self.kube.core.list_namespaced_pod(
                spec.namespace,
                label_selector=f"{m.VCLUSTER_MANAGED}={spec.vcluster_name}",
                limit=READ_LIMIT,
                _preload_content=False,
            ),
        )

    def workloads(self, spec: TeamSpec) -> list[Workload]:
        groups = {_meta(g, "name"): g for g in self._groups(spec)}
        return workloads_of(self._pods(spec), groups, spec)

    def evictions(self, spec: TeamSpec) -> list[Eviction]:
        events = self._list(
            f"listing KAI's evictions in {spec.namespace}",
            lambda: self.kube.core.list_namespaced_event(
                spec.namespace,
                field_selector="reason=Evict,involvedObject.kind=PodGroup",
                limit=READ_LIMIT,
                _preload_content=False,
            ),
        )
        if not events:
            return []
        groups = {_meta(g, "name"): g for g in self._groups(spec)}
        pods = {_meta(p, "name"): p for p in self._pods(spec)}
        return evictions_of(events, groups, pods, spec)


def _meta(obj: Mapping[str, Any], key: str) -> str:
    meta = obj.get("metadata")
    return str(meta.get(key) or "") if isinstance(meta, Mapping) else ""


def _notes(obj: Mapping[str, Any], key: str = "annotations") -> Mapping[str, Any]:
    meta = obj.get("metadata")
    found = meta.get(key) if isinstance(meta, Mapping) else None
    return found if isinstance(found, Mapping) else {}


def _time(value: Any) -> datetime | None:
    if not isinstance(value, str) or not value:
        return None
    try:
        when = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None
    return when if when.tzinfo is not None else when.replace(tzinfo=UTC)


def quantity(value: Any) -> float | None:
    """A Kubernetes quantity of GPUs ("1", "500m", "0.5") as a number; None otherwise."""
    if isinstance(value, int | float) and not isinstance(value, bool):
        return float(value)
    if not isinstance(value, str):
        return None
    text = value.strip()
    if text.endswith("m") and is_plain_number(text[:-1]):
        return float(text[:-1]) / 1000
    if is_plain_number(text):
        return float(text)
    return None


def pod_gpus(pod: Mapping[str, Any]) -> float:
    """What a pod asks: its ``gpu-fraction`` (KAI's GPU sharing), else the containers'
    whole GPUs."""
    fraction = quantity(_notes(pod).get(FRACTION))
    if fraction is not None and fraction > 0:
        return fraction
    total = 0.0
    spec = pod.get("spec")
    containers = spec.get("containers") if isinstance(spec, Mapping) else None
    for container in containers or []:
        if not isinstance(container, Mapping):
            continue
        resources = container.get("resources")
        limits = resources.get("limits") if isinstance(resources, Mapping) else None
        if isinstance(limits, Mapping):
            total += quantity(limits.get(GPU)) or 0.0
    return total


def group_gpus(group: Mapping[str, Any] | None) -> float | None:
    """What KAI's pod-group controller last wrote its pods held (else asked), once the
    pods themselves are gone; None where it wrote nothing above zero."""
    status = group.get("status") if group is not None else None
    held = status.get("resourcesStatus") if isinstance(status, Mapping) else None
    if not isinstance(held, Mapping):
        return None
    for key in ("allocated", "requested"):
        value = _figure(held.get(key))
        if value is not None and 0 < value < math.inf:
            return value
    return None


def _figure(resources: Any) -> float | None:
    if not isinstance(resources, Mapping):
        return None
    value = quantity(resources.get(GPU))
    if value is None:
        return None
    return math.inf if value < 0 else value


def figures_of(details: Any) -> QueueFigures | None:
    """KAI's ``details.queueDetails`` of a reason, GPUs only."""
    if not isinstance(details, Mapping):
        return None
    queue = details.get("queueDetails")
    if not isinstance(queue, Mapping):
        return None
    return QueueFigures(
        queue=str(queue.get("name") or ""),
        requested=_figure(queue.get("queueRequestedResources")),
        deserved=_figure(queue.get("queueDeservedResources")),
        allocated=_figure(queue.get("queueAllocatedResources")),
        allocated_non_preemptible=_figure(queue.get("queueAllocatedNonPreemptibleResources")),
        limit=_figure(queue.get("queueResourceLimits")),
        asked=_figure(queue.get("podGroupRequestedResources")),
        asked_non_preemptible=_figure(queue.get("podGroupRequestedNonPreemptibleResources")),
    )


def reasons_of(group: Mapping[str, Any]) -> tuple[tuple[KaiReason, ...], datetime | None]:
    """A PodGroup's reasons for not scheduling it now, and since when KAI says so."""
    status = group.get("status")
    conditions = status.get("schedulingConditions") if isinstance(status, Mapping) else None
    found: list[KaiReason] = []
    since: datetime | None = None
    for condition in conditions or []:
        if not isinstance(condition, Mapping) or condition.get("status") == "False":
            continue
        pool = str(condition.get("nodePool") or "")
        at = _time(condition.get("lastTransitionTime"))
        if at is not None and (since is None or at < since):
            since = at
        explained = [r for r in condition.get("reasons") or [] if isinstance(r, Mapping)]
        for reason in explained:
            found.append(
                KaiReason(
                    reason=str(reason.get("reason") or ""),
                    message=str(reason.get("message") or "")[:MESSAGE_KEPT],
                    pool=pool,
                    figures=figures_of(reason.get("details")),
                )
            )
        if not explained and condition.get("message"):
            found.append(
                KaiReason(
                    str(condition.get("reason") or ""),
                    str(condition["message"])[:MESSAGE_KEPT],
                    pool,
                )
            )
    return tuple(found), since


def _part(obj: Mapping[str, Any], key: str) -> Mapping[str, Any]:
    found = obj.get(key)
    return found if isinstance(found, Mapping) else {}


def _preemptible(group: Mapping[str, Any] | None, pod: Mapping[str, Any]) -> bool:
    spec = group.get("spec") if group is not None else None
    if isinstance(spec, Mapping):
        said = spec.get("preemptibility")
        if said in ("preemptible", "non-preemptible"):
            return bool(said == "preemptible")
        if spec.get("priorityClassName"):
            return str(spec["priorityClassName"]) not in NON_PREEMPTIBLE_CLASSES
    labels = _notes(pod, "labels")
    said = labels.get(PREEMPTIBILITY)
    if said in ("preemptible", "non-preemptible"):
        return bool(said == "preemptible")
    return bool(labels.get("priorityClassName") not in NON_PREEMPTIBLE_CLASSES)


def _pool_of(pod: Mapping[str, Any], spec: TeamSpec) -> str:
    value = _notes(pod, "labels").get(spec.pool_label)
    return str(value) if isinstance(value, str) else ""


def _own_dns(pod: Mapping[str, Any]) -> bool:
    return bool(
        _notes(pod).get(OBJECT_NAMESPACE) == "kube-system"
        and _notes(pod, "labels").get("k8s-app") == VCLUSTER_DNS
    )


def workloads_of(
    pods: list[dict[str, Any]], groups: Mapping[str, Mapping[str, Any]], spec: TeamSpec
) -> list[Workload]:
    """Each synced pod with its PodGroup's verdict: waiting ones first, longest first."""
    found: list[Workload] = []
    for pod in pods:
        notes = _notes(pod)
        if not notes.get(OBJECT_NAME):
            continue  # not a pod the syncer made
        if _own_dns(pod):
            continue  # the vCluster's own CoreDNS: the cluster's, not the team's work
        status = _part(pod, "status")
        phase = status.get("phase")
        if phase in ("Succeeded", "Failed") or _meta(pod, "deletionTimestamp"):
            continue
        spec_of_pod = _part(pod, "spec")
        bound = bool(spec_of_pod.get("nodeName"))
        name = str(notes.get(GROUP_ANNOTATION) or "")
        group = groups.get(name)
        created = _time(_meta(pod, "creationTimestamp")) or datetime.now(UTC)
        reasons: tuple[KaiReason, ...] = ()
        since = created
        if bound:
            since = _time(status.get("startTime")) or created
        elif group is not None:
            reasons, judged = reasons_of(group)
            since = judged or created
        found.append(
            Workload(
                namespace=str(notes.get(OBJECT_NAMESPACE) or ""),
                name=str(notes[OBJECT_NAME]),
                pool=_pool_of(pod, spec),
                queue=str(_notes(pod, "labels").get(spec.queue_label) or ""),
                gpus=pod_gpus(pod),
                running=bound,
                since=since,
                preemptible=_preemptible(group, pod),
                reasons=reasons,
                group=name,
            )
        )
    found.sort(key=lambda w: (w.running, w.since, w.namespace, w.name))
    return found


def queues_in(message: str) -> tuple[QueueFigures, ...]:
    """The queues' lines KAI appends to a reclaim's message: each queue's use, quota,
    fair share and priority at the moment of the decision (GPUs)."""
    found = []
    for line in message.splitlines():
        matched = QUEUE_LINE.match(line.strip())
        if matched is None:
            continue
        found.append(
            QueueFigures(
                queue=matched["queue"],
                allocated=_gpu_of(matched["uses"]),
                deserved=_gpu_of(matched["quota"]),
                fair_share=_gpu_of(matched["fair"]),
                priority=int(matched["priority"]),
            )
        )
    return tuple(found)


def _gpu_of(text: str) -> float | None:
    matched = GPU_IN_TEXT.search(text)
    if matched is None:
        return None
    value = matched["gpu"]
    return math.inf if value == "Unlimited" else float(value)


def _evicted_names(
    group: Mapping[str, Any] | None, pod: Mapping[str, Any] | None, spec: TeamSpec, name: str
) -> tuple[str, str]:
    """The workload's name inside the vCluster: from its PodGroup (which inherits a bare
    pod's annotations) or its pod while they are there, else from the syncer's
    translation ``<name>-x-<namespace>-x-<vcluster>`` of the host name in the group's."""
    for source in (group, pod):
        if source is not None and _notes(source).get(OBJECT_NAME):
            notes = _notes(source)
            return str(notes.get(OBJECT_NAMESPACE) or ""), str(notes[OBJECT_NAME])
    host = name.removeprefix("pg-")
    host = re.sub(r"-[0-9a-f]{8}(-[0-9a-f]{4}){3}-[0-9a-f]{12}$", "", host)
    suffix = f"-x-{spec.vcluster_name}"
    if host.endswith(suffix) and host.count("-x-") == 2:
        pod_name, namespace = host.removesuffix(suffix).split("-x-")
        return namespace, pod_name
    return "", ""


def evictions_of(
    events: list[dict[str, Any]],
    groups: Mapping[str, Mapping[str, Any]],
    pods: Mapping[str, Mapping[str, Any]],
    spec: TeamSpec,
) -> list[Eviction]:
    """KAI's ``Evict`` events, each with what is known of its workload (newest first)."""
    found = []
    for event in events:
        if event.get("reason") != "Evict":
            continue
        obj = event.get("involvedObject")
        if not isinstance(obj, Mapping) or obj.get("kind") != "PodGroup":
            continue
        notes = _notes(event)
        group_name = str(obj.get("name") or "")
        group = groups.get(group_name)
        owner = next(iter(_owners(group)), "") if group is not None else ""
        pod = pods.get(owner)
        namespace, name = _evicted_names(group, pod, spec, group_name)
        at = (
            _time(event.get("lastTimestamp"))
            or _time(event.get("eventTime"))
            or _time(_meta(event, "creationTimestamp"))
            or datetime.now(UTC)
        )
        count = notes.get("num-evicted-pods")
        found.append(
            Eviction(
                uid=_meta(event, "uid"),
                group=group_name,
                namespace=namespace,
                name=name,
                at=at,
                action=str(notes.get("evictor-action-type") or ""),
                pods=int(count) if isinstance(count, str) and count.isdigit() else 1,
                by_namespace=str(notes.get("evictor-pod-group-namespace") or ""),
                pool=_label(group, pod, spec.pool_label),
                gpus=pod_gpus(pod) if pod is not None else group_gpus(group),
                started=_started(pod),
                queues=queues_in(str(event.get("message") or "")),
            )
        )
    found.sort(key=lambda e: e.at, reverse=True)
    return found


def _label(group: Mapping[str, Any] | None, pod: Mapping[str, Any] | None, key: str) -> str:
    for source in (pod, group):
        value = _notes(source, "labels").get(key) if source is not None else None
        if isinstance(value, str):
            return value
    return ""


def _owners(group: Mapping[str, Any]) -> list[str]:
    meta = group.get("metadata")
    owners = meta.get("ownerReferences") if isinstance(meta, Mapping) else None
    return [
        str(o.get("name"))
        for o in owners or []
        if isinstance(o, Mapping) and o.get("kind") == "Pod" and o.get("name")
    ]


def _started(pod: Mapping[str, Any] | None) -> datetime | None:
    if pod is None:
        return None
    status = pod.get("status")
    return _time(status.get("startTime")) if isinstance(status, Mapping) else None
