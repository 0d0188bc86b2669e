"""A real etcd and kube-apiserver on loopback ports, the way envtest runs them.

Binaries come from KUBEBUILDER_ASSETS when it is set, else from the cache that
scripts/build-tools.sh fills from the Go module proxy. kube-controller-manager runs the
controllers the tests need (namespaces, garbage collection, StatefulSets, volume binding
and protection); what a node or a running vCluster would do is played by
tests/k8s/vcluster_runtime.py.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx

from tests.servers import free_port, tool

ADMIN_TOKEN = "admin-token-for-tests"


def binary(name: str) -> Path:
    assets = os.environ.get("KUBEBUILDER_ASSETS")
    if assets and (Path(assets) / name).exists():
        return Path(assets) / name
    return tool(name)


@dataclass
class ControlPlane:
    url: str
    admin_token: str
    folder: Path
    kubeconfig: Path
    etcd: subprocess.Popen[bytes]
    apiserver: subprocess.Popen[bytes]
    apiserver_args: list[str]
    controllers: subprocess.Popen[bytes] | None = None
    # With client certificates: the CA the API server trusts for them, and an admin's.
    client_ca: Path | None = None
    admin_cert: Path | None = None
    admin_key: Path | None = None

    @property
    def serving_cert(self) -> Path:
        """The API server's self-signed serving certificate (also its CA)."""
        return self.folder / "certs/apiserver.crt"

    def kubeconfig_for(self, name: str, token: str) -> Path:
        path = self.folder / f"kubeconfig-{name}"
        path.write_text(_kubeconfig(self.url, token, name, self.folder / "certs/apiserver.crt"))
        return path

    def stop_apiserver(self) -> None:
        self.apiserver.terminate()
        try:
            self.apiserver.wait(5)
        except subprocess.TimeoutExpired:
            # Graceful shutdown waits for open watches; an outage does not.
            self.apiserver.kill()
            self.apiserver.wait(10)

    def start_apiserver(self) -> None:
        log = (self.folder / "apiserver.log").open("a")
        self.apiserver = subprocess.Popen(self.apiserver_args, stdout=log, stderr=subprocess.STDOUT)
        _wait_ready(self.url, self.admin_token)


def _kubeconfig(url: str, token: str, name: str, ca: Path) -> str:
    """The API server's self-signed certificate is trusted as the CA: TLS is verified."""
    return (
        "apiVersion: v1\nkind: Config\n"
        f"clusters:\n- name: test\n  cluster:\n    server: {url}\n"
        f"    certificate-authority: {ca}\n"
        f"users:\n- name: {name}\n  user:\n    token: {token}\n"
        f"contexts:\n- name: {name}\n  context:\n    cluster: test\n    user: {name}\n"
        f"current-context: {name}\n"
    )


def _wait_ready(url: str, token: str, timeout: float = 90.0) -> None:
    deadline = time.monotonic() + timeout
    while True:
        try:
            response = httpx.get(
                url + "/readyz",
                headers={"Authorization": f"Bearer {token}"},
                verify=False,
                timeout=2,
            )
            if response.status_code == 200:
                return
        except httpx.HTTPError:
            pass
        if time.monotonic() > deadline:
            raise RuntimeError("kube-apiserver did not become ready")
        time.sleep(0.3)


HOST_CONTROLLERS = (
    "namespace,garbagecollector,statefulset,persistentvolume-binder,pvc-protection,pv-protection"
)


def _openssl(*args: str) -> None:
    subprocess.run(["openssl", *args], check=True, capture_output=True)


def _client_certificates(folder: Path) -> tuple[Path, Path, Path]:
    """A CA for client certificates and an admin's certificate (group system:masters), as
    a vCluster keeps in its secret vc-NAME."""
    ca_key, ca_crt = folder / "client-ca.key", folder / "client-ca.crt"
    key, csr, crt = folder / "admin.key", folder / "admin.csr", folder / "admin.crt"
    _openssl(
        "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2",
        "-keyout", str(ca_key), "-out", str(ca_crt), "-subj", "/CN=vcluster-client-ca",
    )  # fmt: skip
    _openssl(
        "req", "-newkey", "rsa:2048", "-nodes", "-keyout", str(key), "-out", str(csr),
        "-subj", "/O=system:masters/CN=vcluster-admin",
    )  # fmt: skip
    _openssl(
        "x509", "-req", "-in", str(csr), "-CA", str(ca_crt), "-CAkey", str(ca_key),
        "-CAcreateserial", "-days", "2", "-out", str(crt),
    )  # fmt: skip
    return ca_crt, crt, key


@contextlib.contextmanager
def control_plane(
    *, controllers: str = HOST_CONTROLLERS, client_certificates: bool = False
) -> Iterator[ControlPlane]:
    """etcd, kube-apiserver and kube-controller-manager running ``controllers``. With
    ``client_certificates`` the API server also trusts client certificates of a CA made
    here, and the plane carries an admin certificate signed by it."""
    folder = Path(tempfile.mkdtemp(prefix="portal-kube-"))
    client_port, peer_port, secure_port = free_port(), free_port(), free_port()
    subprocess.run(
        ["openssl", "genrsa", "-out", str(folder / "sa.key"), "2048"],
        check=True,
        capture_output=True,
    )
    subprocess.run(
        [
            "openssl",
            "rsa",
            "-in",
            str(folder / "sa.key"),
            "-pubout",
            "-out",
            str(folder / "sa.pub"),
        ],
        check=True,
        capture_output=True,
    )
    (folder / "tokens.csv").write_text(f'{ADMIN_TOKEN},admin,admin-uid,"system:masters"\n')
    etcd_log = (folder / "etcd.log").open("w")
    etcd = subprocess.Popen(
        [
            str(binary("etcd")),
            f"--data-dir={folder / 'etcd'}",
            f"--listen-client-urls=http://127.0.0.1:{client_port}",
            f"--advertise-client-urls=http://127.0.0.1:{client_port}",
            f"--listen-peer-urls=http://127.0.0.1:{peer_port}",
            "--unsafe-no-fsync",
        ],
        stdout=etcd_log,
        stderr=subprocess.STDOUT,
    )
    args = [
        str(binary("kube-apiserver")),
        f"--etcd-servers=http://127.0.0.1:{client_port}",
        f"--secure-port={secure_port}",
        "--bind-address=127.0.0.1",
        f"--cert-dir={folder / 'certs'}",
        f"--token-auth-file={folder / 'tokens.csv'}",
        "--authorization-mode=RBAC",
        "--service-account-issuer=https://kubernetes.default.svc",
        f"--service-account-key-file={folder / 'sa.pub'}",
        f"--service-account-signing-key-file={folder / 'sa.key'}",
        "--service-cluster-ip-range=10.0.0.0/24",
        "--disable-admission-plugins=ServiceAccount",
        "--allow-privileged=true",
    ]
    client_ca = admin_cert = admin_key = None
    if client_certificates:
        client_ca, admin_cert, admin_key = _client_certificates(folder)
        args.append(f"--client-ca-file={client_ca}")
    log = (folder / "apiserver.log").open("w")
    apiserver = subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT)
    url = f"https://127.0.0.1:{secure_port}"
    plane = ControlPlane(
        url,
        ADMIN_TOKEN,
        folder,
        folder / "admin.kubeconfig",
        etcd,
        apiserver,
        args,
        client_ca=client_ca,
        admin_cert=admin_cert,
        admin_key=admin_key,
    )
    try:
        _wait_ready(url, ADMIN_TOKEN)
        plane.kubeconfig.write_text(
            _kubeconfig(url, ADMIN_TOKEN, "admin", folder / "certs/apiserver.crt")
        )
        # Namespace deletion and garbage collection need their controllers.
        kcm_log = (folder / "controller-manager.log").open("w")
        plane.controllers = subprocess.Popen(
            [
                str(binary("kube-controller-manager")),
                f"--kubeconfig={plane.kubeconfig}",
                f"--controllers={controllers}",
                "--leader-elect=false",
                "--bind-address=127.0.0.1",
                f"--secure-port={free_port()}",
            ],
            stdout=kcm_log,
            stderr=subprocess.STDOUT,
        )
        yield plane
    finally:
        for process in (plane.controllers, plane.apiserver, etcd):
            if process is None:
                continue
            process.terminate()
            try:
                process.wait(10)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(10)
        shutil.rmtree(folder, ignore_errors=True)
