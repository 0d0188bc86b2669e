"""The vCluster itself: installed and removed with the vcluster CLI or Helm; ready when its
control-plane pod is."""

from __future__ import annotations

import contextlib
import functools
import os
import re
import shutil
import signal
import subprocess
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import yaml

from app.adapters.k8s import vcluster_values
from app.adapters.k8s.client import Part
from app.core.config import Settings
from app.provisioning.backend import (
    ASLEEP,
    DONE,
    MISSING,
    OUTDATED,
    PROGRESSING,
    BackendError,
    Observation,
    TeamSpec,
)

ANSI = re.compile(r"\x1b\[[0-9;]*m")
REVISION = "controller-revision-hash"
# What `vcluster pause` writes on the StatefulSet (vCluster's pkg/constants): the same
# annotations, so `vcluster resume` by hand and `vcluster list` agree with the portal.
PAUSED = "loft.sh/paused"
RESTORING = "loft.sh/restoring"  # a paused-for-restore cluster, as the CLI counts it
PAUSED_REPLICAS = "loft.sh/paused-replicas"
PAUSED_DATE = "loft.sh/paused-date"
MANAGED_BY = "vcluster.loft.sh/managed-by"  # on each host pod a vCluster's syncer made
OBJECT_NAMESPACE = "vcluster.loft.sh/object-namespace"  # its namespace inside
MERGE_PATCH = "application/merge-patch+json"


def is_paused(annotations: dict[str, str] | None) -> bool:
    marks = annotations or {}
    return marks.get(PAUSED) == "true" or marks.get(RESTORING) == "true"


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
        seen = self.kube.deep(spec.team, "vCluster", lambda: self._check(spec))
        if seen.version is not None and seen.version != self.settings.chart_version:
            # Checked at the version configured before: look again.
            self.kube.forget(spec.team, ("vCluster",))
            seen = self.kube.deep(spec.team, "vCluster", lambda: self._check(spec))
        return seen

    def _check(self, spec: TeamSpec) -> Observation:
        name = spec.vcluster_name
        installed = self._read_statefulset(spec)
        if installed is None:
            return Observation(MISSING, f"vCluster {name} is not installed")
        chart = (installed.metadata.labels or {}).get("chart", "")
        version = chart.removeprefix("vcluster-") or None
        if is_paused(installed.metadata.annotations):
            return self._asleep(spec, installed, version)
        wanted = self.settings.chart_version
        if version != wanted:
            return Observation(
                OUTDATED,
                f"vCluster {name} runs chart {version or 'of unknown version'}; "
                f"{wanted} is configured",
                version=version,
            )
        pods = self._control_plane_pods(spec)
        status = installed.status
        revision = status.update_revision if status else None
        rolled = bool(status) and (status.observed_generation or 0) >= (
            installed.metadata.generation or 0
        )
        current = [
            pod
            for pod in pods
            if not pod.metadata.deletion_timestamp
            and (not revision or (pod.metadata.labels or {}).get(REVISION) == revision)
        ]
        if rolled and any(_ready(pod) for pod in current):
            return Observation(
                DONE, f"vCluster {name} control plane is ready (chart {version})", version=version
            )
        waiting = self._pending_claim(spec)
        if waiting:
            return Observation(PROGRESSING, f"vCluster {name} is waiting for storage: {waiting}")
        if not current:
            return Observation(
                PROGRESSING, f"vCluster {name} is installed; its pod is starting", version=version
            )
        return Observation(
            PROGRESSING, f"vCluster {name} control plane is starting", version=version
        )

    def _asleep(self, spec: TeamSpec, installed: Any, version: str | None) -> Observation:
        """A paused vCluster: asleep once its control plane is gone (as `vcluster pause`
        waits for) and each of its pods on the host is deleted or being deleted (a node's
        kubelet finishes a terminating one; the portal does not wait for that)."""
        name = spec.vcluster_name
        synced = [p for p in self._synced_pods(spec) if not p.metadata.deletion_timestamp]
        left = len(self._control_plane_pods(spec)) + len(synced)
        if left or (installed.status and installed.status.replicas):
            return Observation(
                PROGRESSING,
                f"vCluster {name} is going to sleep: {left} of its pods still stop",
                version=version,
            )
        since = (installed.metadata.annotations or {}).get(PAUSED_DATE, "")
        return Observation(
            ASLEEP,
            f"vCluster {name} is asleep (paused{' since ' + since if since else ''}); "
            "its state, secrets and queue are kept",
            version=version,
        )

    def _synced_pods(self, spec: TeamSpec) -> list[Any]:
        pods = self._call(
            f"listing the pods vCluster {spec.vcluster_name} made in {spec.namespace}",
            lambda: self.kube.core.list_namespaced_pod(
                spec.namespace, label_selector=f"{MANAGED_BY}={spec.vcluster_name}"
            ),
            missing_ok=True,
        )
        return list(pods.items) if pods is not None else []

    def _read_statefulset(self, spec: TeamSpec) -> Any:
        """The vCluster's StatefulSet (None: not installed)."""
        return self._call(
            f"reading statefulset {spec.vcluster_name}",
            lambda: self.kube.apps.read_namespaced_stateful_set(spec.vcluster_name, spec.namespace),
            missing_ok=True,
        )

    def _statefulset(self, spec: TeamSpec) -> Any:
        installed = self._read_statefulset(spec)
        if installed is None:
            raise BackendError(f"vCluster {spec.vcluster_name} is not installed")
        return installed

    def pause(self, spec: TeamSpec) -> Observation:
        """As `vcluster pause`: the StatefulSet annotated (its replicas kept in one) and
        scaled to 0, then, once its control plane has stopped (the CLI waits for the
        StatefulSet's 0 replicas), every host pod the vCluster made deleted. Not before:
        a syncer still stopping makes again what is deleted under it. Called again on
        the next pass until the vCluster is asleep."""
        name = spec.vcluster_name
        installed = self._statefulset(spec)
        if not is_paused(installed.metadata.annotations):
            replicas = installed.spec.replicas if installed.spec else None
            now = datetime.now(UTC)
            body = {
                "metadata": {
                    "annotations": {
                        PAUSED: "true",
                        PAUSED_REPLICAS: str(replicas or 1),
                        PAUSED_DATE: now.strftime("%Y-%m-%dT%H:%M:%S.")
                        + f"{now.microsecond // 1000:03d}Z",
                    }
                },
                "spec": {"replicas": 0},
            }
            self._call(
                f"pausing vCluster {name}",
                lambda: self.kube.apps.patch_namespaced_stateful_set(
                    name, spec.namespace, body, _content_type=MERGE_PATCH
                ),
            )
            installed = self._statefulset(spec)
        if (installed.status and installed.status.replicas) or self._control_plane_pods(spec):
            return self._check(spec)  # its control plane still stops
        for pod in self._synced_pods(spec):
            if pod.metadata.deletion_timestamp:
                continue  # on its way out
            pod_name = pod.metadata.name
            self._call(
                f"deleting pod {pod_name} of vCluster {name}",
                functools.partial(self.kube.core.delete_namespaced_pod, pod_name, spec.namespace),
                missing_ok=True,
            )
        return self._check(spec)

    def resume(self, spec: TeamSpec) -> Observation:
        """As `vcluster resume`: the replicas back from the annotation, the annotations
        gone; the syncer starts and makes the vCluster's pods again."""
        name = spec.vcluster_name
        installed = self._statefulset(spec)
        annotations = installed.metadata.annotations or {}
        if is_paused(annotations):
            try:
                replicas = max(1, int(annotations.get(PAUSED_REPLICAS) or 1))
            except ValueError:
                replicas = 1
            gone = dict.fromkeys((PAUSED, RESTORING, PAUSED_REPLICAS, PAUSED_DATE))
            body = {"metadata": {"annotations": gone}, "spec": {"replicas": replicas}}
            self._call(
                f"resuming vCluster {name}",
                lambda: self.kube.apps.patch_namespaced_stateful_set(
                    name, spec.namespace, body, _content_type=MERGE_PATCH
                ),
            )
        return self._check(spec)

    def running_pods(self) -> dict[str, int]:
        """The pods every vCluster made on the host for its team, running or waiting, per
        namespace (not the vCluster's own CoreDNS: its kube-system runs while idle)."""
        pods: Any = self._call(
            "listing the pods of every vCluster",
            lambda: self.kube.core.list_pod_for_all_namespaces(label_selector=MANAGED_BY),
        )
        found: dict[str, int] = {}
        for pod in pods.items if pods is not None else []:
            phase = pod.status.phase if pod.status else None
            if phase in ("Succeeded", "Failed") or pod.metadata.deletion_timestamp:
                continue
            if (pod.metadata.annotations or {}).get(OBJECT_NAMESPACE) == "kube-system":
                continue
            found[pod.metadata.namespace] = found.get(pod.metadata.namespace, 0) + 1
        return found

    def _pending_claim(self, spec: TeamSpec) -> str | None:
        """The control plane's volume claim when it is Pending, with the cluster's reason."""
        claims: Any = self._call(
            f"listing volume claims in {spec.namespace}",
            lambda: self.kube.core.list_namespaced_persistent_volume_claim(
                spec.namespace, label_selector=f"app=vcluster,release={spec.vcluster_name}"
            ),
            missing_ok=True,
        )
        for claim in claims.items if claims is not None else []:
            if claim.status and claim.status.phase == "Pending":
                selector = (
                    "involvedObject.kind=PersistentVolumeClaim,"
                    f"involvedObject.name={claim.metadata.name}"
                )
                events: Any = self._call(
                    f"reading events of {claim.metadata.name}",
                    functools.partial(
                        self.kube.core.list_namespaced_event,
                        spec.namespace,
                        field_selector=selector,
                    ),
                    missing_ok=True,
                )
                items = sorted(
                    events.items if events is not None else [],
                    key=lambda e: str(e.last_timestamp or e.event_time or ""),
                )
                reason = (
                    f"{items[-1].reason}: {items[-1].message}"
                    if items
                    else "no volume has been provisioned for it yet"
                )
                size = (claim.spec.resources.requests or {}).get("storage", "?")
                storage_class = claim.spec.storage_class_name or "the default StorageClass"
                return (
                    f"volume claim {claim.metadata.name} ({size}, {storage_class}) is "
                    f"Pending — {reason}"
                )
        return None

    def install(self, spec: TeamSpec) -> None:
        """Install or upgrade (the same call) the team's vCluster at the configured chart
        version."""
        settings = self.settings
        host = settings.vcluster.ingress_host.replace("{team}", spec.team)
        expose = settings.vcluster.expose
        values = vcluster_values.vcluster_values(
            spec,
            expose=expose,
            ingress_host=host if expose == "Ingress" else None,
            extra_sans=[settings.vcluster.node_address or ""] if expose == "NodePort" else [],
            plane=control_plane_of(settings, spec.team),
        )
        with tempfile.TemporaryDirectory(prefix="gpu-portal-vcluster-") as work:
            values_file = os.path.join(work, "values.yaml")
            with open(values_file, "w") as handle:
                yaml.safe_dump(values, handle)
            if settings.vcluster.installer == "helm":
                args = helm_install_args(spec, settings, values_file)
            else:
                args = cli_create_args(spec, settings, values_file)
            self._cli(args, what=f"installing vCluster {spec.vcluster_name}", cwd=work)

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
        if self.settings.vcluster.installer == "helm":
            args = ["uninstall", spec.vcluster_name, "--namespace", spec.namespace]
        else:
            # The portal owns the namespace and polls for the pods to go.
            args = [
                "delete",
                spec.vcluster_name,
                "--namespace",
                spec.namespace,
                "--wait=false",
                "--auto-delete-namespace=false",
            ]
        self._cli([*args, "--ignore-not-found"], what=f"deleting vCluster {spec.vcluster_name}")
        return self._observe_gone(spec)

    def _observe_gone(self, spec: TeamSpec) -> Observation:
        if self._control_plane_pods(spec):
            return Observation(PROGRESSING, f"vCluster {spec.vcluster_name} is being deleted")
        return Observation(DONE, f"vCluster {spec.vcluster_name} deleted")

    def _cli(self, args: list[str], *, what: str, cwd: str | None = None) -> None:
        env = dict(os.environ)
        # The CLI runs helm from PATH and checks for a newer release of itself online.
        env.setdefault("VCLUSTER_SKIP_VERSION_CHECK", "true")
        helm_dir = os.path.dirname(self.settings.helm_cli)
        if helm_dir:
            env["PATH"] = helm_dir + os.pathsep + env.get("PATH", "")
        helm = self.settings.vcluster.installer == "helm"
        executable = self.settings.helm_cli if helm else self.settings.vcluster.cli
        if self.settings.kubeconfig:
            env["KUBECONFIG"] = self.settings.kubeconfig
        if self.settings.kube_context:
            args = [*args, "--kube-context" if helm else "--context", self.settings.kube_context]
        self.kube.requests += 1
        self.kube.calls["cli"] += 1
        started = time.perf_counter()
        try:
            self._run(executable, args, env=env, what=what, cwd=cwd)
        finally:
            self.kube.cli_seconds.append(time.perf_counter() - started)

    def _run(
        self, executable: str, args: list[str], *, env: dict[str, str], what: str, cwd: str | None
    ) -> None:
        if not shutil.which(executable):
            raise BackendError(f"{what}: {executable} is not installed")
        # Its own process group: at the time-out the helm it started goes with it.
        process = subprocess.Popen(  # noqa: S603 - a configured executable, no shell
            [executable, *args],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
            cwd=cwd,
            start_new_session=True,
        )
        try:
            stdout, stderr = process.communicate(timeout=self.settings.vcluster.timeout_seconds)
        except subprocess.TimeoutExpired as exc:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGKILL)
            process.communicate()
            raise BackendError(
                f"{what}: `{Path(executable).name} {args[0]}` did not finish in "
                f"{self.settings.vcluster.timeout_seconds:.0f}s"
            ) from exc
        result = subprocess.CompletedProcess(process.args, process.returncode, stdout, stderr)
        if result.returncode != 0:
            stderr = ANSI.sub("", result.stderr or result.stdout).strip()[-800:]
            raise BackendError(
                f"{what}: {Path(executable).name} exited with {result.returncode}: {stderr}"
            )


def control_plane_of(settings: Settings, team: str = "") -> vcluster_values.ControlPlane:
    oidc = None
    if settings.kubeconfigs.mode == "oidc" and settings.oidc_issuer:
        oidc = vcluster_values.OidcSignIn(
            issuer=settings.oidc_issuer,
            client_id=settings.kubeconfigs.oidc_client_id or settings.oidc_client_id,
            groups_claim=settings.oidc_groups_claim,
            admin_group=settings.oidc_admin_group,
            lead_group=settings.oidc_team_group_pattern.replace("{team}", team),
            admin_role=settings.kubeconfigs.admin_role,
            lead_role=settings.kubeconfigs.lead_role,
        )
    return vcluster_values.ControlPlane(
        oidc=oidc,
        image_registry=settings.vcluster.image_registry,
        telemetry=settings.vcluster.telemetry,
        cpu_request=settings.vcluster.cpu_request,
        memory_request=settings.vcluster.memory_request,
        memory_limit=settings.vcluster.memory_limit,
        storage_size=settings.vcluster.storage_size,
        storage_class=settings.vcluster.storage_class,
    )


def helm_install_args(spec: TeamSpec, settings: Settings, values_file: str) -> list[str]:
    """`helm upgrade --install` from a chart repository, an OCI repository or an archive."""
    source = settings.vcluster.chart_repo
    version = settings.chart_version
    if source.startswith("oci://"):
        chart = [source.rstrip("/") + "/vcluster", "--version", version]
    elif source.startswith("/"):
        chart = [source]  # its version is checked against the setting at start
    else:
        chart = ["vcluster", "--repo", source, "--version", version]
    return [
        "upgrade",
        "--install",
        spec.vcluster_name,
        *chart,
        "--namespace",
        spec.namespace,
        "--values",
        values_file,
    ]


def cli_create_args(spec: TeamSpec, settings: Settings, values_file: str) -> list[str]:
    """`vcluster create --upgrade`: the CLI runs helm with the same chart source."""
    source = settings.vcluster.chart_repo
    version = settings.chart_version
    if source.startswith("/"):
        chart = ["--local-chart-dir", source]
    elif source.startswith("oci://"):
        # The CLI hands a chart path to helm as is (without the version), so the exact
        # chart reference goes there.
        chart = ["--local-chart-dir", source.rstrip("/") + "/vcluster:" + version]
    else:
        chart = ["--chart-repo", source]
    return [
        "create",
        spec.vcluster_name,
        "--namespace",
        spec.namespace,
        "--values",
        values_file,
        "--connect=false",
        "--chart-version",
        version,
        *chart,
        "--upgrade",
    ]


def _ready(pod: Any) -> bool:
    conditions = (pod.status.conditions or []) if pod.status else []
    return any(c.type == "Ready" and c.status == "True" for c in conditions)
