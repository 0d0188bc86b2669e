"""Choose the cluster backend from settings."""

from __future__ import annotations

from app.config import ClusterBackendKind, Settings
from app.provisioning.backend import ClusterBackend
from app.provisioning.simulated import SimulatedBackend


def make_backend(settings: Settings) -> ClusterBackend:
    if settings.cluster_backend == ClusterBackendKind.SIMULATED:
        return SimulatedBackend(step_seconds=settings.simulated_step_seconds)
    raise RuntimeError(
        "PORTAL_CLUSTER_BACKEND=kubernetes is not available in this version; "
        "use PORTAL_CLUSTER_BACKEND=simulated"
    )
