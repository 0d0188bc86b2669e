"""KAI's Queue CRD (scheduling.run.ai/v2), built at test time.

The real one comes from KAI's Go module at a pinned version (scripts/build-tools.sh puts
it in the cache). Where the module proxy does not serve that module, this builds the same
API surface from KAI's v2 types: cluster scope, status subresource,
spec.resources.{gpu,cpu,memory}.{quota,limit,overQuotaWeight} as numbers, status maps of
quantities.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import yaml

KAI_VERSION = os.environ.get("KAI_VERSION", "v0.17.0")


def kai_queue_crd() -> dict[str, Any]:
    """KAI's own CRD when the cache has it, else the one built from its types."""
    cache = Path(
        os.environ.get("PORTAL_CACHE")
        or Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "gpu-portal"
    )
    real = cache / f"kai-{KAI_VERSION}-queues.yaml"
    if real.exists():
        crd: dict[str, Any] = yaml.safe_load(real.read_text())
        return crd
    return queue_crd()


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
