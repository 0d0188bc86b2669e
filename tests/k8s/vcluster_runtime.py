"""What a node and the cloud around a vCluster would do, which these machines cannot run.

Everything else is real: the portal installs the real vCluster chart (from ../shared) with
the real vcluster CLI or helm, the real StatefulSet controller creates the control
plane's pod and its volume claim, the real PersistentVolume controller binds the claim,
and the real syncer (tests/k8s/syncer.py) runs each vCluster: its own API server, its
sync of pods to the host, and its secret ``vc-<name>``. This helper plays only:

- the storage provisioner: a claim without a StorageClass, or with one that exists, gets
  a volume of its size (a claim that names a class that does not exist stays Pending, as
  on a real cluster);
- the cloud's load balancer: each vCluster gets an address of its own on the host
  (port 443 leads to its proxy), which a LoadBalancer Service reports as its ingress;
- the cluster's DNS, for the test process: ``<name>.<namespace>.svc`` resolves to that
  address, as the Service's name does inside a cluster;
- the kubelet: the control-plane pod, once its claims are bound (and ``ready_seconds``
  later), is run: its syncer is started with the pod's identity and its volume claim's
  folder as /data (the same folder for every pod of the claim, as a volume keeps the
  virtual cluster's state across a restart, an upgrade or a wake), and the pod is marked
  Ready when the syncer answers, as its readiness probe would. A deleted pod's syncer
  is stopped, and the pod stays (terminating) until it has: a kubelet confirms a
  deletion once its containers are gone, so a StatefulSet at 0 replicas has no syncer
  left that could sync again (the stand-in holds the pod with a finalizer, as the pod
  here is never bound to a node). A syncer that exits is started again (and its log kept
  in ``errors``).
"""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import urllib3
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from tests.k8s import syncer as syncers
from tests.k8s.control_plane import ControlPlane

NODE = "vcluster-host-node"  # the host Node the control-plane pods "run" on
CRASH_LOOP = 3  # exits of one pod's syncer that the tests report
# Held by the stand-in kubelet while the pod's syncer runs (see the module's text).
CONTAINERS = "tests.gpu-portal.example/containers-running"


class VClusterRuntime:
    def __init__(
        self,
        plane: ControlPlane,
        api: client.ApiClient,
        *,
        ready_seconds: float = 0.3,
        retire_ready: bool = False,
    ) -> None:
        """``retire_ready``: stop a syncer once its pod is Ready and its secret written
        (the pod stays Ready): for benchmarks of many teams that never use the vCluster."""
        self.plane = plane
        self.retire_ready = retire_ready
        self._retired: set[str] = set()
        self.api = api
        self.core = client.CoreV1Api(api)
        self.storage = client.StorageV1Api(api)
        self.ready_seconds = ready_seconds
        self.paused = threading.Event()  # set: pods stay as they are (a stuck rollout)
        self._stop = threading.Event()
        self._seen: dict[str, float] = {}
        self.addresses: dict[tuple[str, str], str] = {}  # (namespace, name): load balancer
        self.syncers: dict[str, syncers.Syncer] = {}  # by control-plane pod uid
        self._lock = threading.Lock()
        self._stopping: set[str] = set()  # pod uids whose syncer is being stopped
        self.exits: dict[str, list[str]] = {}  # by pod uid: each exit and its log
        # By pod uid: when its syncer was started and when its virtual API first answered
        # (monotonic): the syncer's own start, for the benchmark to set the portal's
        # time beside.
        self.starts: dict[str, tuple[float, float | None]] = {}
        self.errors: list[str] = []

    def address(self, namespace: str, name: str) -> str:
        """The vCluster's load-balancer address on the host (given on first sight)."""
        with self._lock:
            key = (namespace, name)
            if key not in self.addresses:
                self.addresses[key] = syncers.balancer_address()
            return self.addresses[key]

    def run(self) -> None:
        while not self._stop.wait(0.15):
            if self.paused.is_set():
                continue
            try:
                self.step()
            except ApiException as exc:
                # 403 "is being terminated": a namespace on its way out (decommission).
                terminating = exc.status == 403 and "being terminated" in str(exc.body)
                if exc.status not in (404, 409) and not terminating:
                    self.errors.append(f"{exc.status} {exc.reason}: {exc.body}")
            except urllib3.exceptions.HTTPError:
                continue  # the API server is down (an outage test): a kubelet waits too
            except Exception as exc:  # keep playing; the tests report what went wrong
                self.errors.append(repr(exc))

    def step(self) -> None:
        for service in self.core.list_service_for_all_namespaces(
            label_selector="app=vcluster,vcluster.loft.sh/service=true"
        ).items:
            self._balance(service)
        for claim in self.core.list_persistent_volume_claim_for_all_namespaces(
            label_selector="app=vcluster"
        ).items:
            self._provision(claim)
        running: set[str] = set()
        for pod in self.core.list_pod_for_all_namespaces(label_selector="app=vcluster").items:
            if pod.metadata.deletion_timestamp:
                self._terminate(pod)
                continue
            if "release" not in (pod.metadata.labels or {}):
                continue
            running.add(pod.metadata.uid)
            self._run_pod(pod)
        for uid in [u for u in list(self.syncers) if u not in running | self._stopping]:
            gone = self.syncers.pop(uid)  # the pod is gone (forced): so is its container
            threading.Thread(target=gone.stop, daemon=True).start()

    def _terminate(self, pod: Any) -> None:
        """A deleted pod: its syncer stopped (on a thread of its own, not holding up the
        other pods), then the deletion confirmed."""
        uid = pod.metadata.uid
        if uid in self._stopping:
            return
        self._stopping.add(uid)
        threading.Thread(
            target=self._stop_then_release, args=(pod, self.syncers.get(uid)), daemon=True
        ).start()

    def _stop_then_release(self, pod: Any, running: syncers.Syncer | None) -> None:
        try:
            if running is not None:
                running.stop()
            self.syncers.pop(pod.metadata.uid, None)
            if CONTAINERS in (pod.metadata.finalizers or []):
                self._release(pod)
        except Exception as exc:  # reported by the tests, as the loop's own failures
            self.errors.append(f"releasing {pod.metadata.name}: {exc!r}")
        finally:
            self._stopping.discard(pod.metadata.uid)

    def _release(self, pod: Any) -> None:
        namespace, name = pod.metadata.namespace, pod.metadata.name
        for _ in range(5):  # a conflict with another writer: read again
            try:
                current = self.core.read_namespaced_pod(name, namespace)
            except ApiException as exc:
                if exc.status == 404:
                    return
                raise
            if current.metadata.uid != pod.metadata.uid:
                return
            left = [f for f in current.metadata.finalizers or [] if f != CONTAINERS]
            body = {
                "metadata": {
                    "finalizers": left or None,
                    "resourceVersion": current.metadata.resource_version,
                }
            }
            try:
                self.core.patch_namespaced_pod(
                    name, namespace, body, _content_type="application/merge-patch+json"
                )
                return
            except ApiException as exc:
                if exc.status == 404:
                    return
                if exc.status != 409:
                    raise

    def _balance(self, service: Any) -> None:
        address = self.address(service.metadata.namespace, service.metadata.name)
        if service.spec.type != "LoadBalancer" or (
            service.status.load_balancer and service.status.load_balancer.ingress
        ):
            return
        self.core.patch_namespaced_service_status(
            service.metadata.name,
            service.metadata.namespace,
            {"status": {"loadBalancer": {"ingress": [{"ip": address}]}}},
        )

    def _provision(self, claim: Any) -> None:
        if claim.status.phase != "Pending" or claim.metadata.deletion_timestamp:
            return
        storage_class = claim.spec.storage_class_name
        if (
            storage_class
            and not self.storage.list_storage_class(
                field_selector=f"metadata.name={storage_class}"
            ).items
        ):
            return  # nobody serves that class: the claim stays Pending
        name = f"pv-{claim.metadata.namespace}-{claim.metadata.name}"
        try:
            self.core.create_persistent_volume(
                {
                    "metadata": {"name": name},
                    "spec": {
                        "capacity": {"storage": claim.spec.resources.requests["storage"]},
                        "accessModes": claim.spec.access_modes,
                        "persistentVolumeReclaimPolicy": "Delete",
                        "hostPath": {"path": f"/var/tmp/{name}"},
                        "storageClassName": storage_class or "",
                        # The whole reference, uid included, as a provisioner writes
                        # it: the volume controller then binds the claim at once (a
                        # reference without the uid waits for its periodic resync).
                        "claimRef": {
                            "apiVersion": "v1",
                            "kind": "PersistentVolumeClaim",
                            "namespace": claim.metadata.namespace,
                            "name": claim.metadata.name,
                            "uid": claim.metadata.uid,
                        },
                    },
                }
            )
        except ApiException as exc:
            if exc.status != 409:
                raise

    def _run_pod(self, pod: Any) -> None:
        for volume in pod.spec.volumes or []:
            if volume.persistent_volume_claim is None:
                continue
            claim = self.core.read_namespaced_persistent_volume_claim(
                volume.persistent_volume_claim.claim_name, pod.metadata.namespace
            )
            if claim.status.phase != "Bound":
                return  # not schedulable: stays Pending
        uid = pod.metadata.uid
        if uid in self._retired:
            return
        first = self._seen.setdefault(uid, time.monotonic())
        if time.monotonic() - first < self.ready_seconds:
            return
        namespace, name = pod.metadata.namespace, pod.metadata.labels["release"]
        running = self.syncers.get(uid)
        if running is not None and not running.alive():
            # A container that exits is started again, as a kubelet would; one that keeps
            # exiting is a failure the tests report. A syncer may exit while its namespace
            # is being deleted around it (its secrets and account go before its pod): that
            # pod goes too, and is not started again.
            if self._terminating(namespace):
                self.syncers.pop(uid).stop()
                self._retired.add(uid)
                return
            exits = self.exits.setdefault(uid, [])
            exits.append(f"exited ({running.process.returncode}):\n{running.log_tail()}")
            if len(exits) == CRASH_LOOP:
                self.errors.append(f"the syncer of {namespace}/{name} " + "\n".join(exits))
            self.syncers.pop(uid).stop()
            running = None
        if running is None:
            if CONTAINERS not in (pod.metadata.finalizers or []):
                # Held until its container is gone (a kubelet's graceful deletion).
                held = [*(pod.metadata.finalizers or []), CONTAINERS]
                try:
                    self.core.patch_namespaced_pod(
                        pod.metadata.name,
                        namespace,
                        {"metadata": {"finalizers": held}},
                        _content_type="application/merge-patch+json",
                    )
                except ApiException as exc:
                    if exc.status == 422:
                        return  # deleted meanwhile: no container to start
                    raise
            self._ensure_node()
            began = time.monotonic()
            started = syncers.start(
                self.plane, self.api, pod, node=NODE, address=self.address(namespace, name)
            )
            self.syncers[uid] = started
            self.starts.setdefault(uid, (began, None))
            # Timed on its own thread: a probe in this loop would hold up every other pod.
            threading.Thread(
                target=self._time_start, args=(uid, started), name="syncer-start", daemon=True
            ).start()
            return
        if _ready(pod) and self.retire_ready and self._secret_written(namespace, name):
            self._retired.add(uid)
            threading.Thread(target=self.syncers.pop(uid).stop, daemon=True).start()
            return
        if _ready(pod) or not running.serving():
            return
        now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        self.core.patch_namespaced_pod_status(
            pod.metadata.name,
            namespace,
            {
                "status": {
                    "phase": "Running",
                    "podIP": "127.0.0.1",
                    "hostIP": "127.0.0.1",
                    "conditions": [
                        {"type": "PodScheduled", "status": "True", "lastTransitionTime": now},
                        {"type": "Ready", "status": "True", "lastTransitionTime": now},
                    ],
                }
            },
        )

    def _terminating(self, namespace: str) -> bool:
        try:
            found = self.core.read_namespace(namespace)
        except ApiException as exc:
            return exc.status == 404
        return found.metadata.deletion_timestamp is not None

    def _time_start(self, uid: str, started: syncers.Syncer) -> None:
        """When the syncer's virtual API first answers (its own start, for the benchmark)."""
        deadline = time.monotonic() + 300
        while started.alive() and time.monotonic() < deadline:
            if started.answers():
                began, _served = self.starts.get(uid, (time.monotonic(), None))
                self.starts[uid] = (began, time.monotonic())
                return
            time.sleep(0.2)

    def _secret_written(self, namespace: str, name: str) -> bool:
        found = self.core.list_namespaced_secret(
            namespace, field_selector=f"metadata.name=vc-{name}"
        )
        return bool(found.items)

    def _ensure_node(self) -> None:
        """The host Node a control-plane pod runs on (the syncer reads it)."""
        try:
            self.core.create_node(
                {
                    "metadata": {"name": NODE, "labels": {"kubernetes.io/os": "linux"}},
                    "status": {
                        "capacity": {"cpu": "8", "memory": "32Gi", "pods": "110"},
                        "allocatable": {"cpu": "8", "memory": "32Gi", "pods": "110"},
                    },
                }
            )
        except ApiException as exc:
            if exc.status != 409:
                raise

    def resolve(self, host: str) -> str | None:
        """``<name>.<namespace>.svc`` of a vCluster's Service: its address."""
        parts = host.split(".")
        if len(parts) == 3 and parts[2] == "svc":
            with self._lock:
                return self.addresses.get((parts[1], parts[0]))
        return None

    def stop(self) -> None:
        self._stop.set()

    def close(self) -> None:
        for running in list(self.syncers.values()):
            running.stop()
        self.syncers.clear()


def _ready(pod: Any) -> bool:
    conditions = (pod.status.conditions or []) if pod.status else []
    return any(c.type == "Ready" and c.status == "True" for c in conditions)


@contextmanager
def cluster_dns(runtime: VClusterRuntime) -> Iterator[None]:
    """Service names of vClusters resolve for this process as they would in a cluster."""
    real = socket.getaddrinfo

    def getaddrinfo(host: Any, *args: Any, **kwargs: Any) -> Any:
        found = runtime.resolve(host) if isinstance(host, str) else None
        return real(found or host, *args, **kwargs)

    socket.getaddrinfo = getaddrinfo
    try:
        yield
    finally:
        socket.getaddrinfo = real


@contextmanager
def vcluster_runtime(
    plane: ControlPlane,
    api: client.ApiClient,
    *,
    ready_seconds: float = 0.3,
    retire_ready: bool = False,
) -> Iterator[VClusterRuntime]:
    runtime = VClusterRuntime(plane, api, ready_seconds=ready_seconds, retire_ready=retire_ready)
    thread = threading.Thread(target=runtime.run, name="vcluster-runtime", daemon=True)
    thread.start()
    try:
        with cluster_dns(runtime):
            yield runtime
    finally:
        runtime.stop()
        thread.join(5)
        runtime.close()
