"""Time-based fairshare: KAI v0.17.0's own `resource_division` with a kValue and each
queue's past usage, for 418 cases kept in ../shared/golden/: the calculator must agree
with every one (to 1e-6)."""

from __future__ import annotations

import pytest

from app.usage.fairshare import QueueInput, divide
from tests.shared import SHARED

GOLDEN = SHARED / "golden" / "kai-fair-share-time-based-v0.17.0.tsv"
Case = tuple[str, float, float, list[QueueInput], dict[str, float]]


def _cases() -> list[Case]:
    if not GOLDEN.exists():
        raise FileNotFoundError(
            f"KAI's golden time-based fair-share answers are not at {GOLDEN}: check out the "
            "shared artifacts beside the repository or set PORTAL_SHARED_DIR"
        )
    rows = GOLDEN.read_text().splitlines()
    assert rows[0].split("\t") == ["case", "pool", "kvalue", "queues", "kai_fair_share"]
    cases = []
    for row in rows[1:]:
        case, pool, k_value, queues, answer = row.split("\t")
        inputs = []
        for order, spec in enumerate(queues.split()):
            name, quota, limit, weight, priority, demand, usage = spec.split(":")
            inputs.append(
                QueueInput(
                    name=name,
                    quota=float(quota),
                    limit=float(limit),
                    weight=float(weight),
                    priority=int(priority),
                    demand=float(demand),
                    usage=float(usage),
                    order=order,
                )
            )
        expected = {k: float(v) for k, v in (pair.split("=") for pair in answer.split())}
        cases.append((case, float(pool), float(k_value), inputs, expected))
    return cases


CASES = _cases()


def test_the_golden_file_is_whole() -> None:
    assert len(CASES) == 418
    assert sum(1 for c in CASES if c[2] > 0 and any(q.usage > 0 for q in c[3])) > 300


@pytest.mark.parametrize(
    ("case", "pool", "k_value", "queues", "expected"), CASES, ids=[c[0] for c in CASES]
)
def test_time_based_fair_share_matches_kai(
    case: str, pool: float, k_value: float, queues: list[QueueInput], expected: dict[str, float]
) -> None:
    got = divide(pool, queues, k_value)
    assert got == pytest.approx(expected, abs=1e-6), case


def test_usage_changes_the_answer_only_through_k_value() -> None:
    """With kValue 0 usage is ignored (the 400 earlier cases); with it, a queue that used
    the cluster lately gets less of what is idle than an equal one that did not."""
    busy = QueueInput("busy", 0, -1, 1, demand=4, usage=0.9, order=0)
    idle = QueueInput("idle", 0, -1, 1, demand=4, usage=0.0, order=1)
    assert divide(4, [busy, idle]) == {"busy": 2, "idle": 2}
    shares = divide(4, [busy, idle], k_value=1.0)
    assert shares["busy"] < shares["idle"]
    assert shares["busy"] + shares["idle"] == 4
