"""The vCluster's kubeconfig secret: whether it exists (the last provisioning step), the
admin kubeconfig in it (for the portal's own use) and the address users reach."""

from __future__ import annotations

import base64
from typing import Any

import yaml

from app.adapters.k8s.client import Part
from app.provisioning.backend import DONE, PROGRESSING, BackendError, Observation, TeamSpec


class Kubeconfigs(Part):
    def _secret(self, spec: TeamSpec) -> Any:
        name = f"vc-{spec.vcluster_name}"
        return self._call(
            f"reading secret {name}",
            lambda: self.kube.core.read_namespaced_secret(name, spec.namespace),
            missing_ok=True,
        )

    def observe(self, spec: TeamSpec) -> Observation:
        return self.kube.deep(spec.team, "kubeconfig", lambda: self._check(spec))

    def _check(self, spec: TeamSpec) -> Observation:
        if self._secret(spec) is None:
            return Observation(PROGRESSING, f"waiting for secret vc-{spec.vcluster_name}")
        return Observation(DONE, f"kubeconfig secret vc-{spec.vcluster_name} exists")

    def admin_config(self, spec: TeamSpec) -> tuple[dict[str, Any], str]:
        """The vCluster's own admin kubeconfig (from secret vc-NAME) and the secret's
        resourceVersion. It is used by the portal only; it is never handed out."""
        secret = self._secret(spec)
        if secret is None or not secret.data or "config" not in secret.data:
            raise BackendError(f"secret vc-{spec.vcluster_name} has no kubeconfig yet")
        raw = yaml.safe_load(base64.b64decode(secret.data["config"]))
        if not isinstance(raw, dict):
            raise BackendError(f"secret vc-{spec.vcluster_name} holds no kubeconfig")
        return raw, str(secret.metadata.resource_version or "")

    def user_server(self, spec: TeamSpec) -> str:
        """The address users reach the team's vCluster API at."""
        expose = self.settings.vcluster.expose
        if expose == "Ingress":
            return "https://" + self.settings.vcluster.ingress_host.replace("{team}", spec.team)
        service: Any = self._call(
            f"reading service {spec.vcluster_name}",
            lambda: self.kube.core.read_namespaced_service(spec.vcluster_name, spec.namespace),
            missing_ok=True,
        )
        if service is None:
            raise BackendError(f"service {spec.vcluster_name} in {spec.namespace} does not exist")
        if expose == "NodePort":
            if not self.settings.vcluster.node_address:
                raise BackendError("set PORTAL_VCLUSTER_NODE_ADDRESS for NodePort exposure")
            port = https_node_port(service.spec.ports or [])
            if port is None:
                raise BackendError(f"service {spec.vcluster_name} has no https node port yet")
            return f"https://{self.settings.vcluster.node_address}:{port}"
        ingress = (service.status.load_balancer.ingress or []) if service.status else []
        if not ingress:
            raise BackendError(f"the load balancer of {spec.vcluster_name} has no address yet")
        address = ingress[0].ip or ingress[0].hostname
        return f"https://{address}"


def https_node_port(ports: list[Any]) -> int | None:
    """The node port of the API server's port: the one named https (the chart's name), or
    port 443. Never just the first: the chart's Service also exposes a kubelet port."""
    for wanted in (lambda p: p.name == "https", lambda p: p.port == 443):
        for port in ports:
            if wanted(port) and port.node_port:
                return int(port.node_port)
    return None
