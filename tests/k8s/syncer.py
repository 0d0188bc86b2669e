"""One vCluster's control plane, run as its pod would run it: the real syncer.

The syncer (vCluster 0.36.1's own ``cmd/vcluster``, built into the tool cache) starts the
virtual cluster's kine, kube-apiserver and kube-controller-manager from its binaries
folder, syncs its pods to the host and writes secret ``vc-<name>`` once its API is up.
It runs with exactly what the chart gives its pod: the chart's rendered config (secret
``vc-config-<name>``), a token of the chart's ServiceAccount ``vc-<name>`` (so the chart's
RBAC is what it holds on the host), and the pod's environment. Each one has its own
mount namespace (its /data and /binaries) and network namespace (its fixed ports), joined
to the host by tests/k8s/netns.py.
"""

from __future__ import annotations

import base64
import contextlib
import os
import random
import shutil
import signal
import socket
import subprocess
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

from kubernetes import client

from tests.k8s import netns
from tests.k8s.control_plane import ControlPlane, binary
from tests.servers import tool

# Where the cached syncer build looks for its data and binaries (scripts/build-tools.sh).
ROOT = Path("/var/tmp/gpu-portal-vcluster")
PROXY_PORT = 8443
LB_PORT = 443
# Services on the host's loopback that the pod network reaches too (a test's chart
# registry): the same port inside each syncer's namespace leads to the host's.
HOST_PORTS: set[int] = set()


def balancer_address() -> str:
    """A loopback address of the vCluster's own on the host, free on port 443."""
    for _ in range(200):
        address = f"127.77.{random.randint(0, 255)}.{random.randint(1, 254)}"
        probe = socket.socket()
        try:
            probe.bind((address, LB_PORT))
            return address
        except OSError:
            continue
        finally:
            probe.close()
    raise RuntimeError("no free loopback address for a vCluster's load balancer")


@dataclass
class Syncer:
    name: str
    namespace: str
    pod_uid: str
    folder: Path
    process: subprocess.Popen[bytes]
    address: str  # the load balancer's address on the host (port 443)
    forwarders: list[netns.Forwarder] = field(default_factory=list)

    @property
    def log(self) -> Path:
        return self.folder / "syncer.log"

    def log_tail(self, lines: int = 40) -> str:
        try:
            return "\n".join(self.log.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return ""

    def serving(self) -> bool:
        """The syncer's proxy answers: what the pod's readiness probe asks."""
        try:
            with socket.create_connection((self.address, LB_PORT), timeout=1):
                return True
        except OSError:
            return False

    def answers(self) -> bool:
        """The virtual API server answers through the syncer's proxy (any HTTP answer to
        /readyz over TLS, as the chart's probe asks; a bare TCP connect is taken by the
        forwarder before anything listens behind it)."""
        import ssl

        context = ssl.create_default_context()
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
        try:
            with (
                socket.create_connection((self.address, LB_PORT), timeout=1) as raw,
                context.wrap_socket(raw) as tls,
            ):
                tls.sendall(b"GET /readyz HTTP/1.1\r\nHost: vcluster\r\nConnection: close\r\n\r\n")
                return tls.recv(12).startswith(b"HTTP/")
        except OSError:
            return False

    def alive(self) -> bool:
        return self.process.poll() is None

    def stop(self) -> None:
        for f in self.forwarders:
            f.close()
        if self.process.poll() is None:
            try:
                os.killpg(self.process.pid, signal.SIGTERM)
                self.process.wait(15)
            except (ProcessLookupError, subprocess.TimeoutExpired):
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(self.process.pid, signal.SIGKILL)
                self.process.wait(10)
        shutil.rmtree(self.folder, ignore_errors=True)


def _host_kubeconfig(plane: ControlPlane, token: str) -> str:
    return (
        "apiVersion: v1\nkind: Config\n"
        f"clusters:\n- name: host\n  cluster:\n    server: {plane.url}\n"
        f"    certificate-authority: {plane.serving_cert}\n"
        f"users:\n- name: vcluster\n  user:\n    token: {token}\n"
        "contexts:\n- name: vcluster\n  context:\n    cluster: host\n    user: vcluster\n"
        "current-context: vcluster\n"
    )


def start(
    plane: ControlPlane, api: client.ApiClient, pod: Any, *, node: str, address: str
) -> Syncer:
    """The syncer for the control-plane pod ``pod`` (release label ``release``)."""
    core = client.CoreV1Api(api)
    namespace = pod.metadata.namespace
    name = pod.metadata.labels["release"]
    config = core.read_namespaced_secret(f"vc-config-{name}", namespace).data["config.yaml"]
    token = core.create_namespaced_service_account_token(
        f"vc-{name}", namespace, {"spec": {"expirationSeconds": 86400}}
    ).status.token
    ROOT.mkdir(parents=True, exist_ok=True)
    folder = Path(tempfile.mkdtemp(prefix=f"vc-{name}-", dir=plane.folder))
    # /data is the pod's volume claim, as a kubelet mounts it: the same folder for every
    # pod of the claim (a restart, an upgrade, a wake keep the virtual cluster's state and
    # its keys), a new one for a new claim.
    (folder / "data").symlink_to(_volume(core, plane, pod))
    binaries = folder / "binaries"
    binaries.mkdir()
    for component in ("kube-apiserver", "kube-controller-manager"):
        (binaries / component).symlink_to(binary(component))
    (binaries / "kine").symlink_to(tool("kine"))
    # The image's helm, which the syncer's deploy controller runs for a template's charts.
    (binaries / "helm").symlink_to(tool("helm"))
    (folder / "config.yaml").write_bytes(base64.b64decode(config))
    (folder / "host.kubeconfig").write_text(_host_kubeconfig(plane, token))
    go = folder / "go"
    # Loopback up, this vCluster's folder bound where the build looks, then wait until
    # the forwarders are in place before the syncer starts.
    script = (
        "ip link set lo up && "
        f"mount --bind {folder} {ROOT} && "
        f"while [ ! -e {go} ]; do sleep 0.05; done && "
        f"exec {tool('vcluster-syncer')} start --config {folder / 'config.yaml'}"
    )
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": str(folder),
        "VCLUSTER_NAME": name,
        "NAMESPACE": namespace,
        "POD_NAME": pod.metadata.name,
        "POD_IP": "127.0.0.1",
        "NODE_NAME": node,
        "NODE_IP": "127.0.0.1",
        "KUBECONFIG": str(folder / "host.kubeconfig"),
        "LOFT_LOG_ENCODING": "console",
    }
    if os.environ.get("SSL_CERT_FILE"):
        # A cluster's private CA, installed in the image (the tests' registry is signed
        # by one).
        env["SSL_CERT_FILE"] = os.environ["SSL_CERT_FILE"]
    log = (folder / "syncer.log").open("wb")
    process = subprocess.Popen(
        ["unshare", "--mount", "--net", "--fork", "sh", "-c", script],
        stdout=log,
        stderr=subprocess.STDOUT,
        env=env,
        cwd=folder,
        start_new_session=True,
    )
    syncer = Syncer(name, namespace, pod.metadata.uid, folder, process, address)
    try:
        ns = netns.namespace_of(process)
        host_port = urlparse(plane.url).port
        assert host_port is not None
        syncer.forwarders = [
            netns.into_host(ns, host_port),
            *(netns.into_host(ns, port) for port in sorted(HOST_PORTS)),
            netns.into_namespace(ns, address, LB_PORT, PROXY_PORT),
        ]
        go.touch()
    except BaseException:
        syncer.stop()
        raise
    return syncer


def _volume(core: client.CoreV1Api, plane: ControlPlane, pod: Any) -> Path:
    """The folder that holds the pod's volume claim (its data), made at its first mount."""
    for volume in pod.spec.volumes or []:
        if volume.persistent_volume_claim is not None:
            claim = core.read_namespaced_persistent_volume_claim(
                volume.persistent_volume_claim.claim_name, pod.metadata.namespace
            )
            folder = plane.folder / "volumes" / str(claim.metadata.uid)
            break
    else:  # no claim (an emptyDir): the pod's own
        folder = plane.folder / "volumes" / str(pod.metadata.uid)
    folder.mkdir(parents=True, exist_ok=True)
    return folder
