"""The connection to the host cluster, shared by the parts of the Kubernetes backend.

One ``Kube`` holds the API clients, counts calls, keeps the per-pass snapshot of
cluster-scoped objects and remembers when slow namespaced checks last passed. Each part
(cluster objects, vCluster installer, kubeconfigs) is a ``Part`` over the same ``Kube``.
"""

from __future__ import annotations

import os
import time
from collections import Counter, deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

import yaml
from kubernetes import client, config
from kubernetes.client.exceptions import ApiException
from urllib3.exceptions import HTTPError as Urllib3Error

from app.core.config import Settings
from app.provisioning.backend import BackendError, Observation

T = TypeVar("T")
VERBS = {
    "reading": "get",
    "listing": "list",
    "applying": "apply",
    "granting": "apply",
    "deleting": "delete",
}
APPLY = "application/apply-patch+yaml"
FIELD_MANAGER = "gpu-portal"


@dataclass
class Snapshot:
    """Cluster-scoped objects listed once at the start of a reconcile pass."""

    queues: dict[str, dict[str, Any]]
    namespaces: dict[str, Any]
    policies: dict[str, Any]
    bindings: dict[str, Any]


def make_api_client(settings: Settings) -> client.ApiClient:
    """In a pod: the in-cluster config. Elsewhere: the configured kubeconfig and context."""
    if os.environ.get("KUBERNETES_SERVICE_HOST") and not settings.kubeconfig:
        configuration = client.Configuration()
        config.load_incluster_config(client_configuration=configuration)
        return client.ApiClient(configuration)
    api: client.ApiClient = config.new_client_from_config(
        config_file=settings.kubeconfig, context=settings.kube_context
    )
    return api


class Kube:
    """One connection to the host cluster and what a pass remembers of it."""

    def __init__(self, settings: Settings, api: client.ApiClient | None = None) -> None:
        self.settings = settings
        self.api = api or make_api_client(settings)
        self.core = client.CoreV1Api(self.api)
        self.custom = client.CustomObjectsApi(self.api)
        self.admission = client.AdmissionregistrationV1Api(self.api)
        self.rbac = client.RbacAuthorizationV1Api(self.api)
        self.apps = client.AppsV1Api(self.api)
        self.requests = 0
        self.calls: Counter[str] = Counter()
        # The last vcluster/helm runs' durations, for the benchmark.
        self.cli_seconds: deque[float] = deque(maxlen=10_000)
        self.snapshot: Snapshot | None = None
        # Per team and check: when a namespaced check (vCluster pod, kubeconfig secret,
        # the portal's role binding) last passed. Ready teams repeat them only this often,
        # so a steady pass costs a fixed number of list calls, whatever the team count.
        self.deep_ok: dict[tuple[str, str], tuple[float, Observation]] = {}
        self.deep_check_seconds = 600.0

    def call(self, what: str, fn: Callable[[], T], *, missing_ok: bool = False) -> T | None:
        """One API call; a 404 may mean "absent", anything else becomes a BackendError."""
        self.requests += 1
        verb = what.split(" ", 1)[0]
        self.calls[VERBS.get(verb, verb)] += 1
        if VERBS.get(verb) in ("apply", "delete"):
            self.snapshot = None  # a write: read afresh for the rest of the pass
        try:
            return fn()
        except ApiException as exc:
            if exc.status == 404 and missing_ok:
                return None
            reason = api_message(exc)
            raise BackendError(f"{what}: {reason}") from exc
        except (Urllib3Error, OSError) as exc:
            raise BackendError(f"{what}: the cluster could not be reached ({exc})") from exc

    def deep(self, team: str, check: str, run: Callable[[], Observation]) -> Observation:
        """Run a namespaced check unless it passed within ``deep_check_seconds``; then what
        it saw is repeated."""
        key = (team, check)
        passed = self.deep_ok.get(key)
        if passed is not None and time.monotonic() - passed[0] < self.deep_check_seconds:
            return passed[1]
        observed = run()
        if observed.done:
            self.deep_ok[key] = (time.monotonic(), observed)
        else:
            self.deep_ok.pop(key, None)
        return observed

    def forget(self, team: str, checks: tuple[str, ...]) -> None:
        for check in checks:
            self.deep_ok.pop((team, check), None)


class Part:
    """A part of the backend: speaks to the cluster through the shared ``Kube``."""

    def __init__(self, kube: Kube) -> None:
        self.kube = kube

    @property
    def settings(self) -> Settings:
        return self.kube.settings

    def _call(self, what: str, fn: Callable[[], T], *, missing_ok: bool = False) -> T | None:
        return self.kube.call(what, fn, missing_ok=missing_ok)


def api_message(exc: ApiException) -> str:
    try:
        body = yaml.safe_load(exc.body or "") or {}
        message = body.get("message") if isinstance(body, dict) else None
    except yaml.YAMLError:
        message = None
    return f"{exc.status} {exc.reason}: {message or 'no details'}"
