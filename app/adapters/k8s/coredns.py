"""The CoreDNS a team's vCluster runs, as the portal gives it (pure, no I/O).

The syncer deploys CoreDNS inside every vCluster, and its pods are synced to the host like
any team pod: they carry ``vcluster.loft.sh/managed-by``, so the host's queue policy
judges them. vCluster's own CoreDNS manifests set neither a scheduler nor a queue
(``controlPlane.coredns.deployment.pods.labels`` gives labels, nothing gives
``schedulerName``), so once CoreDNS is re-created the host refuses it and DNS inside the
team's cluster is gone. Exempting kube-system inside the vCluster is no answer: leads are
cluster-admin there. So the portal hands the syncer the manifests it would deploy
(``controlPlane.coredns.overwriteManifests``), the same objects as vCluster 0.36's own
default rendering, with the team's queue label and KAI as the scheduler.
"""

from __future__ import annotations

from typing import Any

import yaml

# What vCluster 0.36 deploys for its default distro (Kubernetes 1.36): the CoreDNS image
# its version map gives, pulled from docker.io unless a default registry is set.
COREDNS_IMAGE = "coredns/coredns:1.14.2"
DEFAULT_REGISTRY = "docker.io"
# The syncer runs as root in its pod, and then runs CoreDNS as 1001:1001.
RUN_AS = 1001

# vCluster's default Corefile for the values the portal writes: no kubelet proxies by
# hostname, the cluster.local domain, no fallback to the host's DNS, no network policy.
COREFILE = """.:1053 {
    errors
    health
    ready
    kubernetes cluster.local in-addr.arpa ip6.arpa {
        pods insecure
        fallthrough in-addr.arpa ip6.arpa
    }
    hosts /etc/coredns/NodeHosts {
        ttl 60
        reload 15s
        fallthrough
    }
    prometheus :9153
    forward . /etc/resolv.conf
    cache 30
    loop
    reload
    loadbalance
}

import /etc/coredns/custom/*.server"""

APP = {"k8s-app": "vcluster-kube-dns"}


def manifests(*, queue_label: str, queue: str, scheduler: str, image_registry: str = "") -> str:
    """The YAML documents vCluster applies inside the virtual cluster for CoreDNS."""
    registry = (image_registry or DEFAULT_REGISTRY).rstrip("/")
    system = {"namespace": "kube-system"}
    docs: list[dict[str, Any]] = [
        {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "coredns", **system}},
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRole",
            "metadata": {
                "name": "system:coredns",
                "labels": {"kubernetes.io/bootstrapping": "rbac-defaults"},
            },
            "rules": [
                {
                    "apiGroups": [""],
                    "resources": ["endpoints", "services", "pods", "namespaces"],
                    "verbs": ["list", "watch"],
                },
                {
                    "apiGroups": ["discovery.k8s.io"],
                    "resources": ["endpointslices"],
                    "verbs": ["list", "watch"],
                },
            ],
        },
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRoleBinding",
            "metadata": {
                "name": "system:coredns",
                "annotations": {"rbac.authorization.kubernetes.io/autoupdate": "true"},
                "labels": {"kubernetes.io/bootstrapping": "rbac-defaults"},
            },
            "roleRef": {
                "apiGroup": "rbac.authorization.k8s.io",
                "kind": "ClusterRole",
                "name": "system:coredns",
            },
            "subjects": [{"kind": "ServiceAccount", "name": "coredns", **system}],
        },
        {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": "coredns", **system},
            "data": {"Corefile": COREFILE, "NodeHosts": ""},
        },
        {
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "metadata": {
                "name": "coredns",
                **system,
                "labels": {**APP, "kubernetes.io/name": "CoreDNS"},
            },
            "spec": {
                "replicas": 1,
                "strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": 1}},
                "selector": {"matchLabels": APP},
                "template": {
                    "metadata": {"labels": {**APP, queue_label: queue}},
                    "spec": _pod(scheduler, f"{registry}/{COREDNS_IMAGE}"),
                },
            },
        },
        {
            "apiVersion": "v1",
            "kind": "Service",
            "metadata": {
                "name": "kube-dns",
                **system,
                "annotations": {"prometheus.io/port": "9153", "prometheus.io/scrape": "true"},
                "labels": {
                    **APP,
                    "kubernetes.io/cluster-service": "true",
                    "kubernetes.io/name": "CoreDNS",
                },
            },
            "spec": {
                "type": "ClusterIP",
                "selector": APP,
                "ports": [
                    {"name": "dns", "port": 53, "targetPort": 1053, "protocol": "UDP"},
                    {"name": "dns-tcp", "port": 53, "targetPort": 1053, "protocol": "TCP"},
                    {"name": "metrics", "port": 9153, "protocol": "TCP"},
                ],
            },
        },
    ]
    return yaml.safe_dump_all(docs, sort_keys=False)


def _pod(scheduler: str, image: str) -> dict[str, Any]:
    probe = {"periodSeconds": 10, "timeoutSeconds": 1, "successThreshold": 1}
    return {
        "schedulerName": scheduler,
        "priorityClassName": "",
        "serviceAccountName": "coredns",
        "nodeSelector": {"kubernetes.io/os": "linux"},
        "containers": [
            {
                "name": "coredns",
                "image": image,
                "imagePullPolicy": "IfNotPresent",
                "args": ["-conf", "/etc/coredns/Corefile"],
                "volumeMounts": [
                    {"name": "config-volume", "mountPath": "/etc/coredns", "readOnly": True},
                    {
                        "name": "custom-config-volume",
                        "mountPath": "/etc/coredns/custom",
                        "readOnly": True,
                    },
                ],
                "securityContext": {
                    "runAsNonRoot": True,
                    "runAsUser": RUN_AS,
                    "runAsGroup": RUN_AS,
                    "allowPrivilegeEscalation": False,
                    "capabilities": {"add": ["NET_BIND_SERVICE"], "drop": ["ALL"]},
                    "readOnlyRootFilesystem": True,
                },
                "livenessProbe": {
                    "httpGet": {"path": "/health", "port": 8080, "scheme": "HTTP"},
                    "initialDelaySeconds": 60,
                    "failureThreshold": 3,
                    **probe,
                },
                "readinessProbe": {
                    "httpGet": {"path": "/ready", "port": 8181, "scheme": "HTTP"},
                    "initialDelaySeconds": 0,
                    "failureThreshold": 3,
                    **probe,
                    "periodSeconds": 2,
                },
            }
        ],
        "dnsPolicy": "Default",
        "volumes": [
            {
                "name": "config-volume",
                "configMap": {
                    "name": "coredns",
                    "items": [
                        {"key": "Corefile", "path": "Corefile"},
                        {"key": "NodeHosts", "path": "NodeHosts"},
                    ],
                },
            },
            {
                "name": "custom-config-volume",
                "configMap": {"name": "coredns-custom", "optional": True},
            },
        ],
    }
