"""The cluster backend the settings choose."""

from __future__ import annotations

from typing import Protocol

from app.access.credentials import CredentialIssuer
from app.adapters.simulated import SimulatedBackend
from app.core.config import ClusterBackendKind, Settings
from app.provisioning.backend import ClusterBackend, WorkloadReader
from app.teams.pools import NodePoolReader
from app.usage.sources import UsageReader


class Cluster(
    ClusterBackend, WorkloadReader, CredentialIssuer, UsageReader, NodePoolReader, Protocol
):
    """A backend provisions teams and reports the pods the host refused (the provisioning
    domain's protocols), hands out and revokes personal credentials (the access domain's),
    reads the queues' usage (the usage domain's) and the cluster's node pools (the teams
    domain's)."""


def make_backend(settings: Settings) -> Cluster:
    if settings.cluster_backend == ClusterBackendKind.SIMULATED:
        return SimulatedBackend(
            step_seconds=settings.simulated_step_seconds,
            call_seconds=settings.simulated_call_seconds,
            cluster_gpus=settings.simulated_cluster_gpus,
            node_pools=settings.simulated_pools,
            chart_version=settings.chart_version,
            example_work=settings.simulated_example_work,
        )
    from app.adapters.k8s.backend import KubernetesBackend

    return KubernetesBackend(settings)
