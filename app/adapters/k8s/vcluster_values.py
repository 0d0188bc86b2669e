"""The vcluster.yaml of a team's vCluster: what the design source requires (nodes synced
from the host, KAI as every pod's scheduler through CoreDNS and the admission policy),
how the control plane runs and is reached, OIDC sign-in, and a template's values
merged over the portal's. Pure: no I/O (``vcluster.py`` installs it with Helm)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import yaml

from app.adapters.k8s import coredns
from app.adapters.k8s.manifests import MANAGED_BY, PORTAL, SCHEDULER
from app.provisioning.backend import TeamSpec


@dataclass(frozen=True)
class ControlPlane:
    """How a team's vCluster control plane runs on the host (the portal's settings)."""

    image_registry: str = ""  # "" = the chart's own registries
    telemetry: bool = False
    cpu_request: str = "200m"
    memory_request: str = "256Mi"
    memory_limit: str = "4Gi"
    storage_size: str = "5Gi"
    storage_class: str = ""  # "" = the cluster's default StorageClass
    oidc: OidcSignIn | None = None  # kubeconfig mode oidc: the API server trusts the provider


@dataclass(frozen=True)
class OidcSignIn:
    """How a vCluster's API server trusts the identity provider, and which provider
    groups are which ClusterRole inside."""

    issuer: str
    client_id: str
    groups_claim: str
    admin_group: str
    lead_group: str  # the team's group (PORTAL_OIDC_TEAM_GROUP_PATTERN for this team)
    admin_role: str
    lead_role: str

    def api_server_args(self) -> list[str]:
        return [
            f"--oidc-issuer-url={self.issuer}",
            f"--oidc-client-id={self.client_id}",
            "--oidc-username-claim=email",
            f"--oidc-username-prefix={OIDC_PREFIX}",
            f"--oidc-groups-claim={self.groups_claim}",
            f"--oidc-groups-prefix={OIDC_PREFIX}",
        ]

    def bindings(self) -> str:
        """ClusterRoleBindings applied inside the vCluster (experimental.deploy)."""
        docs = []
        for name, group, role in (
            ("admins", self.admin_group, self.admin_role),
            ("leads", self.lead_group, self.lead_role),
        ):
            if not group:
                continue  # group-based membership is off
            docs.append(
                {
                    "apiVersion": "rbac.authorization.k8s.io/v1",
                    "kind": "ClusterRoleBinding",
                    "metadata": {"name": f"gpu-portal:oidc-{name}", "labels": {MANAGED_BY: PORTAL}},
                    "subjects": [
                        {
                            "apiGroup": "rbac.authorization.k8s.io",
                            "kind": "Group",
                            "name": OIDC_PREFIX + group,
                        }
                    ],
                    "roleRef": {
                        "apiGroup": "rbac.authorization.k8s.io",
                        "kind": "ClusterRole",
                        "name": role,
                    },
                }
            )
        return yaml.safe_dump_all(docs, sort_keys=False)


OIDC_PREFIX = "oidc:"


def vcluster_values(
    spec: TeamSpec,
    *,
    expose: str,
    ingress_host: str | None,
    extra_sans: list[str],
    plane: ControlPlane | None = None,
) -> dict[str, Any]:
    """The vcluster.yaml the design source requires, plus how it is reached and how its
    control plane runs."""
    plane = plane or ControlPlane()
    control_plane: dict[str, Any] = {
        "statefulSet": {
            "resources": {
                "requests": {"cpu": plane.cpu_request, "memory": plane.memory_request},
                "limits": {"memory": plane.memory_limit},
            },
            "persistence": {"volumeClaim": {"size": plane.storage_size}},
        }
    }
    if plane.storage_class:
        control_plane["statefulSet"]["persistence"]["volumeClaim"]["storageClass"] = (
            plane.storage_class
        )
    if plane.image_registry:
        control_plane["advanced"] = {"defaultImageRegistry": plane.image_registry}
    if expose in ("LoadBalancer", "NodePort"):
        control_plane["service"] = {"spec": {"type": expose}}
    elif expose == "Ingress" and ingress_host:
        control_plane["ingress"] = {"enabled": True, "host": ingress_host}
    # The address the portal reaches the vCluster at from inside the host cluster (its
    # Service's name in the namespace's .svc domain): the syncer's certificate names only
    # "<name>" and "<name>.<namespace>" on its own.
    sans = [f"{spec.vcluster_name}.{spec.namespace}.svc", *(s for s in extra_sans if s)]
    control_plane["proxy"] = {"extraSANs": sans}
    # CoreDNS is synced to the host like any team pod: it gets the team's queue and KAI.
    control_plane["coredns"] = {
        "overwriteManifests": coredns.manifests(
            queue_label=spec.queue_label,
            queue=spec.queue_name,
            scheduler=SCHEDULER,
            image_registry=plane.image_registry,
        )
    }
    experimental: dict[str, Any] = {"syncSettings": {"setOwner": False}}
    if plane.oidc is not None:
        control_plane["distro"] = {
            "k8s": {"apiServer": {"extraArgs": plane.oidc.api_server_args()}}
        }
        experimental["deploy"] = {"vcluster": {"manifests": plane.oidc.bindings()}}
    values = {
        "experimental": experimental,
        "sync": {
            "fromHost": {"nodes": {"enabled": True, "selector": {"all": True}}},
            # A pod's service-account token goes in a host secret of the syncer's, not in
            # an annotation that whoever may read pods in the namespace can read.
            "toHost": {"pods": {"useSecretsForSATokens": True}},
        },
        # The kubelet proxies would need nodes/proxy on the host (a way to run commands
        # through any node's kubelet), which neither the portal nor a team should hold;
        # they only serve metrics tools inside the vCluster.
        "networking": {"advanced": {"proxyKubelets": {"byHostname": False, "byIP": False}}},
        "telemetry": {"enabled": plane.telemetry},
        "controlPlane": control_plane,
    }
    if spec.template_values:
        with_template(values, json.loads(spec.template_values))
    return values


def with_template(values: dict[str, Any], template: dict[str, Any]) -> None:
    """The template's values merged into the portal's: its vCluster values (only keys
    ``catalog.rules.ALLOWED``, checked when saved) over the portal's defaults, and its
    manifests and charts beside the portal's own in ``experimental.deploy.vcluster``."""
    deploy = template.pop("experimental", {}).get("deploy", {}).get("vcluster", {})
    _merge(values, template)
    if not deploy:
        return
    ours = values["experimental"].setdefault("deploy", {}).setdefault("vcluster", {})
    manifests = [m for m in (ours.get("manifests", ""), deploy.get("manifests", "")) if m.strip()]
    if manifests:
        ours["manifests"] = "\n---\n".join(m.strip("\n") for m in manifests) + "\n"
    if deploy.get("helm"):
        ours["helm"] = [*ours.get("helm", []), *deploy["helm"]]


def _merge(into: dict[str, Any], over: dict[str, Any]) -> None:
    for key, value in over.items():
        if isinstance(value, dict) and isinstance(into.get(key), dict):
            _merge(into[key], value)
        else:
            into[key] = value
