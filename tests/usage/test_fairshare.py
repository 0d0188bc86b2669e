"""Worked examples of KAI's fair share (proportion plugin semantics)."""

from __future__ import annotations

import pytest

from app.usage.fairshare import UNLIMITED, QueueInput, divide, fair_shares, usable


def team(
    name: str,
    demand: float,
    *,
    quota: float = 0.33,
    limit: float = 1.0,
    weight: float = 1.0,
    priority: int = 100,
    order: int = 0,
) -> QueueInput:
    return QueueInput(name, quota, limit, weight, priority, demand, order)


def rounded(shares: dict[str, float]) -> dict[str, float]:
    return {k: round(v, 6) for k, v in shares.items()}


def test_design_source_all_busy_oldest_takes_the_leftover() -> None:
    shares = divide(
        1.0, [team("nlp", 1, order=1), team("vision", 1, order=2), team("recommender", 1, order=3)]
    )
    assert rounded(shares) == {"nlp": 0.34, "vision": 0.33, "recommender": 0.33}


def test_design_source_only_one_busy_takes_the_whole_gpu() -> None:
    shares = divide(
        1.0, [team("nlp", 1, order=1), team("vision", 0, order=2), team("recommender", 0, order=3)]
    )
    assert rounded(shares) == {"nlp": 1.0, "vision": 0.0, "recommender": 0.0}


def test_two_busy_split_what_the_idle_one_leaves() -> None:
    shares = divide(
        1.0, [team("nlp", 1, order=1), team("vision", 1, order=2), team("recommender", 0, order=3)]
    )
    # 0.33 each, then 0.34 offered 0.17/0.17: floored to 0, leftovers whole to the oldest.
    assert rounded(shares) == {"nlp": 0.67, "vision": 0.33, "recommender": 0.0}


def test_weights_with_whole_numbers_floor_not_proportion() -> None:
    shares = divide(
        1.0, [team("a", 5, quota=0, weight=3, order=1), team("b", 5, quota=0, weight=1, order=2)]
    )
    assert rounded(shares) == {"a": 1.0, "b": 0.0}


def test_weights_split_proportionally_when_gpus_are_whole() -> None:
    shares = divide(
        8.0,
        [
            team("a", 10, quota=0, limit=10, weight=3, order=1),
            team("b", 10, quota=0, limit=10, weight=1, order=2),
        ],
    )
    assert rounded(shares) == {"a": 6.0, "b": 2.0}


def test_limits_cap_the_rounds_and_the_rest_flows_on() -> None:
    shares = divide(
        8.0,
        [
            team("capped", 10, quota=1, limit=2, order=1),
            team("open", 10, quota=1, limit=10, order=2),
        ],
    )
    assert rounded(shares) == {"capped": 2.0, "open": 6.0}


def test_zero_weight_gets_nothing_over_quota() -> None:
    shares = divide(
        4.0,
        [
            team("zero", 4, quota=1, limit=4, weight=0, order=1),
            team("one", 4, quota=1, limit=4, weight=1, order=2),
        ],
    )
    assert rounded(shares) == {"zero": 1.0, "one": 3.0}


def test_higher_priority_is_served_first() -> None:
    shares = divide(
        4.0,
        [
            team("low", 4, quota=1, limit=4, priority=50, order=1),
            team("high", 4, quota=1, limit=4, priority=125, order=2),
        ],
    )
    assert rounded(shares) == {"low": 1.0, "high": 3.0}


def test_demand_below_quota_is_not_reserved() -> None:
    shares = divide(
        2.0,
        [team("idle", 0.2, quota=1, limit=2, order=1), team("busy", 5, quota=1, limit=2, order=2)],
    )
    assert rounded(shares) == {"idle": 0.2, "busy": 1.8}


def test_unlimited_quota_means_the_whole_amount() -> None:
    shares = divide(
        3.0,
        [
            team("all", 2, quota=UNLIMITED, limit=UNLIMITED, order=1),
            team("b", 5, quota=0, limit=UNLIMITED, order=2),
        ],
    )
    assert rounded(shares) == {"all": 2.0, "b": 1.0}


def test_leftover_pieces_ignore_the_limit_a_kai_quirk() -> None:
    # 0.01 is left after the guarantees; the offers (0.0033 each) floor to 0, and the
    # leftover goes whole to the oldest queue, past its limit of 0.335.
    queues = [team(n, 1, quota=0.33, limit=0.335, order=i) for i, n in enumerate("abc")]
    shares = divide(1.0, queues)
    assert rounded(shares) == {"a": 0.34, "b": 0.33, "c": 0.33}
    assert usable(queues[0], shares["a"]) == pytest.approx(0.335)


def test_what_a_limit_leaves_unused_stays_unused() -> None:
    shares = divide(
        2.5, [team("a", 9, quota=1, limit=1.2, order=1), team("b", 9, quota=1, limit=1.2, order=2)]
    )
    assert rounded(shares) == {"a": 1.2, "b": 1.2}


def test_hierarchy_divides_the_parents_share() -> None:
    org = QueueInput(
        "ml-org",
        quota=1,
        limit=UNLIMITED,
        weight=1,
        order=1,
        children=(
            team("nlp", 1, order=1),
            team("vision", 1, order=2),
            team("recommender", 1, order=3),
        ),
    )
    other = QueueInput(
        "default-parent-queue",
        0,
        UNLIMITED,
        1,
        order=0,
        children=(team("default-queue", 0, quota=0, limit=UNLIMITED),),
    )
    shares = fair_shares(1.0, [org, other])
    assert round(shares["ml-org"], 6) == 1.0
    assert rounded({k: shares[k] for k in ("nlp", "vision", "recommender")}) == {
        "nlp": 0.34,
        "vision": 0.33,
        "recommender": 0.33,
    }


def test_usable_is_capped_by_limit_and_demand() -> None:
    queue = team("a", 0.5, quota=0.33, limit=1)
    assert usable(queue, 1.0) == 0.5
    assert usable(team("a", 3, quota=0.33, limit=1), 1.0) == 1.0


def test_a_queue_alone_takes_at_most_its_request() -> None:
    """KAI's own unit test: one queue, 3 GPUs, request 2 -> fair share 2, not 3."""
    assert divide(3.0, [team("only", 2, quota=0, limit=UNLIMITED)]) == {"only": 2.0}


def test_a_queue_alone_offered_a_fraction_takes_it_rounded_down() -> None:
    """Alone with 2.5 GPUs left and a request of 4: the offer is floored to 2, then the
    denied half comes back as a leftover piece."""
    assert divide(2.5, [team("only", 4, quota=0, limit=UNLIMITED)]) == {"only": 2.5}


def test_a_queue_alone_with_weight_zero_gets_nothing_over_quota() -> None:
    assert divide(3.0, [team("only", 3, quota=1, limit=UNLIMITED, weight=0)]) == {"only": 1.0}


def test_a_parents_request_is_not_capped_by_its_childrens_limits() -> None:
    """Two children asking 3 GPUs each with a limit of 1: the parent still requests 6, so it
    competes for 4 of the 8 GPUs (capped requests would have given it 2 and `other` 6)."""
    children = (team("a", 3, quota=0, limit=1), team("b", 3, quota=0, limit=1, order=1))
    parent = QueueInput("org", 0, UNLIMITED, 1.0, children=children)
    other = team("other", 8, quota=0, limit=UNLIMITED, order=1)
    shares = fair_shares(8.0, [parent, other])
    assert shares["org"] == 4.0
    assert shares["other"] == 4.0
    assert shares["a"] == 1.0
    assert shares["b"] == 1.0


def test_an_idle_parent_gets_only_what_its_children_request() -> None:
    """The org queue with a quota of the whole pool deserves only what its teams request."""
    children = (team("nlp", 1, quota=0.33), team("vision", 0, quota=0.33, order=1))
    parent = QueueInput("ml-org", 8.0, UNLIMITED, 1.0, children=children)
    assert fair_shares(8.0, [parent])["ml-org"] == 1.0
