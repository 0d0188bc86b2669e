"""Upstream artifacts the tests use from ../shared (never copied into the repository):
KAI Scheduler's CRDs, the vCluster charts, KAI's golden fair-share answers."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import yaml

# Beside the repository (../shared), or where PORTAL_SHARED_DIR says.
SHARED = Path(os.environ.get("PORTAL_SHARED_DIR", Path(__file__).resolve().parents[2] / "shared"))
KAI_CRDS = SHARED / "third_party" / "kai-scheduler" / "crds"


def shared(path: str) -> Path:
    """A file of the shared artifacts, or a clear error naming what to check out."""
    found = SHARED / path
    if not found.exists():
        raise FileNotFoundError(
            f"{path} is not in the shared artifacts at {SHARED}: check them out beside the "
            "repository (../shared) or set PORTAL_SHARED_DIR"
        )
    return found


def kai_crds() -> list[dict[str, Any]]:
    """KAI Scheduler's own CRDs (release v0.13.0): Queue, PodGroup, BindRequest and the
    operator's kinds."""
    folder = shared("third_party/kai-scheduler/crds")
    return [yaml.safe_load(path.read_text()) for path in sorted(folder.glob("*.yaml"))]
