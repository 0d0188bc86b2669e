"""KAI Scheduler v0.17.0 as a real install runs it, against the tests' host API server.

Its scheduler, binder, pod-grouper, pod-group controller, queue controller and admission
webhook are built from the release's source (scripts/build-tools.sh) and run as local
processes with the arguments KAI's operator gives their Deployments for the chart's
defaults (``global.gpuSharing=true``), and the scheduler with the configuration the
operator writes for the default SchedulingShard. The admission webhook is what makes a
``gpu-fraction`` pod bindable (the binder's GPU-sharing step needs what it adds); the
pod-group controller is what fills the PodGroups' status, from which the queue
controller writes each Queue's. The webhooks that only validate edits of Queues and
PodGroups are off. The chart itself (``helm template`` of the release's
deployments/kai-scheduler) gives the namespaces, the priority classes and the queues it
creates (``default-parent-queue`` → ``default-queue``); the release's own CRDs are
installed first. The components use the API server's admin credential: their RBAC is
not what these tests are about.

Nothing here runs a kubelet or a GPU, so ``GpuNodes`` plays only what a node would:
fake GPU nodes (allocatable ``nvidia.com/gpu``, the GPU taint and label, Ready), a bound
pod marked Running, a deleted pod's deletion confirmed, and the GPU a fraction's
reservation pod would find through NVML (the annotation ``run.ai/reserve_for_gpu_index``).
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import subprocess
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

import httpx
import urllib3
import yaml
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from tests.k8s import netns
from tests.k8s.control_plane import ControlPlane
from tests.servers import cache_dir, free_port, tool

VERSION = "v0.17.0"
NAMESPACE = "kai-scheduler"
RESERVATION = "kai-resource-reservation"
SCHEDULER = "kai-scheduler"
QUEUE_LABEL = "kai.scheduler/queue"
GPU = "nvidia.com/gpu"
GPU_INDEX = "run.ai/reserve_for_gpu_index"

# What KAI's operator writes into the scheduler's ConfigMap for the default
# SchedulingShard (placement binpack): every default plugin by its priority, the default
# actions (pkg/apis/kai/v1/schedulingshard_types.go, pkg/operator/operands/scheduler).
SCHEDULER_CONFIG = {
    "actions": "allocate, consolidation, reclaim, preempt, stalegangeviction",
    "tiers": [
        {
            "plugins": [
                {"name": name}
                for name in (
                    "predicates",
                    "proportion",
                    "priority",
                    "nodeavailability",
                    "resourcetype",
                    "podaffinity",
                    "elastic",
                    "kubeflow",
                    "ray",
                    "subgrouporder",
                    "taskorder",
                    "nominatednode",
                    "dynamicresources",
                    "minruntime",
                    "topology",
                    "snapshot",
                    "sg-nodelocalgreedy",
                    "sg-multinodegang",
                    "gpupack",
                )
            ]
            + [
                {"name": "nodeplacement", "arguments": {"gpu": "binpack", "cpu": "binpack"}},
                {"name": "gpusharingorder"},
            ]
        }
    ],
}


def source() -> Path:
    found = cache_dir() / "src" / f"kai-scheduler-{VERSION}"
    if not found.exists():
        tool("kai-scheduler")  # builds (and unpacks) everything once
    return found


def crds() -> list[dict[str, Any]]:
    folder = source() / "deployments/kai-scheduler/crds"
    return [yaml.safe_load(p.read_text()) for p in sorted(folder.glob("*.yaml"))]


def chart_objects() -> list[dict[str, Any]]:
    """The namespaces, priority classes and queues the release's chart installs."""
    rendered = subprocess.run(
        [
            str(tool("helm")),
            "template",
            "kai-scheduler",
            str(source() / "deployments/kai-scheduler"),
            "--namespace",
            NAMESPACE,
            "--set",
            "global.gpuSharing=true",
            "--set",
            "kaiConfig.render=true",
            "--set",
            "kaiConfigDeployer.enabled=false",
        ],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    ).stdout
    kinds = ("Namespace", "PriorityClass", "Queue")
    return [d for d in yaml.safe_load_all(rendered) if d and d.get("kind") in kinds]


def install(api: client.ApiClient) -> None:
    """KAI's CRDs (v0.17.0, replacing any older ones) and what its chart creates."""
    extensions = client.ApiextensionsV1Api(api)
    for crd in crds():
        name = crd["metadata"]["name"]
        try:
            current = extensions.read_custom_resource_definition(name)
            crd["metadata"]["resourceVersion"] = current.metadata.resource_version
            extensions.replace_custom_resource_definition(name, crd)
        except ApiException as exc:
            if exc.status != 404:
                raise
            extensions.create_custom_resource_definition(crd)
    custom = client.CustomObjectsApi(api)
    deadline = time.monotonic() + 30
    while True:
        try:
            custom.list_cluster_custom_object("scheduling.run.ai", "v2alpha2", "podgroups")
            break
        except ApiException:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.2)
    core = client.CoreV1Api(api)
    for doc in chart_objects():
        with contextlib.suppress(ApiException):
            if doc["kind"] == "Namespace":
                core.create_namespace(doc)
            elif doc["kind"] == "PriorityClass":
                client.SchedulingV1Api(api).create_priority_class(doc)
            else:
                custom.create_cluster_custom_object("scheduling.run.ai", "v2", "queues", doc)
    with contextlib.suppress(ApiException):
        core.create_namespace({"metadata": {"name": RESERVATION}})


@dataclass
class Kai:
    folder: Path
    processes: dict[str, subprocess.Popen[bytes]] = field(default_factory=dict)
    scheduler_metrics: str = ""  # host:port of the scheduler's /metrics
    queue_metrics: str = ""  # host:port of the queue controller's /metrics
    launched: dict[str, tuple[list[str], dict[str, str]]] = field(default_factory=dict)
    forwarders: list[netns.Forwarder] = field(default_factory=list)

    def restart_scheduler(self, **config: Any) -> None:
        """The scheduler again, its configuration with ``config`` added (what the operator
        renders from a SchedulingShard, e.g. ``usageDBConfig``), on the same addresses."""
        process = self.processes["scheduler"]
        process.terminate()
        try:
            process.wait(10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(10)
        (self.folder / "scheduler-config.yaml").write_text(
            yaml.safe_dump({**SCHEDULER_CONFIG, **config}, sort_keys=False)
        )
        argv, env = self.launched["scheduler"]
        log = (self.folder / "scheduler.log").open("ab")
        self.processes["scheduler"] = subprocess.Popen(
            argv, stdout=log, stderr=subprocess.STDOUT, env=env
        )
        _wait_for_metrics(self)

    def add_shard(self, value: str) -> str:
        """Another SchedulingShard's scheduler: the same build and configuration, as the
        operator runs one per shard, with the shard's ``--partition-label-value``: it sees
        only the nodes, Queues and PodGroups labelled ``kai.scheduler/node-pool=<value>``.
        Returns the address of its /metrics."""
        argv, env = self.launched["scheduler"]
        address = f"127.0.0.1:{free_port()}"
        replaced = {
            "--partition-label-value": value,
            "--listen-address": address,
            "--plugin-server-port": str(free_port()),
        }
        shard_argv = [
            f"{arg.split('=', 1)[0]}={replaced[arg.split('=', 1)[0]]}"
            if arg.split("=", 1)[0] in replaced
            else arg
            for arg in argv
        ]
        name = f"scheduler-{value}"
        log = (self.folder / f"{name}.log").open("wb")
        self.launched[name] = (shard_argv, env)
        self.processes[name] = subprocess.Popen(
            shard_argv, stdout=log, stderr=subprocess.STDOUT, env=env
        )
        deadline = time.monotonic() + 60
        while True:
            self.check()
            try:
                if httpx.get(f"http://{address}/metrics", timeout=2).status_code == 200:
                    return address
            except httpx.HTTPError:
                pass
            if time.monotonic() > deadline:
                raise AssertionError(f"the {value} shard's scheduler never served its metrics")
            time.sleep(0.3)

    def log(self, component: str, lines: int = 60) -> str:
        path = self.folder / f"{component}.log"
        text = path.read_text(errors="replace") if path.exists() else ""
        return "\n".join(text.splitlines()[-lines:])

    def check(self) -> None:
        for name, process in self.processes.items():
            if process.poll() is not None:
                raise AssertionError(f"KAI's {name} exited:\n{self.log(name)}")


def _arguments(folder: Path, webhook_port: int) -> dict[str, list[str]]:
    """Each component's arguments as the operator sets them, addresses on loopback."""
    conf = folder / "scheduler-config.yaml"
    conf.write_text(yaml.safe_dump(SCHEDULER_CONFIG, sort_keys=False))
    common: list[str] = []  # the API server comes from KUBECONFIG
    return {
        "queuecontroller": [
            *common,
            f"--metrics-listen-address=127.0.0.1:{free_port()}",
            "--enable-webhook=false",  # its webhook only validates Queue edits
        ],
        "podgrouper": [
            *common,
            f"--scheduler-name={SCHEDULER}",
            f"--queue-label-key={QUEUE_LABEL}",
            "--nodepool-label-key=kai.scheduler/node-pool",
            f"--metrics-bind-address=127.0.0.1:{free_port()}",
            f"--health-probe-bind-address=127.0.0.1:{free_port()}",
        ],
        "podgroupcontroller": [
            *common,
            f"--scheduler-name={SCHEDULER}",
            # v0.17.0 parses this flag but never hands it to its manager: it serves its
            # metrics on :8080 whatever is given, so it runs in a network namespace of
            # its own (see ``_own_network``), as in its pod.
            f"--metrics-bind-address=127.0.0.1:{free_port()}",
            f"--health-probe-bind-address=127.0.0.1:{free_port()}",
            "--enable-podgroup-webhook=false",  # it only validates PodGroup edits
        ],
        "binder": [
            *common,
            f"--scheduler-name={SCHEDULER}",
            f"--resource-reservation-namespace={RESERVATION}",
            f"--resource-reservation-service-account={RESERVATION}",
            f"--resource-reservation-app-label={RESERVATION}",
            "--resource-reservation-pod-image=registry/local/kai-scheduler/resourcereservation",
            "--scale-adjust-namespace=kai-scale-adjust",
            f"--health-probe-bind-address=127.0.0.1:{free_port()}",
            f"--metrics-bind-address=127.0.0.1:{free_port()}",
            "--fake-gpu-nodes",
        ],
        "admission": [
            *common,
            f"--scheduler-name={SCHEDULER}",
            f"--webhook-addr={webhook_port}",
            f"--health-probe-bind-address=127.0.0.1:{free_port()}",
            f"--metrics-bind-address=127.0.0.1:{free_port()}",
            "--gpu-sharing-enabled=true",
            "--fake-gpu-nodes",
        ],
        "scheduler": [
            *common,
            f"--scheduler-conf={conf}",
            f"--scheduler-name={SCHEDULER}",
            f"--namespace={NAMESPACE}",
            "--nodepool-label-key=kai.scheduler/node-pool",
            "--partition-label-value=",
            f"--resource-reservation-app-label={RESERVATION}",
            f"--queue-label-key={QUEUE_LABEL}",
            f"--listen-address=127.0.0.1:{free_port()}",
            f"--plugin-server-port={free_port()}",
            "--schedule-period=1s",
        ],
    }


# Components that listen on a fixed port whatever they are told: each in a network
# namespace of its own with loopback, the API server's port led to the host's.
OWN_NETWORK = frozenset({"podgroupcontroller"})


def _own_network(go: Path, argv: list[str]) -> list[str]:
    """``argv`` in a new network namespace (unshare kills it when it is stopped), started
    once ``go`` exists: once the forwarder to the API server is in place."""
    script = f'ip link set lo up && while [ ! -e {go} ]; do sleep 0.05; done && exec "$0" "$@"'
    return ["unshare", "--net", "--fork", "--kill-child", "sh", "-c", script, *argv]


def _flag(args: list[str], name: str) -> str:
    found = next(a for a in args if a.startswith(f"--{name}="))
    return found.split("=", 1)[1]


@contextlib.contextmanager
def kai_scheduler(plane: ControlPlane) -> Iterator[Kai]:
    """KAI's four components running against ``plane`` (installed there first)."""
    from kubernetes import config

    install(config.new_client_from_config(str(plane.kubeconfig)))
    folder = plane.folder / "kai"
    folder.mkdir(exist_ok=True)
    kai = Kai(folder)
    webhook_port = free_port()
    arguments = _arguments(folder, webhook_port)
    ca = _webhook_certificate(folder)
    kai.scheduler_metrics = _flag(arguments["scheduler"], "listen-address")
    kai.queue_metrics = _flag(arguments["queuecontroller"], "metrics-listen-address")
    try:
        for component, args in arguments.items():
            log = (folder / f"{component}.log").open("wb")
            argv = [str(tool(f"kai-{component}")), *args]
            if component in OWN_NETWORK:
                argv = _own_network(folder / f"{component}.go", argv)
            # TMPDIR: where the admission webhook finds its serving certificate.
            env = {
                **os.environ,
                "KUBECONFIG": str(plane.kubeconfig),
                "GOMAXPROCS": "2",
                "TMPDIR": str(folder),
            }
            kai.launched[component] = (argv, env)
            kai.processes[component] = subprocess.Popen(
                argv, stdout=log, stderr=subprocess.STDOUT, env=env
            )
            if component in OWN_NETWORK:
                port = urlparse(plane.url).port
                assert port is not None
                ns = netns.namespace_of(kai.processes[component])
                kai.forwarders.append(netns.into_host(ns, port))
                (folder / f"{component}.go").touch()
        _wait_for_metrics(kai)
        _wait_for_port(kai, webhook_port)
        _register_webhooks(config.new_client_from_config(str(plane.kubeconfig)), webhook_port, ca)
        yield kai
    finally:
        for forwarder in kai.forwarders:
            forwarder.close()
        for process in kai.processes.values():
            process.terminate()
        for process in kai.processes.values():
            try:
                process.wait(10)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(10)


def _webhook_certificate(folder: Path) -> bytes:
    """The admission webhook's serving certificate (self-signed, for 127.0.0.1), where
    controller-runtime looks for it; returns it as the CA the API server trusts."""
    certs = folder / "k8s-webhook-server" / "serving-certs"
    certs.mkdir(parents=True, exist_ok=True)
    subprocess.run(
        [
            "openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2",
            "-keyout", str(certs / "tls.key"), "-out", str(certs / "tls.crt"),
            "-subj", "/CN=kai-admission", "-addext", "subjectAltName=IP:127.0.0.1",
        ],
        check=True,
        capture_output=True,
    )  # fmt: skip
    return (certs / "tls.crt").read_bytes()


def _register_webhooks(api: client.ApiClient, port: int, ca: bytes) -> None:
    """KAI's pod webhooks as its operator registers them, at a local URL."""
    import base64

    def hook(path: str, operations: list[str]) -> dict[str, Any]:
        return {
            "name": "pod-mutator.kai.scheduler"
            if "mutate" in path
            else "pod-validator.kai.scheduler",
            "admissionReviewVersions": ["v1"],
            "sideEffects": "None",
            "failurePolicy": "Fail",
            "namespaceSelector": {
                "matchExpressions": [
                    {
                        "key": "kubernetes.io/metadata.name",
                        "operator": "NotIn",
                        "values": ["kube-system", NAMESPACE],
                    }
                ]
            },
            "matchConditions": [
                {
                    "name": "scheduler-name-match",
                    "expression": f"object.spec.schedulerName == '{SCHEDULER}'",
                }
            ],
            "clientConfig": {
                "url": f"https://127.0.0.1:{port}{path}",
                "caBundle": base64.b64encode(ca).decode(),
            },
            "rules": [
                {
                    "operations": operations,
                    "apiGroups": [""],
                    "apiVersions": ["v1"],
                    "resources": ["pods"],
                    "scope": "Namespaced",
                }
            ],
        }

    admission = client.AdmissionregistrationV1Api(api)
    mutating = hook("/mutate--v1-pod", ["CREATE"])
    mutating["reinvocationPolicy"] = "IfNeeded"
    with contextlib.suppress(ApiException):
        admission.create_mutating_webhook_configuration(
            {"metadata": {"name": "kai-admission"}, "webhooks": [mutating]}
        )
    with contextlib.suppress(ApiException):
        admission.create_validating_webhook_configuration(
            {
                "metadata": {"name": "kai-admission"},
                "webhooks": [hook("/validate--v1-pod", ["CREATE", "UPDATE"])],
            }
        )
    # What the GPU operator installs: the runtime class KAI's admission gives fractions.
    with contextlib.suppress(ApiException):
        client.NodeV1Api(api).create_runtime_class(
            {"metadata": {"name": "nvidia"}, "handler": "nvidia"}
        )


def _wait_for_port(kai: Kai, port: int, timeout: float = 60) -> None:
    import socket

    deadline = time.monotonic() + timeout
    while True:
        kai.check()
        with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), 1):
            return
        if time.monotonic() > deadline:
            raise AssertionError(f"KAI's admission webhook on {port} did not answer")
        time.sleep(0.3)


def _wait_for_metrics(kai: Kai, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    for address in (kai.scheduler_metrics, kai.queue_metrics):
        while True:
            kai.check()
            try:
                if httpx.get(f"http://{address}/metrics", timeout=2).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            if time.monotonic() > deadline:
                raise AssertionError(f"KAI's metrics at {address} did not answer")
            time.sleep(0.3)


def gpu_node(name: str, gpus: int, labels: dict[str, str] | None = None) -> dict[str, Any]:
    """A GPU node as the NVIDIA operator leaves it: its GPUs allocatable, its label, the
    taint that keeps other pods off (and ``labels``: a node pool's, the GPU type). With no
    GPUs: a plain CPU node."""
    resources = {"cpu": "32", "memory": "256Gi", "pods": "110"}
    labels = {"kubernetes.io/os": "linux", "kubernetes.io/hostname": name, **(labels or {})}
    spec: dict[str, Any] = {}
    if gpus:
        resources[GPU] = str(gpus)
        labels.update({"nvidia.com/gpu.present": "true", "nvidia.com/gpu.count": str(gpus)})
        spec["taints"] = [{"key": GPU, "value": "present", "effect": "NoSchedule"}]
    return {
        "metadata": {"name": name, "labels": labels},
        "spec": spec,
        "status": {"capacity": resources, "allocatable": resources},
    }


class GpuNodes:
    """Plays the nodes' kubelets and GPUs (see the module's docstring)."""

    def __init__(self, api: client.ApiClient) -> None:
        self.core = client.CoreV1Api(api)
        self.names: list[str] = []
        self._stop = threading.Event()
        self._gpus: dict[str, int] = {}
        self._reserved: dict[str, list[str]] = {}  # node: reservation pods, by GPU index
        self.errors: list[str] = []

    def add(self, name: str, gpus: int, labels: dict[str, str] | None = None) -> None:
        node = gpu_node(name, gpus, labels)
        try:
            self.core.create_node(node)
        except ApiException as exc:
            if exc.status != 409:
                raise
        self._ready(name)
        # The API server's TaintNodesByCondition taints a new node not-ready until the
        # node lifecycle controller sees its kubelet report Ready: played here.
        current = self.core.read_node(name)
        current.spec.taints = [
            t for t in current.spec.taints or [] if not t.key.startswith("node.kubernetes.io/")
        ]
        self.core.replace_node(name, current)
        self.names.append(name)
        self._gpus[name] = gpus

    def remove_all(self) -> None:
        for name in self.names:
            with contextlib.suppress(ApiException):
                self.core.delete_node(name)
        self.names.clear()

    def _ready(self, name: str) -> None:
        now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        self.core.patch_node_status(
            name,
            {
                "status": {
                    "conditions": [
                        {
                            "type": "Ready",
                            "status": "True",
                            "reason": "KubeletReady",
                            "lastHeartbeatTime": now,
                            "lastTransitionTime": now,
                        }
                    ],
                    "addresses": [{"type": "InternalIP", "address": "127.0.0.1"}],
                }
            },
        )

    def run(self) -> None:
        while not self._stop.wait(0.2):
            try:
                self.step()
            except ApiException as exc:
                if exc.status not in (404, 409):
                    self.errors.append(f"{exc.status} {exc.reason}: {exc.body}")
            except urllib3.exceptions.HTTPError:
                continue
            except Exception as exc:  # keep playing; the tests report it
                self.errors.append(repr(exc))

    def step(self) -> None:
        for pod in self.core.list_pod_for_all_namespaces(field_selector="spec.nodeName!=").items:
            if pod.spec.node_name not in self._gpus:
                continue
            if pod.metadata.deletion_timestamp:
                # The kubelet stops the containers and confirms the deletion.
                self.core.delete_namespaced_pod(
                    pod.metadata.name, pod.metadata.namespace, grace_period_seconds=0
                )
                continue
            if pod.metadata.namespace == RESERVATION and not (pod.metadata.annotations or {}).get(
                GPU_INDEX
            ):
                # What the reservation pod reads from NVML: the GPU it was given (the
                # next one of its node no other reservation pod holds).
                node = pod.spec.node_name
                live = {p.metadata.name for p in self.core.list_namespaced_pod(RESERVATION).items}
                held: list[str] = [
                    n if n in live else "" for n in self._reserved.setdefault(node, [])
                ]
                index = held.index("") if "" in held else len(held)
                held[index : index + 1] = [str(pod.metadata.name)]
                self._reserved[node] = held
                self.core.patch_namespaced_pod(
                    pod.metadata.name,
                    RESERVATION,
                    {"metadata": {"annotations": {GPU_INDEX: _gpu_uuid(node, index)}}},
                )
            if pod.status.phase == "Pending":
                self._running(pod)

    def _running(self, pod: Any) -> None:
        now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        self.core.patch_namespaced_pod_status(
            pod.metadata.name,
            pod.metadata.namespace,
            {
                "status": {
                    "phase": "Running",
                    "hostIP": "127.0.0.1",
                    "podIP": "10.244.1.10",
                    "startTime": now,
                    "conditions": [
                        {"type": "PodScheduled", "status": "True", "lastTransitionTime": now},
                        {"type": "Initialized", "status": "True", "lastTransitionTime": now},
                        {"type": "ContainersReady", "status": "True", "lastTransitionTime": now},
                        {"type": "Ready", "status": "True", "lastTransitionTime": now},
                    ],
                    "containerStatuses": [
                        {
                            "name": c.name,
                            "image": c.image,
                            "imageID": "",
                            "ready": True,
                            "restartCount": 0,
                            "started": True,
                            "state": {"running": {"startedAt": now}},
                        }
                        for c in pod.spec.containers
                    ],
                }
            },
        )

    def stop(self) -> None:
        self._stop.set()


def _gpu_uuid(node: str, index: int) -> str:
    digest = hashlib.sha256(f"{node}/{index}".encode()).hexdigest()
    return f"GPU-{digest[:8]}-{digest[8:12]}-{digest[12:16]}-{digest[16:20]}-{digest[20:32]}"


@contextlib.contextmanager
def gpu_nodes(api: client.ApiClient) -> Iterator[GpuNodes]:
    nodes = GpuNodes(api)
    thread = threading.Thread(target=nodes.run, name="gpu-nodes", daemon=True)
    thread.start()
    try:
        yield nodes
    finally:
        nodes.stop()
        thread.join(5)
        nodes.remove_all()
