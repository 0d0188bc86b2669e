"""The vCluster chart's own values.schema.json, read from a chart archive (the one the
portal installs), once per archive."""

from __future__ import annotations

import functools
import json
import tarfile
from pathlib import Path
from typing import Any


class SchemaMissing(Exception):
    """The chart archive cannot be read or carries no values.schema.json."""


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
