"""The seam between the workflow and a cluster: one interface, several backends.

The reconciler speaks only these terms. A backend observes one provisioning step of one
team, applies it (idempotently) or removes it, hands out the kubeconfig and reads usage.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Protocol

from app.core.models import Org, Step, Team
from app.core.quantities import gpus

DEFAULT_QUEUE_LABEL = "kai.scheduler/queue"


class BackendError(Exception):
    """A cluster call failed; the reconciler records it and retries with backoff."""


@dataclass(frozen=True)
class ResourceQuota:
    """One KAI resource entry, in KAI's units (GPUs, millicpus, megabytes)."""

    quota: float
    limit: float
    over_quota_weight: float


@dataclass(frozen=True)
class TeamSpec:
    """Everything a backend needs to know about a team, in the cluster's terms."""

    team: str
    namespace: str
    vcluster_name: str
    queue_name: str
    parent_queue: str
    priority: int
    gpu: ResourceQuota
    cpu: ResourceQuota
    memory: ResourceQuota
    org_gpu: ResourceQuota
    org_cpu: ResourceQuota
    org_memory: ResourceQuota
    queue_label: str = DEFAULT_QUEUE_LABEL


def spec_for(team: Team, org: Org, *, queue_label: str = DEFAULT_QUEUE_LABEL) -> TeamSpec:
    """Translate stored values into KAI's units; every resource gets all three fields."""
    weight = gpus(team.weight_centi)
    unlimited = -1.0
    return TeamSpec(
        team=team.name,
        namespace=team.namespace,
        vcluster_name=team.vcluster_name,
        queue_name=team.queue_name,
        parent_queue=org.parent_queue,
        priority=team.priority,
        gpu=ResourceQuota(gpus(team.gpu_quota_centi), gpus(team.gpu_limit_centi), weight),
        cpu=ResourceQuota(float(team.cpu_quota_millicores or 0), unlimited, weight),
        memory=ResourceQuota(float(team.memory_quota_mb or 0), unlimited, weight),
        org_gpu=ResourceQuota(gpus(org.gpus_centi), unlimited, 1.0),
        org_cpu=ResourceQuota(float(org.cpu_millicores), unlimited, 1.0),
        org_memory=ResourceQuota(float(org.memory_mb), unlimited, 1.0),
        queue_label=queue_label,
    )


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


@dataclass(frozen=True)
class Person:
    """Whom a personal credential is for, and what they may do inside the vCluster."""

    user_id: int
    email: str
    portal_role: str  # admin | lead | member
    cluster_role: str  # the ClusterRole bound inside the vCluster

    @property
    def account(self) -> str:
        """The person's ServiceAccount inside every vCluster they use."""
        return f"portal-user-{self.user_id}"


@dataclass(frozen=True)
class IssuedCredential:
    """A kubeconfig made for one person now; the token inside it is never stored."""

    kubeconfig: str
    expires_at: datetime
    token_id: str


@dataclass(frozen=True)
class Account:
    """A per-person ServiceAccount as found inside a vCluster."""

    name: str
    cluster_role: str
    created_at: datetime
    uid: str = ""


class ClusterBackend(Protocol):
    """What the reconciler and the kubeconfig download need from a cluster. (Usage is read
    through the usage domain's ``UsageReader``, which the same adapters implement.)"""

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

    def issue_credential(
        self, spec: TeamSpec, person: Person, *, ttl_seconds: int
    ) -> IssuedCredential:
        """Make sure the person's ServiceAccount exists in the team's vCluster, bound to
        their role, and return a kubeconfig with a token for it that expires in
        ``ttl_seconds``. The vCluster's admin credential never leaves the backend."""
        ...

    def credential_accounts(self, spec: TeamSpec) -> list[Account]:
        """Every per-person ServiceAccount the portal made in the team's vCluster."""
        ...

    def revoke_credentials(
        self, spec: TeamSpec, accounts: Collection[str], *, uids: Mapping[str, str] | None = None
    ) -> None:
        """Delete these ServiceAccounts (and their bindings): their tokens stop working.
        With ``uids``, an account is deleted only while it is still that object."""
        ...

    def oidc_kubeconfig(
        self, spec: TeamSpec, person: Person, *, issuer: str, client_id: str
    ) -> str:
        """A kubeconfig that signs in through the identity provider (kubectl oidc-login):
        no credential of its own."""
        ...
