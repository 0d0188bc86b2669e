"""How users reach a vCluster: the address the downloaded kubeconfig points at."""

from __future__ import annotations

from typing import Any

from kubernetes import client


def test_node_port_exposure_uses_the_https_port(admin_api: Any, clean_cluster: None) -> None:
    """The real chart's Service exposes https (443) and kubelet (10250); the API server
    may list them in any order, and only the https one reaches the vCluster's API."""
    from app.adapters.k8s.kubeconfig import https_node_port

    core = client.CoreV1Api(admin_api)
    core.create_namespace(
        {
            "metadata": {
                "name": "vcluster-ports",
                "labels": {"app.kubernetes.io/managed-by": "gpu-portal"},  # cleaned up after
            }
        }
    )
    service = core.create_namespaced_service(
        "vcluster-ports",
        {
            "metadata": {"name": "ports"},
            "spec": {
                "type": "NodePort",
                "selector": {"app": "vcluster"},
                "ports": [
                    {"name": "kubelet", "port": 10250, "targetPort": 8443},
                    {"name": "https", "port": 443, "targetPort": 8443},
                ],
            },
        },
    )
    by_name = {p.name: p.node_port for p in service.spec.ports}
    assert by_name["kubelet"] != by_name["https"]
    assert https_node_port(service.spec.ports) == by_name["https"]
    unnamed = [
        client.V1ServicePort(port=10250, node_port=30001),
        client.V1ServicePort(port=443, node_port=30002),
    ]
    assert https_node_port(unnamed) == 30002
    assert https_node_port([client.V1ServicePort(port=10250, node_port=30001)]) is None
