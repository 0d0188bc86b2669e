"""What the admin overview shows besides the figures of ``app.reads.overview``."""

from __future__ import annotations

from dataclasses import dataclass

from app.core.models import (
    Org,
)
from app.core.quantities import gpus


@dataclass
class PoolSummary:
    org: Org
    committed_centi: int
    allocated: float | None
    live_teams: int
    cluster_gpus: float | None = None  # the cluster's schedulable GPUs, where known

    @property
    def beyond_cluster(self) -> float:
        """GPUs of the pool the cluster does not have (KAI cannot keep those promises)."""
        if self.cluster_gpus is None:
            return 0.0
        return max(0.0, round(gpus(self.org.gpus_centi) - self.cluster_gpus, 2))

    @property
    def free_centi(self) -> int:
        return max(0, self.org.gpus_centi - self.committed_centi)

    @property
    def committed_pct(self) -> float:
        return 100 * self.committed_centi / self.org.gpus_centi if self.org.gpus_centi else 0.0

    @property
    def idle(self) -> float | None:
        if self.allocated is None:
            return None
        usable = gpus(self.org.gpus_centi) - self.beyond_cluster
        return max(0.0, round(usable - self.allocated, 2))
