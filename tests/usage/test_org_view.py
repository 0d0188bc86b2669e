"""The org view read from the division's columns says what every team's ``GpuShare``
says: the same shares, orderings and sets as when they were built team by team (random
orgs with ties in GPUs in use, teams not ready, unreported or without usage)."""

from __future__ import annotations

import math
import random
from collections.abc import Mapping
from dataclasses import replace

import pytest

from app.usage.division import Division, OrgInputs, divide_org
from app.usage.service import GpuShare, Model, OrgView, Shares, TeamQuota
from app.usage.sources import QueueUsage
from tests.usage.test_division import PARENT, _org


def built_team_by_team(division: Division) -> dict[int, GpuShare]:
    """Every share built at once from the columns as Python lists (how they were built
    before they were built on demand)."""
    inputs = division.inputs
    fair_now, busy = division.fair_now.tolist(), division.if_all_busy.tolist()
    usable, without = division.usable_now.tolist(), division.without_history.tolist()
    within = division.within_pool.tolist()
    quota, limit = inputs.quota.tolist(), inputs.limit.tolist()
    allocated, requested = inputs.allocated.tolist(), inputs.requested.tolist()
    shown, unreported = inputs.shown.tolist(), inputs.unreported.tolist()
    return {
        team_id: GpuShare(
            guaranteed=quota[i],
            limit=limit[i],
            allocated=allocated[i] if shown[i] else None,
            requested=requested[i] if shown[i] else None,
            pool=division.pool,
            unreported=unreported[i],
            fair_now=round(fair_now[i], 2) if shown[i] else None,
            usable_now=round(usable[i], 2) if shown[i] else None,
            if_all_busy=round(busy[i], 2),
            within_pool=round(within[i], 2),
            idle_elsewhere=division.idle_elsewhere,
            fair_without_history=None if math.isnan(without[i]) else round(without[i], 2),
            smallest_waiting=inputs.smallest_waiting[i] if shown[i] else None,
        )
        for i, team_id in enumerate(inputs.ids)
    }


def view_from_every_share(
    rows: list[TeamQuota], shares: Mapping[int, GpuShare]
) -> dict[str, object]:
    """The view's figures read from every team's share, one by one."""
    names = {row.id: row.name for row in rows}
    by_usage = sorted(shares, key=lambda tid: (-(shares[tid].allocated or 0.0), names[tid]))
    borrowing = frozenset(tid for tid, s in shares.items() if s.borrowed > 0)
    waiting = frozenset(tid for tid, s in shares.items() if s.pending > 0.005)
    used = [s.allocated for s in shares.values() if s.allocated is not None]
    return {
        "names": names,
        "borrowers": sorted(
            ((names[tid], s.borrowed) for tid, s in shares.items() if s.borrowed > 0.005),
            key=lambda b: -b[1],
        ),
        "allocated": round(sum(used), 2) if used else None,
        "committed_centi": sum(row.quota_centi for row in rows),
        "by_usage": tuple(by_usage),
        "borrowing": borrowing,
        "waiting": waiting,
        "by_id": {row.id: row for row in rows},
        "busy_count": sum(1 for tid in by_usage if (shares[tid].allocated or 0.0) > 0),
        "borrowing_by_usage": tuple(tid for tid in by_usage if tid in borrowing),
        "waiting_by_usage": tuple(tid for tid in by_usage if tid in waiting),
        "borrowing_by_name": tuple(sorted(borrowing, key=names.__getitem__)),
        "waiting_by_name": tuple(sorted(waiting, key=names.__getitem__)),
    }


def _near_thresholds(
    rng: random.Random, rows: list[TeamQuota], usage: dict[str, QueueUsage]
) -> dict[str, QueueUsage]:
    """Readings a hair either side of what the view counts: borrowing (any GPU above the
    guarantee), a borrower worth naming (above 0.005) and waiting (above 0.005)."""
    near = (0.0, 0.003, 0.005, 0.0051, 0.25, -0.5)
    by_queue = {row.queue_name: row for row in rows}
    return {
        queue: replace(
            reading,
            allocated_gpu=(
                allocated := max(0.0, by_queue[queue].quota_centi / 100 + rng.choice(near))
            ),
            requested_gpu=allocated + rng.choice(near[:4]),
        )
        for queue, reading in usage.items()
    }


@pytest.mark.parametrize("seed", range(40))
def test_the_view_from_columns_is_the_view_from_every_share(seed: int) -> None:
    rng = random.Random(seed)
    rows, usage, model, override = _org(rng, rng.choice([1, 2, 7, 40, 300]))
    if seed % 2:
        usage = _near_thresholds(rng, rows, usage)
    division = divide_org(
        OrgInputs.of(rows, usage),
        pool_centi=rng.randint(0, 4 * len(rows) * 100),
        parent=PARENT,
        model=model,
        fair_override=override,
    )
    shares = Shares(division)
    every = built_team_by_team(division)
    assert dict(shares) == every
    assert list(shares) == [row.id for row in rows]
    view = OrgView.of(rows, shares)
    for name, expected in view_from_every_share(rows, every).items():
        assert getattr(view, name) == expected, name
    assert view.division is division
    assert view.shares is shares


def test_a_share_holds_plain_numbers() -> None:
    """Built from numpy's columns, a share still holds Python's own floats and booleans
    (what the pages format and the API serialises), and an unknown team is not there."""
    rows = [TeamQuota(7, "nlp", 150, 300, 100, 100), TeamQuota(9, "cv", 0, 100, 100, 100)]
    usage = {rows[0].queue_name: QueueUsage(2.5, 3.0)}
    shares = Shares(
        divide_org(OrgInputs.of(rows, usage), pool_centi=400, parent=PARENT, model=Model())
    )
    share = shares[7]
    for value in (share.guaranteed, share.limit, share.allocated, share.fair_now, share.pool):
        assert type(value) is float
    assert type(share.unreported) is bool
    assert (share.guaranteed, share.allocated, share.borrowed) == (1.5, 2.5, 1.0)
    assert shares[9].allocated is None
    assert 8 not in shares
    assert shares.get(8) is None
    assert len(shares) == 2
    # Built once for the division's life: pages ask for the same shares on every view.
    assert shares[7] is share
    assert shares.get(7) is share
