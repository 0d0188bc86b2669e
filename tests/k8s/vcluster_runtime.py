"""What a node and a running vCluster would do, which these machines cannot run.

Everything else is real: the portal installs the real vCluster chart (from ../shared) with
the real vcluster CLI or helm, the real StatefulSet controller creates the control
plane's pod and its volume claim, and the real PersistentVolume controller binds the
claim. This helper plays only:

- the storage provisioner: a claim without a StorageClass, or with one that exists, gets
  a volume of its size (a claim that names a class that does not exist stays Pending, as
  on a real cluster);
- the cloud's load balancer: a LoadBalancer Service of a vCluster gets an address;
- the kubelet: a control-plane pod whose claims are bound is marked Running and Ready
  through the status subresource (after ``ready_seconds``);
- the vCluster itself: once its pod is Ready, it writes secret ``vc-<name>`` with an
  admin kubeconfig (client certificate and key, as the syncer does) for the vCluster's
  API server. That API server is a second real kube-apiserver (``inner``, started by the
  harness with its own etcd and the clusterrole-aggregation controller), written into
  the secret as its server the way ``exportKubeConfig.server`` would; every team's
  vCluster is played by that one server.
"""

from __future__ import annotations

import base64
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import urllib3
import yaml
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from tests.k8s.control_plane import ControlPlane

LOAD_BALANCER_IP = "192.0.2.10"


class VClusterRuntime:
    def __init__(
        self,
        api: client.ApiClient,
        *,
        ready_seconds: float = 0.3,
        inner: ControlPlane | None = None,
    ) -> None:
        self.inner = inner
        self.core = client.CoreV1Api(api)
        self.storage = client.StorageV1Api(api)
        self.ready_seconds = ready_seconds
        self.paused = threading.Event()  # set: pods stay as they are (a stuck rollout)
        self._stop = threading.Event()
        self._seen: dict[str, float] = {}
        self._written: set[str] = set()
        self.errors: list[str] = []

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
            label_selector="app=vcluster"
        ).items:
            self._balance(service)
        for claim in self.core.list_persistent_volume_claim_for_all_namespaces(
            label_selector="app=vcluster"
        ).items:
            self._provision(claim)
        for pod in self.core.list_pod_for_all_namespaces(label_selector="app=vcluster").items:
            if pod.metadata.deletion_timestamp:
                continue
            if not _ready(pod):
                self._start(pod)
            else:
                self._write_kubeconfig(pod)

    def _balance(self, service: Any) -> None:
        if service.spec.type != "LoadBalancer" or (
            service.status.load_balancer and service.status.load_balancer.ingress
        ):
            return
        self.core.patch_namespaced_service_status(
            service.metadata.name,
            service.metadata.namespace,
            {"status": {"loadBalancer": {"ingress": [{"ip": LOAD_BALANCER_IP}]}}},
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
                        "claimRef": {
                            "namespace": claim.metadata.namespace,
                            "name": claim.metadata.name,
                        },
                    },
                }
            )
        except ApiException as exc:
            if exc.status != 409:
                raise

    def _start(self, pod: Any) -> None:
        for volume in pod.spec.volumes or []:
            if volume.persistent_volume_claim is None:
                continue
            claim = self.core.read_namespaced_persistent_volume_claim(
                volume.persistent_volume_claim.claim_name, pod.metadata.namespace
            )
            if claim.status.phase != "Bound":
                return  # not schedulable: stays Pending
        key = f"{pod.metadata.namespace}/{pod.metadata.name}/{pod.metadata.uid}"
        first = self._seen.setdefault(key, time.monotonic())
        if time.monotonic() - first < self.ready_seconds:
            return
        now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        self.core.patch_namespaced_pod_status(
            pod.metadata.name,
            pod.metadata.namespace,
            {
                "status": {
                    "phase": "Running",
                    "podIP": "10.244.0.10",
                    "conditions": [
                        {"type": "PodScheduled", "status": "True", "lastTransitionTime": now},
                        {"type": "Ready", "status": "True", "lastTransitionTime": now},
                    ],
                }
            },
        )

    def _write_kubeconfig(self, pod: Any) -> None:
        namespace = pod.metadata.namespace
        name = (pod.metadata.labels or {}).get("release")
        if not name or pod.metadata.uid in self._written:
            return
        if self.inner is not None:
            assert self.inner.admin_cert is not None
            assert self.inner.admin_key is not None
            server = self.inner.url
            ca = self.inner.serving_cert.read_text()
            cert = self.inner.admin_cert.read_text()
            key = self.inner.admin_key.read_text()
        else:
            server, ca, cert, key = "https://localhost:8443", "vcluster-ca", "vcluster-cert", "k"
        kubeconfig = {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [
                {
                    "name": "my-vcluster",
                    "cluster": {
                        "server": server,
                        "certificate-authority-data": _b64(ca),
                    },
                }
            ],
            "users": [
                {
                    "name": "my-vcluster",
                    "user": {
                        "client-certificate-data": _b64(cert),
                        "client-key-data": _b64(key),
                    },
                }
            ],
            "contexts": [
                {
                    "name": "my-vcluster",
                    "context": {"cluster": "my-vcluster", "user": "my-vcluster"},
                }
            ],
            "current-context": "my-vcluster",
        }
        data = {
            "config": yaml.safe_dump(kubeconfig),
            "certificate-authority": ca,
            "client-certificate": cert,
            "client-key": key,
        }
        try:
            self.core.create_namespaced_secret(
                namespace,
                {
                    "metadata": {
                        "name": f"vc-{name}",
                        "labels": {"app": "vcluster", "vcluster-name": name},
                    },
                    "data": {k: base64.b64encode(v.encode()).decode() for k, v in data.items()},
                },
            )
        except ApiException as exc:
            if exc.status != 409:
                raise
        self._written.add(pod.metadata.uid)

    def stop(self) -> None:
        self._stop.set()


def _b64(text: str) -> str:
    return base64.b64encode(text.encode()).decode()


def _ready(pod: Any) -> bool:
    conditions = (pod.status.conditions or []) if pod.status else []
    return any(c.type == "Ready" and c.status == "True" for c in conditions)


@contextmanager
def vcluster_runtime(
    api: client.ApiClient, *, ready_seconds: float = 0.3, inner: ControlPlane | None = None
) -> Iterator[VClusterRuntime]:
    runtime = VClusterRuntime(api, ready_seconds=ready_seconds, inner=inner)
    thread = threading.Thread(target=runtime.run, name="vcluster-runtime", daemon=True)
    thread.start()
    try:
        yield runtime
    finally:
        runtime.stop()
        thread.join(5)
