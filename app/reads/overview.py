"""The admin overview's org-wide figures besides usage, read in one statement: the
pool, the pending requests, the right-sizing totals, the chart rollout and the newest
drift repairs. Each domain's repository supplies its own columns; this module is where
they meet (the pages' read side, above the domains in the layer contract)."""

from __future__ import annotations

import functools
from collections.abc import Sequence
from dataclasses import dataclass
from functools import partial
from typing import Any

from sqlalchemy import ColumnElement

from app.audit import repository as audit
from app.core.events import Event
from app.core.models import (
    Org,
)
from app.core.together import Read, Rows
from app.provisioning import repository as provisioning
from app.provisioning.repository import RolloutProgress
from app.teams import repository as repo
from app.usage import repository as usage_repo


@dataclass(frozen=True)
class OverviewFigures:
    """The overview's org-wide figures besides usage: read in one statement."""

    org: Org
    pending_count: int
    rightsizing: tuple[int, int, int]  # idle teams, their idle hundredths, starved teams
    rollout: RolloutProgress | None
    repair_ids: tuple[int, ...]  # the newest drift repairs' audit events, newest first
    asleep: int = 0  # team vClusters asleep now


REPAIRS_SHOWN = 10  # the newest repairs looked at, grouped by cause on the overview


@functools.lru_cache(maxsize=4)
def _figure_groups(version: str) -> tuple[tuple[ColumnElement[Any], ...], ...]:
    # Built once per chart version: the expressions are immutable and shared by requests.
    return (
        (repo.pending_count_column(),),
        usage_repo.suggestion_totals_columns(),
        provisioning.rollout_columns(version),
        audit.newest_ids_columns(Event.DRIFT_REPAIRED, REPAIRS_SHOWN),
        (provisioning.asleep_count_column(),),
    )


@functools.lru_cache(maxsize=4)
def _figure_columns(version: str) -> tuple[ColumnElement[Any], ...]:
    return tuple(column for group in _figure_groups(version) for column in group)


def overview_figures_read(chart_version: str) -> Read[OverviewFigures]:
    """The overview's org-wide figures besides usage: one select, to run with the page's
    other reads."""
    org_read = repo.org_with(_figure_columns(chart_version))
    return Read(org_read.statement, org_read.params, partial(_figures, chart_version, org_read))


def _figures(
    chart_version: str, org_read: Read[tuple[Org, Sequence[Any]]], rows: Rows
) -> OverviewFigures:
    org, values = org_read.finish(rows)
    groups: list[Sequence[Any]] = []
    for group in _figure_groups(chart_version):  # the values, cut back into their groups
        groups.append(values[: len(group)])
        values = values[len(group) :]
    (pending,), (idle, idle_centi, starved), rollout, repairs, (asleep,) = groups
    return OverviewFigures(
        org=org,
        pending_count=int(pending),
        rightsizing=(int(idle), int(idle_centi), int(starved)),
        rollout=provisioning.rollout_from(chart_version, rollout),
        repair_ids=tuple(int(i) for i in repairs if i is not None),
        asleep=int(asleep or 0),
    )
