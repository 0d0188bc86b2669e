"""What the admin overview shows besides the figures of ``app.reads.overview``."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime

from app.audit.lines import EventLine
from app.core.models import (
    Org,
)
from app.core.quantities import gpus
from app.provisioning.repository import RolloutDetail
from app.web.marks import STEP_LABELS

# What each repaired step's entry ("queue: ...") was put back as, in people's words.
REPAIR_CAUSES = {
    **{step: f"{label} put back" for step, label in STEP_LABELS.items()},
    "template": "What a cluster template installs, put back inside",
}


@dataclass
class RepairGroup:
    """The repairs of one cause since the last acknowledgement: which teams, how often."""

    cause: str
    last_at: datetime
    latest: str  # the newest repair's own words
    teams: dict[str, int] = field(default_factory=dict)  # team: times, newest first


def repair_groups(lines: list[EventLine], seen_id: int) -> list[RepairGroup]:
    """The repairs after ``seen_id``, grouped by what was put back (the newest cause
    first); a repair of several steps counts in each."""
    groups: dict[str, RepairGroup] = {}
    for line in lines:  # newest first
        if line.id <= seen_id:
            continue
        entries = line.details.get("repaired") or [line.summary]
        for entry in entries if isinstance(entries, list) else [line.summary]:
            step, _, what = str(entry).partition(": ")
            cause = REPAIR_CAUSES.get(step)
            if cause is None:
                cause, what = "Other repairs", str(entry)
            group = groups.setdefault(cause, RepairGroup(cause, line.at, what))
            team = line.team or "the org"
            group.teams[team] = group.teams.get(team, 0) + 1
    return list(groups.values())


@dataclass
class PoolSummary:
    org: Org
    committed_centi: int
    allocated: float | None
    live_teams: int
    cluster_gpus: float | None = None  # the cluster's schedulable GPUs, where known
    # GPUs of the cluster no queue holds or asks for now (None: the pool alone known).
    cluster_idle: float | None = None

    @property
    def beyond_cluster(self) -> float:
        """GPUs of the pool the cluster does not have (KAI cannot keep those promises)."""
        if self.cluster_gpus is None:
            return 0.0
        return max(0.0, round(gpus(self.org.gpus_centi) - self.cluster_gpus, 2))

    @property
    def free_centi(self) -> int:
        return max(0, self.org.gpus_centi - self.committed_centi)

    @property
    def committed_pct(self) -> float:
        return 100 * self.committed_centi / self.org.gpus_centi if self.org.gpus_centi else 0.0

    @property
    def idle(self) -> float | None:
        if self.allocated is None:
            return None
        usable = gpus(self.org.gpus_centi) - self.beyond_cluster
        return max(0.0, round(usable - self.allocated, 2))


def _version_key(version: str) -> tuple[int, ...]:
    """ "0.36.1" -> (0, 36, 1): chart versions compared as numbers (a pre-release's
    suffix ignored)."""
    parts = []
    for piece in version.lstrip("v").split("-")[0].split("."):
        parts.append(int(piece) if piece.isdigit() else 0)
    return tuple(parts)


def rollout_title(version: str, detail: RolloutDetail) -> str:
    """What a rollout moves, in words: the chart (up or down to ``version``) and the
    template versions teams move to."""
    parts = []
    if detail.chart_from:
        wanted = _version_key(version)
        older = [v for v in detail.chart_from if _version_key(v) < wanted]
        newer = [v for v in detail.chart_from if _version_key(v) > wanted]
        if older and not newer:
            move = "upgrade"
        elif newer and not older:
            move = "downgrade"
        else:
            move = "move"
        parts.append(f"vCluster chart {move} to {version} (from {', '.join(detail.chart_from)})")
    if detail.templates:
        parts.append("template " + ", ".join(detail.templates))
    return "Rollout: " + (" and ".join(parts) if parts else f"vCluster chart {version}")
