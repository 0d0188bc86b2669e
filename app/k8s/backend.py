"""The `kubernetes` cluster backend: KAI queues, namespaces, admission policies, vClusters.

This is the only module that imports the `kubernetes` package; everything else speaks in
the portal's terms (TeamSpec, Step, Observation).
"""

from __future__ import annotations

import base64
import os
import subprocess
import tempfile
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from decimal import Decimal
from pathlib import Path
from typing import Any, TypeVar

import yaml
from kubernetes import client, config
from kubernetes.client.exceptions import ApiException
from kubernetes.utils import parse_quantity
from urllib3.exceptions import HTTPError as Urllib3Error

from app.config import Settings
from app.k8s import manifests as m
from app.models import Step
from app.provisioning.backend import (
    DONE,
    MISSING,
    PROGRESSING,
    BackendError,
    Observation,
    QueueUsage,
    TeamSpec,
)

T = TypeVar("T")
DEEP_CHECKS_OF = {
    Step.NAMESPACE: ("role binding",),
    Step.VCLUSTER: ("vCluster", "kubeconfig"),
}
VERBS = {
    "reading": "get",
    "listing": "list",
    "applying": "apply",
    "granting": "apply",
    "deleting": "delete",
}
APPLY = "application/apply-patch+yaml"
FIELD_MANAGER = "gpu-portal"
GPU = "nvidia.com/gpu"


@dataclass
class _Snapshot:
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


class KubernetesBackend:
    kind = "kubernetes"
    simulated = False

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
        self._snapshot: _Snapshot | None = None
        # Per team and check: when a namespaced check (vCluster pod, kubeconfig secret,
        # the portal's role binding) last passed. Ready teams repeat them only this often,
        # so a steady pass costs a fixed number of list calls, whatever the team count.
        self._deep_ok: dict[tuple[str, str], float] = {}
        self.deep_check_seconds = 600.0

    # --- calls ----------------------------------------------------------------------

    def _call(self, what: str, fn: Callable[[], T], *, missing_ok: bool = False) -> T | None:
        """One API call; a 404 may mean "absent", anything else becomes a BackendError."""
        self.requests += 1
        verb = what.split(" ", 1)[0]
        self.calls[VERBS.get(verb, verb)] += 1
        if VERBS.get(verb) in ("apply", "delete"):
            self._snapshot = None  # a write: read afresh for the rest of the pass
        try:
            return fn()
        except ApiException as exc:
            if exc.status == 404 and missing_ok:
                return None
            reason = _api_message(exc)
            raise BackendError(f"{what}: {reason}") from exc
        except (Urllib3Error, OSError) as exc:
            raise BackendError(f"{what}: the cluster could not be reached ({exc})") from exc

    def _apply_queue(self, body: dict[str, Any]) -> None:
        name = body["metadata"]["name"]
        self._call(
            f"applying queue {name}",
            lambda: self.custom.patch_cluster_custom_object(
                m.QUEUE_GROUP,
                m.QUEUE_VERSION,
                m.QUEUE_PLURAL,
                name,
                body,
                field_manager=FIELD_MANAGER,
                force=True,
                _content_type=APPLY,
            ),
        )

    def _get_queue(self, name: str) -> dict[str, Any] | None:
        if self._snapshot is not None:
            return self._snapshot.queues.get(name)
        found = self._call(
            f"reading queue {name}",
            lambda: self.custom.get_cluster_custom_object(
                m.QUEUE_GROUP, m.QUEUE_VERSION, m.QUEUE_PLURAL, name
            ),
            missing_ok=True,
        )
        return found if isinstance(found, dict) else None

    def begin_pass(self) -> None:
        """List every cluster-scoped kind once; observations in this pass read from that
        snapshot until a write invalidates it."""
        self._snapshot = None
        queues: Any = self._call(
            "listing queues",
            lambda: self.custom.list_cluster_custom_object(
                m.QUEUE_GROUP, m.QUEUE_VERSION, m.QUEUE_PLURAL
            ),
        )
        namespaces: Any = self._call(
            "listing namespaces",
            lambda: self.core.list_namespace(label_selector=f"{m.MANAGED_BY}={m.PORTAL}"),
        )
        policies: Any = self._call(
            "listing policies", lambda: self.admission.list_validating_admission_policy()
        )
        bindings: Any = self._call(
            "listing policy bindings",
            lambda: self.admission.list_validating_admission_policy_binding(),
        )
        self._snapshot = _Snapshot(
            queues={q["metadata"]["name"]: q for q in (queues or {}).get("items", [])},
            namespaces={n.metadata.name: n for n in namespaces.items},
            policies={p.metadata.name: p for p in policies.items},
            bindings={b.metadata.name: b for b in bindings.items},
        )

    def end_pass(self) -> None:
        self._snapshot = None

    def _deep(self, team: str, check: str, run: Callable[[], Observation]) -> Observation:
        key = (team, check)
        passed_at = self._deep_ok.get(key)
        if passed_at is not None and time.monotonic() - passed_at < self.deep_check_seconds:
            return Observation(DONE, f"{check} checked recently")
        observed = run()
        if observed.done:
            self._deep_ok[key] = time.monotonic()
        else:
            self._deep_ok.pop(key, None)
        return observed

    def _forget(self, team: str, checks: tuple[str, ...]) -> None:
        for check in checks:
            self._deep_ok.pop((team, check), None)

    # --- steps ----------------------------------------------------------------------

    def observe(self, step: Step, spec: TeamSpec) -> Observation:
        return {
            Step.QUEUE: self._observe_queue,
            Step.NAMESPACE: self._observe_namespace,
            Step.VCLUSTER: self._observe_vcluster,
            Step.ADMISSION_POLICY: self._observe_policy,
            Step.KUBECONFIG: self._observe_kubeconfig,
        }[step](spec)

    def apply(self, step: Step, spec: TeamSpec) -> Observation:
        self._forget(spec.team, DEEP_CHECKS_OF.get(step, ()))
        {
            Step.QUEUE: self._apply_queues,
            Step.NAMESPACE: self._apply_namespace,
            Step.VCLUSTER: self._apply_vcluster,
            Step.ADMISSION_POLICY: self._apply_policy,
            Step.KUBECONFIG: lambda _spec: None,
        }[step](spec)
        return self.observe(step, spec)

    def remove(self, step: Step, spec: TeamSpec) -> Observation:
        self._forget(spec.team, ("role binding", "vCluster", "kubeconfig"))
        return {
            Step.QUEUE: self._remove_queue,
            Step.NAMESPACE: self._remove_namespace,
            Step.VCLUSTER: self._remove_vcluster,
            Step.ADMISSION_POLICY: self._remove_policy,
            Step.KUBECONFIG: lambda _spec: Observation(DONE, "goes with the vCluster"),
        }[step](spec)

    # queue

    def _observe_queue(self, spec: TeamSpec) -> Observation:
        parent = self._get_queue(spec.parent_queue)
        if parent is None:
            return Observation(MISSING, f"parent queue {spec.parent_queue} does not exist")
        if _owned(parent) and parent.get("spec") != m.make_parent_queue(spec)["spec"]:
            return Observation(MISSING, f"parent queue {spec.parent_queue} differs from the pool")
        queue = self._get_queue(spec.queue_name)
        if queue is None:
            return Observation(MISSING, f"queue {spec.queue_name} does not exist")
        if not _owned(queue):
            raise BackendError(_foreign("queue", spec.queue_name))
        if queue.get("spec") != m.make_queue(spec)["spec"]:
            return Observation(MISSING, f"queue {spec.queue_name} differs from the approved quota")
        return Observation(DONE, f"queue {spec.queue_name} under {spec.parent_queue}")

    def _apply_queues(self, spec: TeamSpec) -> None:
        parent = self._get_queue(spec.parent_queue)
        if parent is None or _owned(parent):
            self._apply_queue(m.make_parent_queue(spec))
        queue = self._get_queue(spec.queue_name)
        if queue is not None and not _owned(queue):
            raise BackendError(_foreign("queue", spec.queue_name))
        self._apply_queue(m.make_queue(spec))

    def _remove_queue(self, spec: TeamSpec) -> Observation:
        queue = self._get_queue(spec.queue_name)
        if queue is not None:
            if not _owned(queue):
                return Observation(DONE, f"queue {spec.queue_name} is not the portal's: left alone")
            self._call(
                f"deleting queue {spec.queue_name}",
                lambda: self.custom.delete_cluster_custom_object(
                    m.QUEUE_GROUP, m.QUEUE_VERSION, m.QUEUE_PLURAL, spec.queue_name
                ),
                missing_ok=True,
            )
        self._remove_parent_if_empty(spec)
        return Observation(DONE, f"queue {spec.queue_name} deleted")

    def _remove_parent_if_empty(self, spec: TeamSpec) -> None:
        """The org's parent queue goes with its last child, and never before."""
        parent = self._get_queue(spec.parent_queue)
        if parent is None or not _owned(parent):
            return
        listed: Any = self._call(
            "listing queues",
            lambda: self.custom.list_cluster_custom_object(
                m.QUEUE_GROUP, m.QUEUE_VERSION, m.QUEUE_PLURAL
            ),
        )
        children = [
            q["metadata"]["name"]
            for q in (listed or {}).get("items", [])
            if q.get("spec", {}).get("parentQueue") == spec.parent_queue
        ]
        if not children:
            self._call(
                f"deleting parent queue {spec.parent_queue}",
                lambda: self.custom.delete_cluster_custom_object(
                    m.QUEUE_GROUP, m.QUEUE_VERSION, m.QUEUE_PLURAL, spec.parent_queue
                ),
                missing_ok=True,
            )

    # namespace

    def _read_namespace(self, name: str) -> Any:
        if self._snapshot is not None:
            return self._snapshot.namespaces.get(name) or self._call(
                f"reading namespace {name}", lambda: self.core.read_namespace(name), missing_ok=True
            )
        return self._call(
            f"reading namespace {name}", lambda: self.core.read_namespace(name), missing_ok=True
        )

    def _observe_namespace(self, spec: TeamSpec) -> Observation:
        ns = self._read_namespace(spec.namespace)
        if ns is None:
            return Observation(MISSING, f"namespace {spec.namespace} does not exist")
        labels = ns.metadata.labels or {}
        if labels.get(m.MANAGED_BY) != m.PORTAL:
            raise BackendError(_foreign("namespace", spec.namespace))
        if ns.status and ns.status.phase == "Terminating":
            return Observation(PROGRESSING, f"namespace {spec.namespace} is still terminating")
        if self.settings.kube_service_account:
            return self._deep(spec.team, "role binding", lambda: self._observe_binding(spec))
        return Observation(DONE, f"namespace {spec.namespace}")

    def _observe_binding(self, spec: TeamSpec) -> Observation:
        binding = self._call(
            f"reading the portal's role binding in {spec.namespace}",
            lambda: self.rbac.read_namespaced_role_binding(m.PORTAL, spec.namespace),
            missing_ok=True,
        )
        if binding is None:
            return Observation(MISSING, f"the portal's role in {spec.namespace} is missing")
        return Observation(DONE, f"namespace {spec.namespace}")

    def _apply_namespace(self, spec: TeamSpec) -> None:
        body = m.make_namespace(spec)
        self._call(
            f"applying namespace {spec.namespace}",
            lambda: self.core.patch_namespace(
                spec.namespace, body, field_manager=FIELD_MANAGER, force=True, _content_type=APPLY
            ),
        )
        account = self.settings.kube_service_account
        if account:
            binding = m.make_portal_binding(spec, account)
            self._call(
                f"granting the portal its role in {spec.namespace}",
                lambda: self.rbac.patch_namespaced_role_binding(
                    m.PORTAL,
                    spec.namespace,
                    binding,
                    field_manager=FIELD_MANAGER,
                    force=True,
                    _content_type=APPLY,
                ),
            )

    def _remove_namespace(self, spec: TeamSpec) -> Observation:
        ns: Any = self._call(
            f"reading namespace {spec.namespace}",
            lambda: self.core.read_namespace(spec.namespace),
            missing_ok=True,
        )
        if ns is None:
            return Observation(DONE, f"namespace {spec.namespace} deleted")
        if (ns.metadata.labels or {}).get(m.MANAGED_BY) != m.PORTAL:
            return Observation(DONE, f"namespace {spec.namespace} is not the portal's: left alone")
        if not ns.metadata.deletion_timestamp:
            self._call(
                f"deleting namespace {spec.namespace}",
                lambda: self.core.delete_namespace(spec.namespace),
                missing_ok=True,
            )
        return Observation(PROGRESSING, f"namespace {spec.namespace} is being deleted")

    # vCluster

    def _control_plane_pods(self, spec: TeamSpec) -> list[Any]:
        pods = self._call(
            f"listing the vCluster pods in {spec.namespace}",
            lambda: self.core.list_namespaced_pod(
                spec.namespace, label_selector=f"app=vcluster,release={spec.vcluster_name}"
            ),
            missing_ok=True,
        )
        return list(pods.items) if pods is not None else []

    def _observe_vcluster(self, spec: TeamSpec) -> Observation:
        return self._deep(spec.team, "vCluster", lambda: self._check_vcluster(spec))

    def _check_vcluster(self, spec: TeamSpec) -> Observation:
        pods = self._control_plane_pods(spec)
        if not pods:
            installed = self._call(
                f"reading statefulset {spec.vcluster_name}",
                lambda: self.apps.read_namespaced_stateful_set(spec.vcluster_name, spec.namespace),
                missing_ok=True,
            )
            if installed is None:
                return Observation(MISSING, f"vCluster {spec.vcluster_name} is not installed")
            return Observation(
                PROGRESSING, f"vCluster {spec.vcluster_name} is installed; its pod is starting"
            )
        if any(_ready(pod) for pod in pods):
            return Observation(DONE, f"vCluster {spec.vcluster_name} control plane is ready")
        return Observation(PROGRESSING, f"vCluster {spec.vcluster_name} control plane is starting")

    def _apply_vcluster(self, spec: TeamSpec) -> None:
        settings = self.settings
        host = settings.vcluster_ingress_host.replace("{team}", spec.team)
        expose = settings.vcluster_expose
        values = m.vcluster_values(
            spec,
            expose=expose,
            ingress_host=host if expose == "Ingress" else None,
            extra_sans=[settings.vcluster_node_address or ""] if expose == "NodePort" else [],
        )
        with tempfile.NamedTemporaryFile("w", suffix=".yaml", delete=False) as handle:
            yaml.safe_dump(values, handle)
            values_file = handle.name
        try:
            if settings.vcluster_installer == "helm":
                args = [
                    "upgrade",
                    "--install",
                    spec.vcluster_name,
                    "vcluster",
                    "--repo",
                    settings.vcluster_chart_repo,
                    "--namespace",
                    spec.namespace,
                    "--version",
                    settings.vcluster_chart_version,
                    "--values",
                    values_file,
                ]
            else:
                args = [
                    "create",
                    spec.vcluster_name,
                    "--namespace",
                    spec.namespace,
                    "--values",
                    values_file,
                    "--connect=false",
                    "--chart-version",
                    settings.vcluster_chart_version,
                    "--upgrade",
                ]
            self._cli(args, what=f"installing vCluster {spec.vcluster_name}")
        finally:
            os.unlink(values_file)

    def _remove_vcluster(self, spec: TeamSpec) -> Observation:
        ns: Any = self._call(
            f"reading namespace {spec.namespace}",
            lambda: self.core.read_namespace(spec.namespace),
            missing_ok=True,
        )
        if ns is None or ns.metadata.deletion_timestamp:
            return Observation(DONE, f"vCluster {spec.vcluster_name} goes with its namespace")
        if not self._control_plane_pods(spec):
            return Observation(DONE, f"vCluster {spec.vcluster_name} deleted")
        verb = "uninstall" if self.settings.vcluster_installer == "helm" else "delete"
        self._cli(
            [verb, spec.vcluster_name, "--namespace", spec.namespace],
            what=f"deleting vCluster {spec.vcluster_name}",
        )
        return self._observe_vcluster_gone(spec)

    def _observe_vcluster_gone(self, spec: TeamSpec) -> Observation:
        if self._control_plane_pods(spec):
            return Observation(PROGRESSING, f"vCluster {spec.vcluster_name} is being deleted")
        return Observation(DONE, f"vCluster {spec.vcluster_name} deleted")

    def _cli(self, args: list[str], *, what: str) -> None:
        env = dict(os.environ)
        helm = self.settings.vcluster_installer == "helm"
        executable = self.settings.helm_cli if helm else self.settings.vcluster_cli
        if self.settings.kubeconfig:
            env["KUBECONFIG"] = self.settings.kubeconfig
        if self.settings.kube_context:
            args = [*args, "--kube-context" if helm else "--context", self.settings.kube_context]
        self.requests += 1
        try:
            result = subprocess.run(  # noqa: S603 - a configured executable, no shell
                [executable, *args],
                capture_output=True,
                text=True,
                timeout=self.settings.vcluster_timeout_seconds,
                env=env,
                check=False,
            )
        except subprocess.TimeoutExpired as exc:
            raise BackendError(
                f"{what}: `{Path(executable).name} {args[0]}` did not finish in "
                f"{self.settings.vcluster_timeout_seconds:.0f}s"
            ) from exc
        except FileNotFoundError as exc:
            raise BackendError(f"{what}: {executable} is not installed") from exc
        if result.returncode != 0:
            stderr = (result.stderr or result.stdout).strip()[-800:]
            raise BackendError(
                f"{what}: {Path(executable).name} exited with {result.returncode}: {stderr}"
            )

    # admission policy

    def _observe_policy(self, spec: TeamSpec) -> Observation:
        name = m.policy_name(spec)
        policy: Any
        binding: Any
        if self._snapshot is not None:
            policy = self._snapshot.policies.get(name)
            binding = self._snapshot.bindings.get(name)
        else:
            policy = self._call(
                f"reading policy {name}",
                lambda: self.admission.read_validating_admission_policy(name),
                missing_ok=True,
            )
            binding = self._call(
                f"reading policy binding {name}",
                lambda: self.admission.read_validating_admission_policy_binding(name),
                missing_ok=True,
            )
        if policy is None or binding is None:
            return Observation(MISSING, f"admission policy {name} does not exist")
        wanted = m.make_policy(spec)["spec"]
        actual: dict[str, Any] = self.api.sanitize_for_serialization(policy.spec)
        if [v.get("expression") for v in actual.get("validations", [])] != [
            v["expression"] for v in wanted["validations"]
        ]:
            return Observation(MISSING, f"admission policy {name} was changed")
        bound: dict[str, Any] = self.api.sanitize_for_serialization(binding.spec)
        if bound.get("validationActions") != ["Deny"] or bound.get("policyName") != name:
            return Observation(MISSING, f"admission policy binding {name} was changed")
        return Observation(DONE, f"pods in {spec.namespace} are pinned to {spec.queue_name}")

    def _apply_policy(self, spec: TeamSpec) -> None:
        name = m.policy_name(spec)
        policy, binding = m.make_policy(spec), m.make_policy_binding(spec)
        self._call(
            f"applying policy {name}",
            lambda: self.admission.patch_validating_admission_policy(
                name, policy, field_manager=FIELD_MANAGER, force=True, _content_type=APPLY
            ),
        )
        self._call(
            f"applying policy binding {name}",
            lambda: self.admission.patch_validating_admission_policy_binding(
                name, binding, field_manager=FIELD_MANAGER, force=True, _content_type=APPLY
            ),
        )

    def _remove_policy(self, spec: TeamSpec) -> Observation:
        name = m.policy_name(spec)
        self._call(
            f"deleting policy binding {name}",
            lambda: self.admission.delete_validating_admission_policy_binding(name),
            missing_ok=True,
        )
        self._call(
            f"deleting policy {name}",
            lambda: self.admission.delete_validating_admission_policy(name),
            missing_ok=True,
        )
        return Observation(DONE, f"admission policy {name} deleted")

    # kubeconfig

    def _secret(self, spec: TeamSpec) -> Any:
        name = f"vc-{spec.vcluster_name}"
        return self._call(
            f"reading secret {name}",
            lambda: self.core.read_namespaced_secret(name, spec.namespace),
            missing_ok=True,
        )

    def _observe_kubeconfig(self, spec: TeamSpec) -> Observation:
        return self._deep(spec.team, "kubeconfig", lambda: self._check_kubeconfig(spec))

    def _check_kubeconfig(self, spec: TeamSpec) -> Observation:
        if self._secret(spec) is None:
            return Observation(PROGRESSING, f"waiting for secret vc-{spec.vcluster_name}")
        return Observation(DONE, f"kubeconfig secret vc-{spec.vcluster_name} exists")

    def kubeconfig(self, spec: TeamSpec, *, server: str | None = None) -> str:
        secret = self._secret(spec)
        if secret is None or not secret.data or "config" not in secret.data:
            raise BackendError(f"secret vc-{spec.vcluster_name} has no kubeconfig yet")
        raw = yaml.safe_load(base64.b64decode(secret.data["config"]))
        return yaml.safe_dump(
            rewrite_kubeconfig(raw, team=spec.team, server=server or self._server(spec)),
            sort_keys=False,
        )

    def _server(self, spec: TeamSpec) -> str:
        expose = self.settings.vcluster_expose
        if expose == "Ingress":
            return "https://" + self.settings.vcluster_ingress_host.replace("{team}", spec.team)
        service: Any = self._call(
            f"reading service {spec.vcluster_name}",
            lambda: self.core.read_namespaced_service(spec.vcluster_name, spec.namespace),
            missing_ok=True,
        )
        if service is None:
            raise BackendError(f"service {spec.vcluster_name} in {spec.namespace} does not exist")
        if expose == "NodePort":
            if not self.settings.vcluster_node_address:
                raise BackendError("set PORTAL_VCLUSTER_NODE_ADDRESS for NodePort exposure")
            port = next((p.node_port for p in service.spec.ports or [] if p.node_port), None)
            if port is None:
                raise BackendError(f"service {spec.vcluster_name} has no node port yet")
            return f"https://{self.settings.vcluster_node_address}:{port}"
        ingress = (service.status.load_balancer.ingress or []) if service.status else []
        if not ingress:
            raise BackendError(f"the load balancer of {spec.vcluster_name} has no address yet")
        address = ingress[0].ip or ingress[0].hostname
        return f"https://{address}"

    # usage

    def usage(self, queue_names: list[str]) -> dict[str, QueueUsage]:
        """One list call for every queue's status.allocated and status.requested."""
        listed: Any = self._call(
            "listing queues",
            lambda: self.custom.list_cluster_custom_object(
                m.QUEUE_GROUP, m.QUEUE_VERSION, m.QUEUE_PLURAL
            ),
        )
        wanted = set(queue_names)
        result: dict[str, QueueUsage] = {}
        for item in (listed or {}).get("items", []):
            name = item.get("metadata", {}).get("name")
            if name not in wanted:
                continue
            status = item.get("status") or {}
            result[name] = QueueUsage(
                allocated_gpu=_gpus(status.get("allocated")),
                requested_gpu=_gpus(status.get("requested")),
            )
        return result


def rewrite_kubeconfig(raw: dict[str, Any], *, team: str, server: str) -> dict[str, Any]:
    """Point the kubeconfig at the exposed address and name everything after the team."""
    cluster = (raw.get("clusters") or [{}])[0].get("cluster", {})
    user = (raw.get("users") or [{}])[0].get("user", {})
    return {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": team, "cluster": {**cluster, "server": server}}],
        "users": [{"name": f"{team}-admin", "user": user}],
        "contexts": [{"name": team, "context": {"cluster": team, "user": f"{team}-admin"}}],
        "current-context": team,
    }


def _gpus(resources: dict[str, Any] | None) -> float:
    if not resources or GPU not in resources:
        return 0.0
    value: Decimal = parse_quantity(resources[GPU])
    return float(value)


def _owned(obj: dict[str, Any]) -> bool:
    labels = obj.get("metadata", {}).get("labels") or {}
    return bool(labels.get(m.MANAGED_BY) == m.PORTAL)


def _foreign(kind: str, name: str) -> str:
    return (
        f"a {kind} named {name} already exists and is not managed by the portal; "
        "the portal never changes it: rename the team or remove that object"
    )


def _ready(pod: Any) -> bool:
    conditions = (pod.status.conditions or []) if pod.status else []
    return any(c.type == "Ready" and c.status == "True" for c in conditions)


def _api_message(exc: ApiException) -> str:
    try:
        body = yaml.safe_load(exc.body or "") or {}
        message = body.get("message") if isinstance(body, dict) else None
    except yaml.YAMLError:
        message = None
    return f"{exc.status} {exc.reason}: {message or 'no details'}"
