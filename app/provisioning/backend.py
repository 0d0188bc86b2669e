"""The seam between the workflow and a cluster: one interface, several backends.

The reconciler speaks only these terms. A backend observes one provisioning step of one
team, applies it (idempotently) or removes it, hands out the kubeconfig and reads usage.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Protocol

import yaml

from app.core import quota
from app.core.models import Org, Sleep, Step, Team
from app.core.quantities import gpus
from app.core.quota import GPU

DEFAULT_QUEUE_LABEL = "kai.scheduler/queue"
UNLIMITED = -1.0  # KAI's limit for "no limit" (0 would be a cap of zero)


class BackendError(Exception):
    """A cluster call failed; the reconciler records it and retries with backoff."""


@dataclass(frozen=True, slots=True)
class ResourceQuota:
    """One KAI resource entry, in KAI's units (GPUs, millicpus, megabytes)."""

    quota: float
    limit: float
    over_quota_weight: float


Entries = tuple[tuple[str, ResourceQuota], ...]  # KAI's resource name -> its entry


def each_resource(entry: ResourceQuota) -> Entries:
    """The same entry for every resource of the declaration."""
    return tuple((res.key, entry) for res in quota.RESOURCES)


DEFAULT_POOL_LABEL = "kai.scheduler/node-pool"


@dataclass(frozen=True, slots=True)
class PoolQueue:
    """A team's queue in another pool than the default: its own queue under the org's
    queue of that pool, both labelled ``<pool label key>: <label value>`` (KAI's shard
    for the pool sees only what carries its value)."""

    pool: str  # the pool's name
    label_value: str
    queue_name: str
    parent_queue: str
    resources: Entries
    org_resources: Entries


@dataclass(frozen=True, slots=True)
class TeamSpec:
    """Everything a backend needs to know about a team, in the cluster's terms (slotted:
    the simulated cluster holds one per team and per queue in another pool)."""

    team: str
    namespace: str
    vcluster_name: str
    queue_name: str
    parent_queue: str
    priority: int
    # KAI's resource name -> the team's and the org's entries, in the declaration's order.
    resources: Entries
    org_resources: Entries
    queue_label: str = DEFAULT_QUEUE_LABEL
    # The cluster template rendered in (``catalog.rules.deploy_values`` and the vCluster
    # values it sets, as canonical JSON), "name vN" as people read it, its version's id,
    # and whether the vCluster was last installed with exactly that version.
    template: str = ""
    template_values: str = ""
    template_version_id: int | None = None
    template_installed: bool = True
    # The template's own part, for checking it is in place inside the vCluster: its
    # rendered manifests, its charts' (release, namespace), and whether to put back
    # what is missing.
    template_manifests: str = ""
    template_charts: tuple[tuple[str, str], ...] = ()
    template_repair: bool = False
    # The team's queues in other pools than the default, and the label that names a pool.
    pools: tuple[PoolQueue, ...] = ()
    pool_label: str = DEFAULT_POOL_LABEL
    # Where the team's vCluster is on its way between running and paused.
    sleep: Sleep = Sleep.AWAKE

    @property
    def gpu(self) -> ResourceQuota:
        return dict(self.resources)[GPU.key]

    @property
    def org_gpu(self) -> ResourceQuota:
        return dict(self.org_resources)[GPU.key]

    @property
    def has_template_objects(self) -> bool:
        return bool(self.template_manifests.strip() or self.template_charts)


def spec_for(
    team: Team,
    org: Org,
    *,
    queue_label: str = DEFAULT_QUEUE_LABEL,
    org_limit_is_pool: bool = False,
    pool_label: str = DEFAULT_POOL_LABEL,
) -> TeamSpec:
    """Translate stored values into KAI's units; every resource of the declaration gets
    all three fields (a resource without a limit: unlimited). The org queue's limits are
    unlimited (the org may borrow idle GPUs of the whole cluster) unless
    ``org_limit_is_pool``, which caps each limited resource at the pool."""
    resources, org_resources = _entries(
        team.quota_in(org.default_pool), org.capacity, org_limit_is_pool=org_limit_is_pool
    )
    pools = []
    for pool, value in team.quota_by_pool().items():
        held, budget = _entries(value, pool.capacity, org_limit_is_pool=org_limit_is_pool)
        pools.append(
            PoolQueue(
                pool=pool.name,
                label_value=pool.label_value,
                queue_name=team.queue_in(pool),
                parent_queue=pool.queue_of_org(org.parent_queue),
                resources=held,
                org_resources=budget,
            )
        )
    return TeamSpec(
        team=team.name,
        namespace=team.namespace,
        vcluster_name=team.vcluster_name,
        queue_name=team.queue_name,
        parent_queue=org.parent_queue,
        priority=team.priority,
        resources=resources,
        org_resources=org_resources,
        queue_label=queue_label,
        pools=tuple(pools),
        pool_label=pool_label,
        sleep=Sleep(team.sleep or Sleep.AWAKE),
    )


def _entries(
    values: quota.Quota, capacity: Mapping[str, int], *, org_limit_is_pool: bool
) -> tuple[Entries, Entries]:
    """The team's queue's entries and its org queue's, in KAI's units. Both are made once
    per distinct values and shared (they are immutable): at 10,000 teams in two pools the
    specs held 20,000 copies of the same org entries and of a few teams' values."""
    amounts = tuple((res, capacity.get(res.key, 0)) for res, _line in values)
    return _team_entries(values), _org_entries(amounts, org_limit_is_pool)


@functools.lru_cache(maxsize=4096)
def _team_entries(values: quota.Quota) -> Entries:
    entries = []
    for res, line in values:
        limit = UNLIMITED if line.limit is None else res.kai(line.limit)
        entries.append((res.key, ResourceQuota(res.kai(line.guarantee), limit, gpus(line.weight))))
    return tuple(entries)


@functools.lru_cache(maxsize=256)
def _org_entries(
    amounts: tuple[tuple[quota.Resource, int], ...], org_limit_is_pool: bool
) -> Entries:
    entries = []
    for res, amount in amounts:
        pool = res.kai(amount)
        org_limit = pool if org_limit_is_pool and res.limited else UNLIMITED
        entries.append((res.key, ResourceQuota(pool, org_limit, 1.0)))
    return tuple(entries)


@dataclass(frozen=True)
class Observation:
    """What a backend sees of one step: done, progressing (wait) or missing (apply)."""

    state: str  # "done" | "progressing" | "missing" | "outdated"
    message: str = ""
    version: str | None = None  # the installed version, where a step has one (vCluster)

    @property
    def done(self) -> bool:
        return self.state == "done"


DONE = "done"
PROGRESSING = "progressing"
MISSING = "missing"
OUTDATED = "outdated"  # works, at another version than configured: upgrade in turn
# The vCluster is paused (as `vcluster pause` pauses it): no control plane, none of its
# pods on the host; its state, secrets and the team's queue kept.
ASLEEP = "asleep"


@dataclass(frozen=True)
class TemplateCheck:
    """What of a team's template was found missing inside its vCluster ("Kind name",
    "chart release"), and of it what was put back."""

    missing: tuple[str, ...] = ()
    repaired: tuple[str, ...] = ()
    unread: str = ""  # why the vCluster could not be read (nothing is known then)

    @property
    def left(self) -> tuple[str, ...]:
        return tuple(m for m in self.missing if m not in self.repaired)


class ClusterBackend(Protocol):
    """What the reconciler needs from a cluster. (Personal kubeconfigs go through the
    access domain's ``CredentialIssuer`` and usage through the usage domain's
    ``UsageReader``; the same adapters implement all three.)"""

    kind: str
    simulated: bool

    def begin_pass(self) -> None:
        """A reconcile pass starts: a backend may read the cluster once here instead of
        once per team. Raises BackendError when the cluster cannot be read."""
        ...

    def end_pass(self) -> None: ...

    def observe(self, step: Step, spec: TeamSpec) -> Observation: ...

    def apply(self, step: Step, spec: TeamSpec) -> Observation: ...

    def remove(self, step: Step, spec: TeamSpec) -> Observation:
        """Delete what ``step`` created; DONE once it is gone."""
        ...

    def sleep(self, spec: TeamSpec) -> Observation:
        """Pause the team's vCluster as `vcluster pause` does; ASLEEP once nothing of it
        runs on the host (PROGRESSING until then)."""
        ...

    def wake(self, spec: TeamSpec) -> Observation:
        """Resume a paused vCluster as `vcluster resume` does; then observed as any
        vCluster starting (DONE once its control plane answers)."""
        ...

    def running_pods(self) -> dict[str, int]:
        """The pods the team vClusters made on the host, running or waiting, counted by
        host namespace (one read of the cluster: the sleep policy's signal)."""
        ...

    def check_template(self, spec: TeamSpec, *, repair: bool) -> TemplateCheck:
        """Whether what the team's template installs is in place inside its vCluster
        (read through the portal's own connection); with ``repair``, the missing
        manifests' objects created again."""
        ...


@dataclass(frozen=True)
class RefusedPod:
    """A pod a team created inside its vCluster that the host cluster refused: it never
    left the vCluster (it stays Pending there), and the host's answer says why."""

    namespace: str  # inside the vCluster
    name: str
    message: str  # the host's answer, as the syncer recorded it
    last_seen: datetime
    count: int  # how many times the syncer tried
    # Whether the vCluster's syncer wrote it; else someone inside the vCluster did, and
    # the page does not call it the host's answer.
    by_syncer: bool = True


@dataclass(frozen=True)
class QueueFigures:
    """A queue's GPU figures as KAI wrote them with a decision (``None``: not written;
    ``math.inf``: unlimited)."""

    queue: str
    requested: float | None = None
    deserved: float | None = None  # the guarantee KAI holds for it
    allocated: float | None = None
    allocated_non_preemptible: float | None = None
    limit: float | None = None
    asked: float | None = None  # the workload's own request
    asked_non_preemptible: float | None = None
    fair_share: float | None = None  # written with an eviction only
    priority: int | None = None


@dataclass(frozen=True)
class KaiReason:
    """One reason KAI gave for not scheduling a workload, in its words: ``reason`` is
    KAI's (``OverLimit``, ``NonPreemptibleOverQuota``, ... or "" where it gave only a
    message), ``figures`` the queue's at that moment where it wrote them."""

    reason: str
    message: str
    pool: str = ""  # KAI's node pool of the condition ("" or "default": the default)
    figures: QueueFigures | None = None


@dataclass(frozen=True)
class Workload:
    """A team's pod as KAI sees it on the host, named as the team named it inside its
    vCluster. ``waiting_since``: when KAI last judged it unschedulable (or, without a
    verdict, when it was created); ``reasons`` empty where KAI wrote none."""

    namespace: str  # inside the vCluster
    name: str
    pool: str  # the pool's label value ("": the default pool)
    queue: str
    gpus: float
    running: bool
    since: datetime  # running since, or waiting since
    preemptible: bool
    reasons: tuple[KaiReason, ...] = ()
    group: str = ""  # KAI's PodGroup on the host


@dataclass(frozen=True)
class Eviction:
    """KAI's ``Evict`` event on a team's PodGroup: which action, how many pods at once,
    the preemptor's host namespace (a team, never its pod's name), and the queues' figures
    KAI wrote into its message (reclaims only)."""

    uid: str  # the event's: one eviction is recorded once
    group: str
    namespace: str  # the workload inside the vCluster ("" when no longer known)
    name: str
    at: datetime
    action: str  # KAI's: reclaim, preempt, consolidation, ...
    pods: int
    by_namespace: str = ""  # the preemptor PodGroup's namespace on the host
    pool: str = ""  # the pool's label value where known ("": the default pool)
    gpus: float | None = None
    started: datetime | None = None  # when the evicted pod had started, where known
    queues: tuple[QueueFigures, ...] = ()


class WorkloadReader(Protocol):
    """What the team page needs to know about the pods a team runs."""

    def refused_pods(self, spec: TeamSpec) -> list[RefusedPod]:
        """The team's pods the host refused, newest first."""
        ...

    def workloads(self, spec: TeamSpec) -> list[Workload]:
        """The team's pods on the host as KAI sees them: waiting first, longest first."""
        ...

    def evictions(self, spec: TeamSpec) -> list[Eviction]:
        """KAI's evictions of the team's work the host still keeps events of."""
        ...


def template_objects(manifests: str) -> list[dict[str, Any]]:
    """The Kubernetes objects of a template's rendered manifests (a document that is
    none is left out); BackendError, shown as "could not be checked", when they do not
    parse."""
    try:
        docs = list(yaml.safe_load_all(manifests))
    except yaml.YAMLError as exc:
        problem = getattr(exc, "problem", None) or type(exc).__name__
        raise BackendError(f"the template's manifests cannot be read: {problem}") from None
    return [
        doc
        for doc in docs
        if isinstance(doc, dict)
        and isinstance(doc.get("apiVersion"), str)
        and isinstance(doc.get("kind"), str)
        and isinstance(doc.get("metadata"), dict)
        and isinstance(doc["metadata"].get("name"), str)
    ]
