"""The vCluster chart's own values.schema.json, which a template's values for the
vCluster are checked against: from PORTAL_VCLUSTER_VALUES_SCHEMA, else from the chart
archive the portal installs, else pulled once with helm from the configured chart
repository or OCI registry (a mirror works: it is the same source the installs use)."""

from __future__ import annotations

import functools
import json
import subprocess
import tarfile
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from app.core.config import Settings

PULL_SECONDS = 60.0


class SchemaMissing(Exception):
    """The chart archive cannot be read or carries no values.schema.json."""


@dataclass(frozen=True)
class ValuesSchema:
    """The schema, where it came from, or why there is none."""

    schema: dict[str, Any] | None
    source: str
    problem: str = ""


@functools.lru_cache(maxsize=4)
def chart_schema(archive: Path) -> dict[str, Any]:
    """values.schema.json at the top of the chart in ``archive`` (a Helm chart .tgz)."""
    try:
        with tarfile.open(archive, "r:gz") as tar:
            member = next(
                (
                    m
                    for m in tar.getmembers()
                    if m.name.count("/") == 1 and m.name.endswith("/values.schema.json")
                ),
                None,
            )
            if member is None:
                raise SchemaMissing(f"{archive.name} carries no values.schema.json")
            handle = tar.extractfile(member)
            if handle is None:
                raise SchemaMissing(f"{archive.name}: values.schema.json is not a file")
            schema: dict[str, Any] = json.load(handle)
    except (OSError, tarfile.TarError, json.JSONDecodeError) as exc:
        raise SchemaMissing(f"the vCluster chart {archive} cannot be read: {exc}") from exc
    return schema


RETRY_SECONDS = 300.0  # a failed pull is not tried again sooner

_pulled: dict[tuple[str, str], tuple[float, ValuesSchema]] = {}
_pulling = threading.Lock()


def _pull(helm: str, source: str, version: str) -> ValuesSchema:
    """The chart's schema, pulled with helm once per source and version (a failure is
    tried again after RETRY_SECONDS: a save does not wait on a registry each time)."""
    key = (source, version)
    with _pulling:
        if key in _pulled:
            at, found = _pulled[key]
            if found.schema is not None or time.monotonic() - at < RETRY_SECONDS:
                return found
        found = _pull_once(helm, source, version)
        _pulled[key] = (time.monotonic(), found)
        return found


def _pull_once(helm: str, source: str, version: str) -> ValuesSchema:
    if source.startswith("oci://"):
        args = [helm, "pull", source.rstrip("/") + "/vcluster", "--version", version]
    else:
        args = [helm, "pull", "vcluster", "--repo", source, "--version", version]
    where = f"chart vcluster {version} from {source}"
    with tempfile.TemporaryDirectory(prefix="gpu-portal-schema-") as work:
        try:
            done = subprocess.run(  # noqa: S603 (the configured helm, fixed arguments)
                [*args, "--destination", work],
                capture_output=True,
                text=True,
                timeout=PULL_SECONDS,
                check=False,
            )
        except (OSError, subprocess.TimeoutExpired) as exc:
            return ValuesSchema(None, where, f"helm could not pull it: {exc}")
        if done.returncode != 0:
            why = (done.stderr or done.stdout).strip().splitlines()[-1:] or ["no output"]
            return ValuesSchema(None, where, f"helm could not pull it: {why[0]}")
        archives = sorted(Path(work).glob("*.tgz"))
        if not archives:
            return ValuesSchema(None, where, "helm pulled no chart archive")
        try:
            return ValuesSchema(chart_schema.__wrapped__(archives[0]), where)
        except SchemaMissing as exc:
            return ValuesSchema(None, where, str(exc))


def values_schema(settings: Settings) -> ValuesSchema:
    """The schema templates are checked against, as configured."""
    vcluster = settings.vcluster
    if vcluster.values_schema:
        path = Path(vcluster.values_schema)
        try:
            schema = json.loads(path.read_text())
        except (OSError, ValueError) as exc:
            return ValuesSchema(None, str(path), f"PORTAL_VCLUSTER_VALUES_SCHEMA: {exc}")
        if not isinstance(schema, dict):
            return ValuesSchema(None, str(path), "PORTAL_VCLUSTER_VALUES_SCHEMA is no schema")
        return ValuesSchema(schema, str(path))
    source = vcluster.chart_repo
    if source.startswith("/"):
        try:
            return ValuesSchema(chart_schema(Path(source)), Path(source).name)
        except SchemaMissing as exc:
            return ValuesSchema(None, source, str(exc))
    return _pull(vcluster.helm_cli, source, vcluster.chart_version)
