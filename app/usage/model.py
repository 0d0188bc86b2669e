"""What KAI's division of an org depends on: the teams' quota rows and the model of
the cluster around them (its top level, time-based fairshare)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from app.core.models import Pool, in_pool
from app.core.quota import GPU, Resource
from app.usage.sources import ClusterTop

TEAM_QUEUE_PREFIX = "team-"


@dataclass(frozen=True)
class Model:
    """What KAI's division depends on beyond the org's own rows: its top level (the
    cluster's GPUs and every top-level queue; None: unknown, the pool alone is divided)
    and time-based fairshare (kValue, and each queue's past usage as a fraction of the
    cluster; kValue 0: off). Every figure (gauges, impact, what-if) uses the same one."""

    top: ClusterTop | None = None
    k_value: float = 0.0
    usage: Mapping[str, float] = field(default_factory=dict)
    # Time-based fairshare is on in KAI but the portal cannot read the usage it weighs.
    history_error: str | None = None

    @property
    def weighs_history(self) -> bool:
        return self.k_value > 0 and any(v > 0 for v in self.usage.values())

    @property
    def cluster_gpus(self) -> float | None:
        return self.top.gpus if self.top is not None and self.top.gpus > 0 else None


NO_MODEL = Model()


def team_queue(team: str, pool: str = "") -> str:
    """A team's queue: ``team-<name>`` in the default pool, ``team-<name>-<pool>`` in
    another (a Queue serves one shard, so a team has one per pool)."""
    queue = f"{TEAM_QUEUE_PREFIX}{team}"
    return in_pool(queue, pool) if pool else queue


@dataclass(frozen=True)
class ShareKey:
    """What one division divides: one resource in one node pool. KAI divides every
    resource of every pool on its own (a shard per pool, each resource in turn), with the
    same algorithm: the portal computes one division per key, each team's share of it
    and its gauge. ``pool_id`` None: the org's default pool (KAI's default shard)."""

    resource: Resource = GPU
    pool_id: int | None = None
    pool_name: str = ""
    # The pool's node label value: what KAI's shard for it selects its nodes by.
    pool_label: str = ""

    @classmethod
    def of_pool(cls, pool: Pool) -> ShareKey:
        """GPUs in another node pool than the default: what its shard divides."""
        return cls(GPU, pool.id, pool.name, pool.label_value or "")

    @property
    def is_default(self) -> bool:
        return self.pool_id is None and self.resource is GPU

    def queue_name(self, team: str) -> str:
        """The team's queue for this key's pool: its own queue in the default pool, one
        queue per other pool (a Queue serves one shard)."""
        return team_queue(team, "" if self.pool_id is None else self.pool_name)

    def parent_queue(self, org_queue: str) -> str:
        """The org's queue in this key's pool: the org's own in the default pool."""
        return org_queue if self.pool_id is None else in_pool(org_queue, self.pool_name)

    def describe(self) -> str:
        """The key in people's words: "GPU", "GPU in pool l40s"."""
        name = self.resource.name
        return name if self.pool_id is None else f"{name} in pool {self.pool_name}"


DEFAULT_KEY = ShareKey()


@dataclass(frozen=True, slots=True)
class TeamQuota:
    """The part of a team that fair share depends on, for one key (``ShareKey``): the
    amounts in hundredths of the resource's unit as people read it (GPUs, cores, GB;
    -100: unlimited), the weight in hundredths."""

    id: int
    name: str
    quota_centi: int
    limit_centi: int
    weight_centi: int
    priority: int
    # When the team was created, in whole seconds: KAI breaks ties by its queue's creation
    # time (one-second resolution); the cluster's own timestamp wins where it is known.
    created: int = 0
    # Only a ready team runs work: the others show their quota, not usage.
    ready: bool = True
    # The pool's name where the key is another pool than the default (its own queue).
    pool: str = ""

    @property
    def queue_name(self) -> str:
        return team_queue(self.name, self.pool)
