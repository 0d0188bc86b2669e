"""The fair share of KAI Scheduler's own code (release v0.13.0, `resource_division`), for
400 random cases kept in ../shared/golden/: the calculator must agree with every one."""

from __future__ import annotations

import pytest

from app.usage.fairshare import QueueInput, divide
from tests.shared import SHARED

GOLDEN = SHARED / "golden" / "kai-fair-share-v0.13.0.tsv"


def _cases() -> list[tuple[str, float, list[QueueInput], dict[str, float]]]:
    if not GOLDEN.exists():
        raise FileNotFoundError(
            f"KAI's golden fair-share answers are not at {GOLDEN}: check out the shared "
            "artifacts beside the repository or set PORTAL_SHARED_DIR"
        )
    rows = GOLDEN.read_text().splitlines()
    assert rows[0].split("\t") == ["case", "pool", "queues", "kai_fair_share"]
    cases = []
    for row in rows[1:]:
        case, pool, queues, answer = row.split("\t")
        inputs = []
        for order, spec in enumerate(queues.split()):
            name, quota, limit, weight, priority, demand = spec.split(":")
            inputs.append(
                QueueInput(
                    name=name,
                    quota=float(quota),
                    limit=float(limit),
                    weight=float(weight),
                    priority=int(priority),
                    demand=float(demand),
                    order=order,
                )
            )
        expected = {k: float(v) for k, v in (pair.split("=") for pair in answer.split())}
        cases.append((case, float(pool), inputs, expected))
    return cases


CASES = _cases()


def test_the_golden_file_is_whole() -> None:
    assert len(CASES) == 400


@pytest.mark.parametrize(("case", "pool", "queues", "expected"), CASES, ids=[c[0] for c in CASES])
def test_fair_share_matches_kai(
    case: str, pool: float, queues: list[QueueInput], expected: dict[str, float]
) -> None:
    got = divide(pool, queues)
    assert got == pytest.approx(expected, abs=1e-6), case
