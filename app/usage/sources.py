"""Where usage comes from: protocols the usage domain owns, implemented by adapters
(the cluster backends read queue status; a Prometheus adapter reads KAI's own metrics)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol


@dataclass(frozen=True, slots=True)
class QueueUsage:
    """A queue's current allocation and pending demand, in GPUs. Slotted (no per-object
    ``__dict__``): a usage read makes one per queue every few seconds, 10,000 at 10,000
    teams."""

    allocated_gpu: float
    requested_gpu: float
    sampled_at: float = 0.0
    created: int | None = None  # the queue's creation time in the cluster, whole seconds
    reported: bool = True  # False: the queue exists but carries no status
    uid: str = ""  # the queue's metadata.uid: KAI's tie-break after the creation time
    # GPUs of the queue's smallest waiting pod, where the backend reads pods (KAI
    # reclaims for a pod only while the queue stays within its fair share: a whole-GPU
    # pod of a team whose fair share is 0.5 waits for an idle GPU).
    smallest_waiting: float | None = None
    # Every other resource's (key, allocated, requested), in the units people read
    # (cores, GB), where the backend reads them: a division per resource reads its own.
    others: tuple[tuple[str, float, float], ...] = ()

    def amounts(self, resource: str) -> tuple[float, float]:
        """(allocated, requested) of ``resource`` (GPUs, cores, GB); 0 where the queue
        reports none of it (KAI writes only what is non-zero)."""
        if resource == "gpu":
            return self.allocated_gpu, self.requested_gpu
        for key, allocated, requested in self.others:
            if key == resource:
                return allocated, requested
        return 0.0, 0.0


@dataclass(frozen=True)
class TopQueue:
    """A queue at KAI's top level (no parent): the org's, KAI's own default-parent-queue,
    any other tenant's. In GPUs; -1: unlimited."""

    name: str
    quota: float
    limit: float
    weight: float
    priority: int
    requested: float  # what its pods request, its children's included
    created: int | None = None
    uid: str = ""


@dataclass(frozen=True)
class ClusterTop:
    """What KAI divides first: every schedulable node's allocatable GPUs among every
    top-level queue. The org's pool is only its queue's guarantee in that division."""

    gpus: float
    queues: tuple[TopQueue, ...]
    # KAI's time-based fairshare as its SchedulingShard configures it, where one is read:
    # spec.kValue (None: KAI's default, 1.0) and whether a usage database is set
    # (usageDBConfig; without one every queue's usage is 0 and kValue moves nothing).
    k_value: float | None = None
    usage_db: bool = False


class UsageReader(Protocol):
    """Reads every named queue's usage in one call, and KAI's top level."""

    def usage(self, queue_names: list[str]) -> dict[str, QueueUsage]: ...

    def cluster_top(self, pool: str = "") -> ClusterTop | None:
        """The top level of one KAI shard: the GPUs of its nodes and its top-level queues
        (``pool``: the node pool's label value; "" the default shard, the nodes and
        queues without the label); None where unknown."""
        ...


class MetricsError(Exception):
    """KAI's metrics could not be read; shown on the page, not hidden behind zeros."""


@dataclass(frozen=True)
class KaiQueueMetrics:
    """KAI's own figures per queue name, in GPUs."""

    allocated: dict[str, float]
    fair_share: dict[str, float]
    # kai_queue_gpu_usage: each queue's past usage as the scheduler used it (time-based
    # fairshare; 0 or absent without a usage database), by the same key.
    usage: dict[str, float] = field(default_factory=dict)
    # True: keyed by each queue's metadata.name (KAI's queue_metadata_name label). False:
    # by KAI's queue_name, which is the displayName where the scheduler exports it.
    by_metadata_name: bool = False


class KaiMetricsSource(Protocol):
    def read(self) -> KaiQueueMetrics: ...
