"""The org's division over columns (what pages and previews read) gives every team the
figures of the queue-by-queue division (the one checked against KAI's own answers and
whose steps the pages explain), bit for bit: with and without KAI's top level, with
time-based fairshare, KAI's own figures from Prometheus, teams not ready or unreported;
and a decision's changes patched into the ready columns divide as the rows rebuilt."""

from __future__ import annotations

import random
import threading
from dataclasses import replace

import numpy as np
import pytest

from app.usage.division import DIVIDING, Division, OrgInputs, divide_org
from app.usage.fairshare import Step
from app.usage.service import Model, TeamQuota
from app.usage.sources import ClusterTop, QueueUsage, TopQueue

PARENT = "org"


def _org(
    rng: random.Random, teams: int
) -> tuple[list[TeamQuota], dict[str, QueueUsage], Model, dict[str, float] | None]:
    rows = [
        TeamQuota(
            i,
            f"t{i}",
            rng.choice([0, 25, 100, 200]),
            rng.choice([100, 300, 800, 1000]),
            rng.choice([0, 50, 100, 200]),
            rng.choice([50, 100, 200]),
            created=rng.randint(0, teams // 2),
            ready=rng.random() > 0.1,
        )
        for i in range(teams)
    ]
    usage = {
        row.queue_name: QueueUsage(
            rng.choice([0.0, 0.5, 1.0, 2.0]),
            rng.choice([0.0, 1.0, 2.5, 4.0]),
            reported=rng.random() > 0.05,
            created=rng.choice([None, rng.randint(0, teams)]),
            uid=rng.choice(["", f"u{rng.randint(0, teams)}"]),
            smallest_waiting=rng.choice([None, 1.0]),
        )
        for row in rows
        if rng.random() > 0.1
    }
    top = None
    if rng.random() < 0.6:
        top = ClusterTop(
            gpus=float(rng.randint(1, 3 * teams)),
            queues=(
                TopQueue(PARENT, teams, rng.choice([-1, teams]), 1, 100, 5, created=1),
                TopQueue("other", 2, -1, 1, 100, 7, created=0),
            ),
        )
    past = {row.queue_name: rng.random() / teams for row in rows if rng.random() < 0.3}
    model = Model(top=top, k_value=rng.choice([0.0, 1.0]), usage=past)
    override = (
        {row.queue_name: rng.random() for row in rows if rng.random() < 0.2}
        if rng.random() < 0.3
        else None
    )
    return rows, usage, model, override


def _same(a: Division, b: Division) -> bool:
    return all(
        np.array_equal(getattr(a, name), getattr(b, name), equal_nan=True)
        for name in ("fair_now", "if_all_busy", "usable_now", "without_history")
    )


def _by_columns_and_by_queue(
    inputs: OrgInputs, pool: int, model: Model, override: dict[str, float] | None
) -> tuple[Division, Division]:
    """The same division over columns and queue by queue (the one that records its steps)."""
    fast = divide_org(inputs, pool_centi=pool, parent=PARENT, model=model, fair_override=override)
    loop = divide_org(
        inputs,
        pool_centi=pool,
        parent=PARENT,
        model=model,
        fair_override=override,
        trace=[],
        busy_trace=[],
    )
    return fast, loop


@pytest.mark.parametrize("seed", range(60))
def test_columns_divide_as_the_queue_by_queue_division(seed: int) -> None:
    rng = random.Random(seed)
    rows, usage, model, override = _org(rng, rng.choice([1, 3, 10, 50, 300, 1500]))
    pool = rng.randint(0, 4 * len(rows) * 100)
    inputs = OrgInputs.of(rows, usage)
    fast, loop = _by_columns_and_by_queue(inputs, pool, model, override)
    assert _same(fast, loop)
    assert not np.isnan(fast.if_all_busy).any()


@pytest.mark.parametrize("seed", range(20))
def test_teams_already_in_kais_order_divide_as_the_queue_by_queue_division(seed: int) -> None:
    # Created one after another (most orgs): the columns are read as they are, not
    # reordered; past usage and kValue weigh in as in any other order.
    rng = random.Random(100 + seed)
    rows, usage, model, override = _org(rng, rng.choice([3, 50, 300, 1500]))
    rows = [replace(row, created=row.id) for row in rows]
    usage = {name: replace(u, created=None, uid="") for name, u in usage.items()}
    past = {row.queue_name: rng.random() / len(rows) for row in rows if rng.random() < 0.5}
    model = replace(model, k_value=rng.choice([0.3, 1.0]), usage=past)
    inputs = OrgInputs.of(rows, usage)
    assert inputs.in_order
    pool = rng.randint(0, 4 * len(rows) * 100)
    fast, loop = _by_columns_and_by_queue(inputs, pool, model, override)
    assert _same(fast, loop)


@pytest.mark.parametrize("seed", range(20))
def test_changes_patched_into_the_columns_divide_as_rows_rebuilt(seed: int) -> None:
    rng = random.Random(seed)
    rows, usage, model, _ = _org(rng, rng.choice([5, 40, 400]))
    changed = {
        row.id: replace(row, quota_centi=rng.choice([0, 50, 300]), priority=150)
        for row in rng.sample(rows, min(3, len(rows)))
    }
    new = TeamQuota(10_000, "new-team", 100, 200, 100, 100, created=rng.randint(0, 50))
    changes = {**changed, new.id: new}
    patched, touched = OrgInputs.of(rows, usage).changed(changes, usage)
    rebuilt = OrgInputs.of(
        [changed.get(row.id, row) for row in rows] + [replace(new, ready=False)], usage
    )
    assert sorted(touched) == sorted([patched.ids.index(team_id) for team_id in changes]), (
        "every changed row is named"
    )
    assert patched.keys == rebuilt.keys
    assert np.array_equal(patched.perm, rebuilt.perm)
    for traced in (False, True):
        a, b = (
            divide_org(
                inputs,
                pool_centi=500,
                parent=PARENT,
                model=model,
                trace=[] if traced else None,
                busy_trace=[] if traced else None,
            )
            for inputs in (patched, rebuilt)
        )
        assert _same(a, b)


def test_one_division_over_columns_at_a_time() -> None:
    # Another thread's division waits while one runs (here: while the test holds the
    # lock), then divides; the queue-by-queue division of "why this share" does not wait.
    rows, usage, model, _ = _org(random.Random(7), 50)
    model = replace(model, k_value=0.0)  # no division without past usage beside
    inputs = OrgInputs.of(rows, usage)
    done: list[Division] = []

    def divide(trace: list[Step] | None = None) -> None:
        done.append(
            divide_org(
                inputs,
                pool_centi=5000,
                parent=PARENT,
                model=model,
                trace=trace,
                busy_trace=trace,
            )
        )

    with DIVIDING:
        traced = threading.Thread(target=divide, args=([],))
        traced.start()
        traced.join(10)
        assert len(done) == 1, "the traced division does not take the lock"
        waiting = threading.Thread(target=divide)
        waiting.start()
        waiting.join(0.3)
        assert waiting.is_alive()
        assert len(done) == 1
    waiting.join(10)
    assert len(done) == 2
    assert _same(done[0], done[1])
