"""What the admin overview shows besides the figures of ``app.reads.overview``."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from app.audit.lines import EventLine
from app.core.models import (
    Org,
    QuotaGrant,
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


@dataclass(frozen=True)
class GrantBar:
    """One grant on the pool page's timeline: where its window lies (percent of the
    timeline's width) and what it is."""

    grant: QuotaGrant
    team: str
    left: float
    width: float
    state: str  # "running", "approved" (to come) or "waiting" (for a decision)


@dataclass(frozen=True)
class GrantTimeline:
    start: datetime
    end: datetime
    bars: list[GrantBar]
    ticks: list[tuple[float, str]]  # (percent, "Tue 08")
    base_centi: int  # every team's own guarantees in the default pool
    budget_centi: int
    peak_centi: int  # the base plus the most approved grants add at once from now on
    peak_at: datetime | None


def grant_timeline(
    found: list[QuotaGrant],
    names: Mapping[int, str],
    *,
    now: datetime,
    base_centi: int,
    budget_centi: int,
    peak: tuple[int, datetime] | None,
) -> GrantTimeline | None:
    """The grants waiting, running or to come on a timeline from now to the last end (at
    least a week), by start."""
    shown = [g for g in found if g.released_at is None and g.status in ("submitted", "approved")]
    if not shown:
        return None
    start = now
    end = max(now + timedelta(days=7), max(g.end for g in shown))
    span = (end - start).total_seconds()

    def at(moment: datetime) -> float:
        return round(max(0.0, min(1.0, (moment - start).total_seconds() / span)) * 100, 2)

    bars = []
    for g in sorted(shown, key=lambda g: (g.starts_at, g.id)):
        state = "waiting" if g.status == "submitted" else "running" if g.applied_at else "approved"
        left = at(g.starts_at)
        bars.append(GrantBar(g, names.get(g.team_id, "?"), left, max(0.5, at(g.end) - left), state))
    days = max(1, round(span / 86400 / 7))  # a label every day, or every few in a long view
    ticks, day = [], (start + timedelta(days=1)).replace(hour=0, minute=0, second=0, microsecond=0)
    while day < end:
        ticks.append((at(day), day.strftime("%a %d")))
        day += timedelta(days=days)
    added, peak_at = peak if peak is not None else (0, None)
    return GrantTimeline(
        start, end, bars, ticks, base_centi, budget_centi, base_centi + added, peak_at
    )
