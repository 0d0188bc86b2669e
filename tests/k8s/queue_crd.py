"""KAI's Queue CRD (scheduling.run.ai/v2), built at test time.

KAI's Go module, which carries the generated CRD, is not served by the module proxy
these machines reach; this builds the same API surface from KAI's v2 types: cluster
scope, status subresource, spec.resources.{gpu,cpu,memory}.{quota,limit,overQuotaWeight}
as numbers, status maps of quantities.
"""

from __future__ import annotations

from typing import Any

QUANTITY: dict[str, Any] = {
    "anyOf": [{"type": "integer"}, {"type": "string"}],
    "x-kubernetes-int-or-string": True,
}


def _resource(description: str) -> dict[str, Any]:
    return {
        "description": description,
        "type": "object",
        "properties": {k: {"type": "number"} for k in ("quota", "limit", "overQuotaWeight")},
    }


def queue_crd() -> dict[str, Any]:
    quantities = {"type": "object", "additionalProperties": QUANTITY}
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": "queues.scheduling.run.ai"},
        "spec": {
            "group": "scheduling.run.ai",
            "names": {
                "kind": "Queue",
                "listKind": "QueueList",
                "plural": "queues",
                "singular": "queue",
            },
            "scope": "Cluster",
            "versions": [
                {
                    "name": "v2",
                    "served": True,
                    "storage": True,
                    "subresources": {"status": {}},
                    "schema": {
                        "openAPIV3Schema": {
                            "type": "object",
                            "properties": {
                                "apiVersion": {"type": "string"},
                                "kind": {"type": "string"},
                                "metadata": {"type": "object"},
                                "spec": {
                                    "type": "object",
                                    "properties": {
                                        "displayName": {"type": "string"},
                                        "parentQueue": {"type": "string"},
                                        "priority": {"type": "integer"},
                                        "preemptMinRuntime": {"type": "string"},
                                        "reclaimMinRuntime": {"type": "string"},
                                        "resources": {
                                            "type": "object",
                                            "properties": {
                                                "gpu": _resource("GPUs, fractions allowed"),
                                                "cpu": _resource("millicpus"),
                                                "memory": _resource("megabytes (10^6 bytes)"),
                                            },
                                        },
                                    },
                                },
                                "status": {
                                    "type": "object",
                                    "properties": {
                                        "allocated": quantities,
                                        "allocatedNonPreemptible": quantities,
                                        "requested": quantities,
                                        "childQueues": {
                                            "type": "array",
                                            "items": {"type": "string"},
                                        },
                                    },
                                },
                            },
                        }
                    },
                }
            ],
        },
    }
