"""A stand-in `vcluster` CLI: a vCluster control plane needs a container runtime, which
these machines lack. It accepts the real CLI's arguments and, with the caller's
credentials (as Helm would), creates what the chart creates: the Service, the
StatefulSet, the vCluster's Role and RoleBinding and, for node sync, a ClusterRole and
ClusterRoleBinding to read nodes. Then it plays the cluster's side with admin
credentials (FAKE_VCLUSTER_ADMIN_KUBECONFIG): the StatefulSet's pod NAME-0 (labels
app=vcluster, release=NAME, container syncer, owned by the StatefulSet), marked Ready
after a delay through the status subresource, and secret vc-NAME with a kubeconfig
whose server is https://localhost:8443, as the syncer writes it.

Environment: FAKE_VCLUSTER_READY_SECONDS (default 1), FAKE_VCLUSTER_FAIL (exit 1 with an
error like the real CLI), FAKE_VCLUSTER_HANG (never return), FAKE_VCLUSTER_LOG (append
each call's arguments).
"""

from __future__ import annotations

import argparse
import base64
import os
import subprocess
import sys
import time

import yaml
from kubernetes import client, config
from kubernetes.client.exceptions import ApiException


def caller() -> client.ApiClient:
    return config.new_client_from_config(os.environ.get("KUBECONFIG"))


def cluster_side() -> client.ApiClient:
    path = os.environ.get("FAKE_VCLUSTER_ADMIN_KUBECONFIG") or os.environ.get("KUBECONFIG")
    return config.new_client_from_config(path)


def _ignore_conflict(call: object) -> None:
    try:
        call()  # type: ignore[operator, unused-ignore]
    except ApiException as exc:
        if exc.status != 409:
            raise


def create(name: str, namespace: str, values_file: str) -> None:
    with open(values_file) as handle:
        values = yaml.safe_load(handle) or {}
    if values.get("experimental", {}).get("syncSettings", {}).get("setOwner") is not False:
        sys.exit("fake vcluster: values must set experimental.syncSettings.setOwner: false")
    helm = caller()
    core = client.CoreV1Api(helm)
    service_type = values.get("controlPlane", {}).get("service", {}).get("spec", {}).get("type")
    labels = {"app": "vcluster", "release": name}
    _ignore_conflict(
        lambda: core.create_namespaced_service(
            namespace,
            {
                "metadata": {"name": name, "labels": labels},
                "spec": {
                    "type": service_type or "ClusterIP",
                    "selector": labels,
                    "ports": [{"name": "https", "port": 443, "targetPort": 8443}],
                },
            },
        )
    )
    _ignore_conflict(
        lambda: client.AppsV1Api(helm).create_namespaced_stateful_set(
            namespace,
            {
                "metadata": {"name": name, "labels": labels},
                "spec": {
                    "serviceName": name,
                    "replicas": 1,
                    "selector": {"matchLabels": labels},
                    "template": {
                        "metadata": {"labels": labels},
                        "spec": {
                            "containers": [{"name": "syncer", "image": "ghcr.io/loft-sh/vcluster"}]
                        },
                    },
                },
            },
        )
    )
    rbac = client.RbacAuthorizationV1Api(helm)
    rules = [
        {
            "apiGroups": [""],
            "resources": ["pods", "pods/status", "events"],
            "verbs": ["get", "list", "watch", "create", "update", "patch", "delete"],
        }
    ]
    _ignore_conflict(
        lambda: rbac.create_namespaced_role(
            namespace, {"metadata": {"name": f"vc-{name}", "labels": labels}, "rules": rules}
        )
    )
    subject = [{"kind": "ServiceAccount", "name": f"vc-{name}", "namespace": namespace}]
    _ignore_conflict(
        lambda: rbac.create_namespaced_role_binding(
            namespace,
            {
                "metadata": {"name": f"vc-{name}", "labels": labels},
                "subjects": subject,
                "roleRef": {
                    "apiGroup": "rbac.authorization.k8s.io",
                    "kind": "Role",
                    "name": f"vc-{name}",
                },
            },
        )
    )
    if values.get("sync", {}).get("fromHost", {}).get("nodes", {}).get("enabled"):
        cluster_role = f"vc-{name}-v-{namespace}"
        _ignore_conflict(
            lambda: rbac.create_cluster_role(
                {
                    "metadata": {"name": cluster_role, "labels": labels},
                    "rules": [
                        {
                            "apiGroups": [""],
                            "resources": ["nodes"],
                            "verbs": ["get", "list", "watch"],
                        }
                    ],
                }
            )
        )
        _ignore_conflict(
            lambda: rbac.create_cluster_role_binding(
                {
                    "metadata": {"name": cluster_role, "labels": labels},
                    "subjects": subject,
                    "roleRef": {
                        "apiGroup": "rbac.authorization.k8s.io",
                        "kind": "ClusterRole",
                        "name": cluster_role,
                    },
                }
            )
        )
    # The real CLI returns before the control plane is ready.
    subprocess.Popen(
        [sys.executable, "-m", "tests.k8s.fake_vcluster", "_become-ready", name, namespace],
        start_new_session=True,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )


def become_ready(name: str, namespace: str) -> None:
    """What the StatefulSet controller and the vCluster syncer would do."""
    time.sleep(float(os.environ.get("FAKE_VCLUSTER_READY_SECONDS", "1")))
    admin = cluster_side()
    core = client.CoreV1Api(admin)
    owner = client.AppsV1Api(admin).read_namespaced_stateful_set(name, namespace)
    labels = {"app": "vcluster", "release": name}
    _ignore_conflict(
        lambda: core.create_namespaced_pod(
            namespace,
            {
                "metadata": {
                    "name": f"{name}-0",
                    "labels": labels,
                    "ownerReferences": [
                        {
                            "apiVersion": "apps/v1",
                            "kind": "StatefulSet",
                            "name": name,
                            "uid": owner.metadata.uid,
                            "controller": True,
                        }
                    ],
                },
                "spec": {"containers": [{"name": "syncer", "image": "ghcr.io/loft-sh/vcluster"}]},
            },
        )
    )
    now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    core.patch_namespaced_pod_status(
        f"{name}-0",
        namespace,
        {
            "status": {
                "phase": "Running",
                "conditions": [{"type": "Ready", "status": "True", "lastTransitionTime": now}],
            }
        },
    )
    kubeconfig = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [
            {
                "name": "my-vcluster",
                "cluster": {
                    "server": "https://localhost:8443",
                    "certificate-authority-data": base64.b64encode(b"fake-ca").decode(),
                },
            }
        ],
        "users": [
            {
                "name": "my-vcluster",
                "user": {
                    "client-certificate-data": base64.b64encode(b"fake-cert").decode(),
                    "client-key-data": base64.b64encode(b"fake-key").decode(),
                },
            }
        ],
        "contexts": [
            {"name": "my-vcluster", "context": {"cluster": "my-vcluster", "user": "my-vcluster"}}
        ],
        "current-context": "my-vcluster",
    }
    data = {
        "config": yaml.safe_dump(kubeconfig),
        "certificate-authority": "fake-ca",
        "client-certificate": "fake-cert",
        "client-key": "fake-key",
    }
    try:
        core.create_namespaced_secret(
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


def delete(name: str, namespace: str) -> None:
    helm = caller()
    core = client.CoreV1Api(helm)
    rbac = client.RbacAuthorizationV1Api(helm)
    cluster_role = f"vc-{name}-v-{namespace}"
    for call in (
        # The pod goes with its StatefulSet (garbage collection).
        lambda: client.AppsV1Api(helm).delete_namespaced_stateful_set(
            name, namespace, propagation_policy="Background"
        ),
        lambda: core.delete_namespaced_service(name, namespace),
        lambda: core.delete_namespaced_secret(f"vc-{name}", namespace),
        lambda: rbac.delete_namespaced_role_binding(f"vc-{name}", namespace),
        lambda: rbac.delete_namespaced_role(f"vc-{name}", namespace),
        lambda: rbac.delete_cluster_role_binding(cluster_role),
        lambda: rbac.delete_cluster_role(cluster_role),
    ):
        try:
            call()
        except ApiException as exc:
            if exc.status != 404:
                raise


def helm(argv: list[str]) -> None:
    """`helm upgrade --install NAME vcluster --repo R --namespace NS --version V --values F`
    and `helm uninstall NAME --namespace NS`, for the helm installer."""
    parser = argparse.ArgumentParser(prog="helm")
    parser.add_argument("command", choices=["upgrade", "uninstall"])
    parser.add_argument("name")
    parser.add_argument("chart", nargs="?")
    parser.add_argument("--install", action="store_true")
    parser.add_argument("--repo")
    parser.add_argument("--namespace", "-n", required=True)
    parser.add_argument("--version")
    parser.add_argument("--values", "-f")
    parser.add_argument("--kube-context")
    args = parser.parse_args(argv)
    if args.command == "upgrade":
        if not args.install or args.chart != "vcluster" or not args.repo:
            sys.exit("fake helm: expected `upgrade --install NAME vcluster --repo ...`")
        create(args.name, args.namespace, args.values)
    else:
        delete(args.name, args.namespace)


def main(argv: list[str]) -> None:
    if argv and argv[0] == "_become-ready":
        become_ready(argv[1], argv[2])
        return
    if os.environ.get("FAKE_VCLUSTER_LOG"):
        with open(os.environ["FAKE_VCLUSTER_LOG"], "a") as log:
            log.write(" ".join(argv) + "\n")
    if os.environ.get("FAKE_VCLUSTER_HANG"):
        time.sleep(3600)
    if os.environ.get("FAKE_VCLUSTER_FAIL"):
        sys.stderr.write("11:02:03 fatal  error installing vcluster: context deadline exceeded\n")
        sys.exit(1)
    if argv and argv[0] in ("upgrade", "uninstall"):
        helm(argv)
        return
    parser = argparse.ArgumentParser(prog="vcluster")
    parser.add_argument("command", choices=["create", "delete"])
    parser.add_argument("name")
    parser.add_argument("--namespace", "-n", required=True)
    parser.add_argument("--values", "-f")
    parser.add_argument("--connect")
    parser.add_argument("--chart-version")
    parser.add_argument("--upgrade", action="store_true")
    parser.add_argument("--context")
    args = parser.parse_args(argv)
    if args.command == "create":
        if args.connect != "false":
            sys.exit("fake vcluster: the portal must pass --connect=false")
        create(args.name, args.namespace, args.values)
    else:
        delete(args.name, args.namespace)


if __name__ == "__main__":
    main(sys.argv[1:])
