"""The vCluster itself: installed and removed with the vcluster CLI or Helm; ready when its
control-plane pod is."""

from __future__ import annotations

import os
import subprocess
import tempfile
from pathlib import Path
from typing import Any

import yaml

from app.adapters.k8s import manifests as m
from app.adapters.k8s.client import Part
from app.provisioning.backend import DONE, MISSING, PROGRESSING, BackendError, Observation, TeamSpec


class VClusterInstaller(Part):
    def _control_plane_pods(self, spec: TeamSpec) -> list[Any]:
        pods = self._call(
            f"listing the vCluster pods in {spec.namespace}",
            lambda: self.kube.core.list_namespaced_pod(
                spec.namespace, label_selector=f"app=vcluster,release={spec.vcluster_name}"
            ),
            missing_ok=True,
        )
        return list(pods.items) if pods is not None else []

    def observe(self, spec: TeamSpec) -> Observation:
        return self.kube.deep(spec.team, "vCluster", lambda: self._check(spec))

    def _check(self, spec: TeamSpec) -> Observation:
        pods = self._control_plane_pods(spec)
        if not pods:
            installed = self._call(
                f"reading statefulset {spec.vcluster_name}",
                lambda: self.kube.apps.read_namespaced_stateful_set(
                    spec.vcluster_name, spec.namespace
                ),
                missing_ok=True,
            )
            if installed is None:
                return Observation(MISSING, f"vCluster {spec.vcluster_name} is not installed")
            return Observation(
                PROGRESSING, f"vCluster {spec.vcluster_name} is installed; its pod is starting"
            )
        if any(_ready(pod) for pod in pods):
            return Observation(DONE, f"vCluster {spec.vcluster_name} control plane is ready")
        return Observation(PROGRESSING, f"vCluster {spec.vcluster_name} control plane is starting")

    def install(self, spec: TeamSpec) -> None:
        settings = self.settings
        host = settings.vcluster_ingress_host.replace("{team}", spec.team)
        expose = settings.vcluster_expose
        values = m.vcluster_values(
            spec,
            expose=expose,
            ingress_host=host if expose == "Ingress" else None,
            extra_sans=[settings.vcluster_node_address or ""] if expose == "NodePort" else [],
        )
        with tempfile.NamedTemporaryFile("w", suffix=".yaml", delete=False) as handle:
            yaml.safe_dump(values, handle)
            values_file = handle.name
        try:
            if settings.vcluster_installer == "helm":
                args = [
                    "upgrade",
                    "--install",
                    spec.vcluster_name,
                    "vcluster",
                    "--repo",
                    settings.vcluster_chart_repo,
                    "--namespace",
                    spec.namespace,
                    "--version",
                    settings.vcluster_chart_version,
                    "--values",
                    values_file,
                ]
            else:
                args = [
                    "create",
                    spec.vcluster_name,
                    "--namespace",
                    spec.namespace,
                    "--values",
                    values_file,
                    "--connect=false",
                    "--chart-version",
                    settings.vcluster_chart_version,
                    "--upgrade",
                ]
            self._cli(args, what=f"installing vCluster {spec.vcluster_name}")
        finally:
            os.unlink(values_file)

    def remove(self, spec: TeamSpec) -> Observation:
        ns: Any = self._call(
            f"reading namespace {spec.namespace}",
            lambda: self.kube.core.read_namespace(spec.namespace),
            missing_ok=True,
        )
        if ns is None or ns.metadata.deletion_timestamp:
            return Observation(DONE, f"vCluster {spec.vcluster_name} goes with its namespace")
        if not self._control_plane_pods(spec):
            return Observation(DONE, f"vCluster {spec.vcluster_name} deleted")
        verb = "uninstall" if self.settings.vcluster_installer == "helm" else "delete"
        self._cli(
            [verb, spec.vcluster_name, "--namespace", spec.namespace],
            what=f"deleting vCluster {spec.vcluster_name}",
        )
        return self._observe_gone(spec)

    def _observe_gone(self, spec: TeamSpec) -> Observation:
        if self._control_plane_pods(spec):
            return Observation(PROGRESSING, f"vCluster {spec.vcluster_name} is being deleted")
        return Observation(DONE, f"vCluster {spec.vcluster_name} deleted")

    def _cli(self, args: list[str], *, what: str) -> None:
        env = dict(os.environ)
        helm = self.settings.vcluster_installer == "helm"
        executable = self.settings.helm_cli if helm else self.settings.vcluster_cli
        if self.settings.kubeconfig:
            env["KUBECONFIG"] = self.settings.kubeconfig
        if self.settings.kube_context:
            args = [*args, "--kube-context" if helm else "--context", self.settings.kube_context]
        self.kube.requests += 1
        try:
            result = subprocess.run(  # noqa: S603 - a configured executable, no shell
                [executable, *args],
                capture_output=True,
                text=True,
                timeout=self.settings.vcluster_timeout_seconds,
                env=env,
                check=False,
            )
        except subprocess.TimeoutExpired as exc:
            raise BackendError(
                f"{what}: `{Path(executable).name} {args[0]}` did not finish in "
                f"{self.settings.vcluster_timeout_seconds:.0f}s"
            ) from exc
        except FileNotFoundError as exc:
            raise BackendError(f"{what}: {executable} is not installed") from exc
        if result.returncode != 0:
            stderr = (result.stderr or result.stdout).strip()[-800:]
            raise BackendError(
                f"{what}: {Path(executable).name} exited with {result.returncode}: {stderr}"
            )


def _ready(pod: Any) -> bool:
    conditions = (pod.status.conditions or []) if pod.status else []
    return any(c.type == "Ready" and c.status == "True" for c in conditions)
