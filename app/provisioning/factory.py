"""Choose the cluster backend from settings."""

from __future__ import annotations

from app.config import ClusterBackendKind, Settings
from app.provisioning.backend import ClusterBackend
from app.provisioning.simulated import SimulatedBackend


def make_backend(settings: Settings) -> ClusterBackend:
    if settings.cluster_backend == ClusterBackendKind.SIMULATED:
        return SimulatedBackend(step_seconds=settings.simulated_step_seconds)
    from app.k8s.backend import KubernetesBackend

    return KubernetesBackend(settings)
