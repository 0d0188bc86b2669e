"""The simulated cluster divides the pool as KAI does: the demo's gauges show the numbers
the portal's calculator explains, checked here against KAI's own answers."""

from __future__ import annotations

import math
import random

import numpy as np
import pytest

from app.adapters import simulated
from app.adapters.simulated import SimulatedBackend
from app.core.models import Step
from app.provisioning.backend import ResourceQuota, TeamSpec
from app.usage.fairshare import QueueInput, fair_shares, usable
from tests.usage.test_golden import CASES

UNLIMITED = ResourceQuota(0.0, -1.0, 1.0)


def _spec(queue: QueueInput, pool: float) -> TeamSpec:
    return TeamSpec(
        team=queue.name,
        namespace=f"vcluster-{queue.name}",
        vcluster_name=queue.name,
        queue_name=queue.name,
        parent_queue="org",
        priority=queue.priority,
        resources=(
            ("gpu", ResourceQuota(queue.quota, queue.limit, queue.weight)),
            ("cpu", UNLIMITED),
            ("memory", UNLIMITED),
        ),
        org_resources=(
            ("gpu", ResourceQuota(pool, -1.0, 1.0)),
            ("cpu", UNLIMITED),
            ("memory", UNLIMITED),
        ),
    )


@pytest.mark.parametrize(("case", "pool", "queues", "expected"), CASES, ids=[c[0] for c in CASES])
def test_the_simulated_cluster_allocates_kai_fair_shares(
    case: str,
    pool: float,
    queues: list[QueueInput],
    expected: dict[str, float],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    demands = {q.name: q.demand for q in queues}
    monkeypatch.setattr(
        simulated._QueueColumns,
        "demand",
        lambda columns, _now: np.array([demands[name] for name in columns.specs]),
    )
    backend = SimulatedBackend(step_seconds=0)
    for queue in queues:  # created in the golden case's order: KAI's ties go to the older
        backend.apply(Step.QUEUE, _spec(queue, pool))
    got = backend.usage([q.name for q in queues])
    for queue in queues:
        # KAI's fair share (its own code's answer), used up to the limit and the demand.
        want = math.floor(usable(queue, expected[queue.name]) * 100 + 1e-6) / 100
        assert got[queue.name].allocated_gpu == pytest.approx(want, abs=1e-9), case
    if sum(max(q.quota, 0) for q in queues) <= pool and all(q.quota >= 0 for q in queues):
        # Guarantees within the pool, as the portal keeps them: never more than the pool.
        assert sum(u.allocated_gpu for u in got.values()) <= pool + 1e-9


def test_the_design_source_three_teams_share_one_gpu_as_kai_does(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """0.33 each, limit 1, weight 1, all busy on one GPU: KAI gives the leftover hundredth
    to the oldest queue (0.34 / 0.33 / 0.33), not a third of the idle GPU to each."""
    monkeypatch.setattr(
        simulated._QueueColumns, "demand", lambda columns, _now: np.full(len(columns.specs), 1.2)
    )
    backend = SimulatedBackend(step_seconds=0)
    for name in ("nlp", "vision", "recommender"):
        backend.apply(Step.QUEUE, _spec(QueueInput(name, 0.33, 1.0, 1.0), 1.0))
    got = backend.usage(["nlp", "vision", "recommender"])
    assert [got[n].allocated_gpu for n in ("nlp", "vision", "recommender")] == [0.34, 0.33, 0.33]


@pytest.mark.parametrize("seed", range(6))
def test_thousands_of_queues_are_divided_as_queue_by_queue(seed: int) -> None:
    """The simulator divides the teams' level over columns: on random orgs of up to 3,000
    queues (mixed priorities, unlimited and capped limits, idle and busy), each queue gets
    exactly the doubles the queue-by-queue division gives."""
    rng = random.Random(seed)
    queues = [
        QueueInput(
            f"q{i}",
            quota=rng.choice([0.0, 0.1, 0.33, 0.5, 1.0, -1.0]),
            limit=rng.choice([-1.0, 0.5, 1.0, 2.0, 4.0]),
            weight=rng.choice([0.0, 0.5, 1.0, 3.0]),
            priority=rng.choice([50, 100, 100, 200]),
            demand=rng.choice([0.0, 0.2, 1.0, 2.5, rng.random() * 5]),
            order=i,
        )
        for i in range(rng.choice([1, 10, 400, 3000]))
    ]
    pool = rng.choice([1.0, 8.0, 100.0, 1000.0])
    specs = {q.name: _spec(q, pool) for q in queues}
    demand = {q.name: q.demand for q in queues}
    total = rng.choice([pool, pool * 2])
    org = QueueInput("org", pool, -1.0, 1.0, children=tuple(queues))
    fair = fair_shares(total, [org])
    want = {q.name: usable(q, fair[q.name]) for q in queues}
    columns = simulated._QueueColumns.of(specs)
    asked = np.array([demand[name] for name in specs], dtype=np.float64)
    used = simulated._share(columns, asked, total).tolist()
    assert dict(zip(specs, used, strict=True)) == want
