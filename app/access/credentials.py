"""Personal credentials as the access domain needs them from a cluster: whom one is for,
what is handed out, what is found; and the protocol a backend implements for them."""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Protocol

from app.provisioning.backend import TeamSpec


@dataclass(frozen=True)
class Person:
    """Whom a personal credential is for, and what they may do inside the vCluster."""

    user_id: int
    email: str
    portal_role: str  # admin | lead | member (PortalRole)
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


class CredentialIssuer(Protocol):
    """What the kubeconfig download and the access sweeper need from a cluster."""

    simulated: bool  # a simulated cluster's credentials are marked as such

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
