"""What KAI's division of an org depends on: the teams' quota rows and the model of
the cluster around them (its top level, time-based fairshare)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

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


@dataclass(frozen=True, slots=True)
class TeamQuota:
    """The part of a team that fair share depends on."""

    id: int
    name: str
    gpu_quota_centi: int
    gpu_limit_centi: int
    weight_centi: int
    priority: int
    # When the team was created, in whole seconds: KAI breaks ties by its queue's creation
    # time (one-second resolution); the cluster's own timestamp wins where it is known.
    created: int = 0
    # Only a ready team runs work: the others show their quota, not usage.
    ready: bool = True

    @property
    def queue_name(self) -> str:
        return f"{TEAM_QUEUE_PREFIX}{self.name}"
