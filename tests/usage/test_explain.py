"""The step-by-step account of a fair share is the calculator's own steps."""

from __future__ import annotations

from app.usage.explain import explain
from app.usage.fairshare import QueueInput, Trace, fair_shares


def _org(pool: float, children: list[QueueInput]) -> list[QueueInput]:
    return [QueueInput("ml-org", pool, -1, 1, children=tuple(children))]


def test_three_equal_busy_teams_on_two_gpus() -> None:
    """Same settings (0.33 guarantee, limit 1, weight 1), all busy, 2 GPUs: KAI gives
    1.33 / 0.34 / 0.33 — whole GPUs in the round, the leftovers to the oldest queue."""
    teams = [
        QueueInput(n, 0.33, 1, 1, demand=1, order=i)
        for i, n in enumerate(("nlp", "vision", "recommender"))
    ]
    trace: Trace = []
    fair = fair_shares(2, _org(2, teams), trace=trace)
    assert {k: round(v, 2) for k, v in fair.items()} == {
        "ml-org": 2,
        "nlp": 1.33,
        "vision": 0.34,
        "recommender": 0.33,
    }
    levels = explain(trace, "recommender")
    assert [lv.title for lv in levels] == [
        "Dividing the cluster's 2 GPU",
        "Dividing ml-org's 2 GPU",
    ]
    assert [round(lv.result, 2) for lv in levels] == [2, 0.33]
    lines = levels[1].lines
    assert lines[0] == (
        "Guarantees first: recommender gets 0.33 (its guarantee is 0.33); the other 2 queues "
        "0.66 together."
    )
    assert lines[1] == (
        "Round 1 of priority 100: by weight (33% of the weights of the queues still asking) "
        "recommender was offered 0.34; KAI hands out whole GPUs in a round, so it took 0 and "
        "0.34 was set aside for the leftovers."
    )
    assert lines[2].startswith(
        "Leftovers: what the rounds set aside goes in pieces of at most 1 GPU to the largest "
        "set-aside parts first, ties to the older queue: nlp +1, vision +0.01."
    )
    assert "so it got no piece" in lines[3]
    nlp = explain(trace, "nlp")[1]
    assert round(nlp.result, 2) == 1.33
    assert "nlp +1" in nlp.lines[2]
