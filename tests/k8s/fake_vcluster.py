"""A stand-in `vcluster` CLI: a vCluster control plane needs a container runtime, which
these machines lack. It accepts the real CLI's arguments and creates in the API server
what a real install creates: the control-plane Service and pod (labels app=vcluster,
release=NAME, container syncer), the pod marked Ready after a delay through the status
subresource, and secret vc-NAME with a kubeconfig whose server is https://localhost:8443.

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


def api() -> client.CoreV1Api:
    return client.CoreV1Api(config.new_client_from_config(os.environ.get("KUBECONFIG")))


def create(name: str, namespace: str, values_file: str) -> None:
    values = yaml.safe_load(open(values_file)) or {}
    if values.get("experimental", {}).get("syncSettings", {}).get("setOwner") is not False:
        sys.exit("fake vcluster: values must set experimental.syncSettings.setOwner: false")
    core = api()
    service_type = values.get("controlPlane", {}).get("service", {}).get("spec", {}).get("type")
    labels = {"app": "vcluster", "release": name}
    try:
        core.create_namespaced_service(
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
    except ApiException as exc:
        if exc.status != 409:
            raise
    try:
        core.create_namespaced_pod(
            namespace,
            {
                "metadata": {"name": f"{name}-0", "labels": labels},
                "spec": {"containers": [{"name": "syncer", "image": "ghcr.io/loft-sh/vcluster"}]},
            },
        )
    except ApiException as exc:
        if exc.status != 409:
            raise
    # The real CLI returns before the control plane is ready.
    subprocess.Popen(
        [sys.executable, "-m", "tests.k8s.fake_vcluster", "_become-ready", name, namespace],
        start_new_session=True,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )


def become_ready(name: str, namespace: str) -> None:
    time.sleep(float(os.environ.get("FAKE_VCLUSTER_READY_SECONDS", "1")))
    core = api()
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
    core = api()
    for call in (
        lambda: core.delete_namespaced_pod(f"{name}-0", namespace, grace_period_seconds=0),
        lambda: core.delete_namespaced_service(name, namespace),
        lambda: core.delete_namespaced_secret(f"vc-{name}", namespace),
    ):
        try:
            call()
        except ApiException as exc:
            if exc.status != 404:
                raise


def main(argv: list[str]) -> None:
    if os.environ.get("FAKE_VCLUSTER_LOG"):
        with open(os.environ["FAKE_VCLUSTER_LOG"], "a") as log:
            log.write(" ".join(argv) + "\n")
    if argv and argv[0] == "_become-ready":
        become_ready(argv[1], argv[2])
        return
    if os.environ.get("FAKE_VCLUSTER_HANG"):
        time.sleep(3600)
    if os.environ.get("FAKE_VCLUSTER_FAIL"):
        sys.stderr.write("11:02:03 fatal  error installing vcluster: context deadline exceeded\n")
        sys.exit(1)
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
