"""Typed access to a test app's parts where a test needs the concrete class."""

from __future__ import annotations

from starlette.applications import Starlette

from app.adapters.k8s.backend import KubernetesBackend
from app.adapters.oidc import OidcClient
from app.adapters.simulated import SimulatedBackend
from app.runtime import portal_of


def simulated_backend(app: Starlette) -> SimulatedBackend:
    backend = portal_of(app).backend
    assert isinstance(backend, SimulatedBackend), "this test runs on the simulated cluster"
    return backend


def kubernetes_backend(app: Starlette) -> KubernetesBackend:
    backend = portal_of(app).backend
    assert isinstance(backend, KubernetesBackend), "this test runs on a real API server"
    return backend


def oidc_client(app: Starlette) -> OidcClient:
    client = portal_of(app).oidc
    assert client is not None, "this test signs in with the OIDC provider"
    return client
