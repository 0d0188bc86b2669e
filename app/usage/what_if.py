"""What-if: every team's shares if some teams' quotas and the pool were different. Pure:
over the org's quota rows, the cluster's readings and changes already parsed (the page
parses what the admin types; nothing here reads a form or the database)."""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import replace

from app.core.quota import Quota
from app.usage.division import Division
from app.usage.fairshare import Trace
from app.usage.impact import Impact, impact
from app.usage.model import NO_MODEL, Model, TeamQuota
from app.usage.sources import QueueUsage


def changed_rows(
    rows: Sequence[TeamQuota] | Mapping[int, TeamQuota], changes: Mapping[int, Quota]
) -> dict[int, TeamQuota]:
    """The quota rows of the changed teams, with their new values (GPU fields only: fair
    share divides GPUs). ``rows``: the org's rows, or the same by id (then only the
    changed teams are looked at)."""
    by_id = rows if isinstance(rows, Mapping) else {row.id: row for row in rows}
    return {
        team_id: replace(
            row,
            quota_centi=values.gpu.guarantee or 0,
            limit_centi=values.gpu.limit or 0,
            weight_centi=values.weight,
            priority=values.priority,
        )
        for team_id, values in changes.items()
        if (row := by_id.get(team_id)) is not None
    }


def what_if(
    rows: list[TeamQuota],
    readings: Mapping[str, QueueUsage],
    *,
    pool_centi: int,
    parent: str,
    changes: Mapping[int, Quota],
    new_pool_centi: int | None = None,
    before: Division | None = None,
    model: Model = NO_MODEL,
    after_model: Model | None = None,
    also_changed: Collection[int] = (),
    trace: Trace | None = None,
    busy_trace: Trace | None = None,
    fill: int = 0,
    by_id: Mapping[int, TeamQuota] | None = None,
) -> Impact:
    """Every team's shares now and with ``changes`` and the pool at ``new_pool_centi``;
    ``before``: today's division when already computed (the ready view's)."""
    return impact(
        rows,
        readings,
        pool_centi=pool_centi,
        parent=parent,
        new_pool_centi=None if new_pool_centi == pool_centi else new_pool_centi,
        changes=changed_rows(by_id if by_id is not None else rows, changes),
        before=before,
        model=model,
        after_model=after_model,
        also_changed=also_changed,
        trace=trace,
        busy_trace=busy_trace,
        fill=fill,
    )
