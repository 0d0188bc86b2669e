"""The division over columns (an org of thousands of teams, divided with array
arithmetic) is the queue-by-queue division bit for bit: on every golden case of KAI's own
code and on random orgs shaped to reach every branch (priorities, limits, unlimited
quotas, weight 0, past usage, rounds that run out exactly)."""

from __future__ import annotations

import random
from dataclasses import replace

import numpy as np
import pytest

from app.usage.fairshare import (
    UNLIMITED,
    QueueInput,
    can_use,
    can_use_columns,
    columns_of,
    divide,
    divide_columns,
)
from tests.usage import test_golden, test_golden_time_based


def _by_columns(total: float, queues: list[QueueInput], k_value: float) -> dict[str, float]:
    names, level = columns_of(queues)
    return dict(zip(names, (float(v) for v in divide_columns(total, level, k_value)), strict=True))


def _same_bits(got: dict[str, float], want: dict[str, float]) -> bool:
    return got.keys() == want.keys() and all(got[k].hex() == want[k].hex() for k in want)


def test_every_golden_case_alike_and_as_kai() -> None:
    compared = 0
    for case, pool, queues, expected in test_golden.CASES:
        got = _by_columns(pool, queues, 0.0)
        assert _same_bits(got, divide(pool, queues)), case
        assert got == pytest.approx(expected, abs=1e-6), case
        compared += 1
    for case, pool, k_value, queues, expected in test_golden_time_based.CASES:
        got = _by_columns(pool, queues, k_value)
        assert _same_bits(got, divide(pool, queues, k_value)), case
        assert got == pytest.approx(expected, abs=1e-6), case
        compared += 1
    assert compared == 818


def _random_org(rng: random.Random, teams: int) -> tuple[float, list[QueueInput], float]:
    queues = []
    for i in range(teams):
        quota = rng.choice([0.0, 0.0, 0.25, 0.5, 1.0, 2.0, float(rng.randint(0, 8)), -1.0])
        limit = rng.choice([-1.0, -1.0, max(quota, 0.0) + rng.choice([0.0, 0.5, 1.0, 4.0])])
        queues.append(
            QueueInput(
                name=f"team-{i:05d}",
                quota=quota if rng.random() > 0.01 else -1.0,
                limit=limit,
                weight=rng.choice([0.0, 0.5, 1.0, 1.0, 2.0, 3.0]),
                priority=rng.choice([50, 100, 100, 100, 200]),
                demand=rng.choice([0.0, 0.0, 0.5, 1.0, 2.5, float(rng.randint(0, 12))]),
                order=rng.randint(0, teams // 3),
                usage=rng.choice([0.0, 0.0, rng.random() / 10]),
            )
        )
    total = float(rng.choice([teams // 4, teams // 2, teams, teams * 2, rng.randint(1, teams)]))
    return total + rng.choice([0.0, 0.5, 0.37]), queues, rng.choice([0.0, 0.0, 1.0, 0.3])


@pytest.mark.parametrize("seed", range(40))
def test_random_orgs_alike_bit_for_bit(seed: int) -> None:
    rng = random.Random(seed)
    total, queues, k_value = _random_org(rng, rng.choice([3, 12, 60, 400, 2500]))
    assert _same_bits(_by_columns(total, queues, k_value), divide(total, queues, k_value))


@pytest.mark.parametrize("seed", range(20))
def test_random_orgs_of_one_priority_alike_bit_for_bit(seed: int) -> None:
    # An org's usual case, which the columns divide without grouping by priority.
    rng = random.Random(1000 + seed)
    total, queues, k_value = _random_org(rng, rng.choice([3, 12, 60, 400, 2500]))
    queues = [replace(q, priority=100) for q in queues]
    assert _same_bits(_by_columns(total, queues, k_value), divide(total, queues, k_value))


@pytest.mark.parametrize("seed", range(10))
def test_random_orgs_whose_past_usage_lifts_a_weight_of_0_alike_bit_for_bit(seed: int) -> None:
    # A negative kValue (or usage) can give a queue of weight 0 a normalised weight above
    # 0: the columns then keep those queues in the sums, as the loop does.
    rng = random.Random(2000 + seed)
    total, queues, _ = _random_org(rng, rng.choice([12, 60, 400]))
    queues = [replace(q, usage=rng.random() / 10) for q in queues]
    assert _same_bits(_by_columns(total, queues, -0.5), divide(total, queues, -0.5))


@pytest.mark.parametrize("seed", range(10))
def test_random_orgs_with_weights_not_in_quarters_alike_bit_for_bit(seed: int) -> None:
    # Weights in quarters sum exactly in any order (the columns then take numpy's sum);
    # these do not, and are summed one after another.
    rng = random.Random(3000 + seed)
    total, queues, k_value = _random_org(rng, rng.choice([12, 60, 400, 2500]))
    queues = [replace(q, weight=rng.choice([0.0, 0.1, 0.3, 0.7, 1.7])) for q in queues]
    if seed % 2:
        queues = [replace(q, priority=100) for q in queues]
    assert _same_bits(_by_columns(total, queues, k_value), divide(total, queues, k_value))


@pytest.mark.parametrize("k_value", [-0.5, 0.0, 1.0])
def test_every_queue_still_wanting_after_its_quota_alike_bit_for_bit(k_value: float) -> None:
    # No quotas, one priority: every queue takes part in the first round (the columns
    # as they are); weight 0 among them, and past usage that may lift it (kValue < 0).
    rng = random.Random(4000)
    queues = [
        QueueInput(
            f"team-{i:05d}",
            0.0,
            -1.0,
            rng.choice([0.0, 0.5, 1.0, 2.0]),
            100,
            rng.random() * 4 + 0.5,
            order=i,
            usage=rng.random() / 10 if k_value < 0 else 0.0,
        )
        for i in range(600)
    ]
    assert _same_bits(_by_columns(700.3, queues, k_value), divide(700.3, queues, k_value))


def test_a_round_that_runs_out_exactly_stops_where_the_loop_does() -> None:
    # 3 GPUs over quota for three queues wanting 1 each, then nothing left: the fourth
    # (priority below) gets nothing, and no fraction is remembered for it.
    queues = [QueueInput(f"q{i}", 0.0, -1.0, 1.0, 100, 1.0, order=i) for i in range(3)]
    queues.append(QueueInput("late", 0.0, -1.0, 1.0, 50, 5.0, order=9))
    assert (
        _by_columns(3.0, queues, 0.0)
        == divide(3.0, queues)
        == {
            "q0": 1.0,
            "q1": 1.0,
            "q2": 1.0,
            "late": 0.0,
        }
    )


def test_what_a_queue_can_use_is_one_rule_in_both_forms() -> None:
    """Its demand, never above its limit unless it has none: the loop's ``can_use`` and
    the columns' ``can_use_columns`` agree on every pairing, unlimited included."""
    rng = np.random.default_rng(7)
    limits = np.concatenate(([UNLIMITED, 0.0, 0.5, 1.0], rng.uniform(0, 4, 200).round(2)))
    demands = np.concatenate(([0.0, 0.25, 1.0, 3.0], rng.uniform(0, 4, 200).round(2)))
    columns = can_use_columns(limits, demands)
    pairs = zip(limits, demands, strict=True)
    assert [can_use(float(limit), float(demand)) for limit, demand in pairs] == list(columns)
    assert can_use(UNLIMITED, 3.0) == 3.0
    assert can_use(1.0, 3.0) == 1.0
