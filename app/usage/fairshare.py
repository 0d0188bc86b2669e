"""KAI Scheduler's fair share, as its proportion plugin computes it, per resource.

KAI promises a fair-share simulator in its documentation but does not ship one; this is
one, following `resource_division.go` of KAI v0.13.0 step by step (and checked against
that code's own answers for 400 cases, ../shared/golden/):

1. Deserved: each queue gets min(quota, requestable), where requestable is its request
   capped by its limit (quota -1 means the whole amount).
2. Over quota, priority groups from the highest down: in rounds, each queue that is not
   satisfied and has weight > 0 is offered `left x (w / Σw) / Σ(w / Σw)`, the weights
   normalised the way KAI does it. A queue whose remaining request fits takes exactly it;
   otherwise it takes the offer rounded *down to a whole number* and remembers the
   fraction it was denied. Another round runs only if some queue took less than it was
   offered. A group of one queue is no exception, and a queue of weight 0 gets nothing.
3. Leftovers, after the rounds of every group: group by group from the highest priority,
   pieces of min(1, left) go to the largest denied fractions first (ties: the older
   queue, then the name), not capped by limit or request.

It is applied level by level: a parent's fair share is what its children divide, and a
parent's request is the sum of its children's requests (not capped by their limits, as
KAI adds every job's request to each ancestor queue). The arithmetic is KAI's, in the
same order, floating-point residue included: the portal shows what KAI will do, and
beside it what a team can actually use.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

UNLIMITED = -1.0


@dataclass(frozen=True, slots=True)
class QueueInput:
    name: str
    quota: float
    limit: float
    weight: float
    priority: int = 100
    demand: float = 0.0
    order: int = 0  # creation order: older queues win ties
    children: tuple[QueueInput, ...] = field(default=())


@dataclass(slots=True)
class _Share:
    queue: QueueInput
    request: float
    requestable: float
    fair: float = 0.0

    @property
    def remaining(self) -> float:
        """KAI's remaining requested: what it can still request beyond its fair share."""
        return 0.0 if self.requestable < self.fair else self.requestable - self.fair

    def satisfied(self) -> bool:
        if self.request <= self.fair:
            return True
        return self.queue.limit != UNLIMITED and self.queue.limit <= self.fair


def request_of(queue: QueueInput) -> float:
    """A parent's request is the sum of its children's requests, not capped by their limits."""
    if not queue.children:
        return queue.demand
    return sum(request_of(child) for child in queue.children)


def requestable(queue: QueueInput) -> float:
    request = request_of(queue)
    return request if queue.limit == UNLIMITED else min(queue.limit, request)


def divide(total: float, queues: list[QueueInput]) -> dict[str, float]:
    """Fair share of every queue in ``queues`` (one level) out of ``total``."""
    shares = [
        _Share(q, request_of(q), requestable(q))
        for q in sorted(queues, key=lambda q: (q.order, q.name))
    ]
    left = total
    for share in shares:
        deserved = total if share.queue.quota == UNLIMITED else share.queue.quota
        amount = min(deserved, share.requestable)
        share.fair += amount
        left -= amount
    if left > 0:
        _over_quota(left, shares)
    return {s.queue.name: s.fair for s in shares}


def _over_quota(left: float, shares: list[_Share]) -> float:
    priorities = sorted({s.queue.priority for s in shares}, reverse=True)
    denied: dict[int, dict[str, tuple[_Share, float]]] = {}
    for priority in priorities:
        group = [s for s in shares if s.queue.priority == priority]
        left, denied[priority] = _up_to_fair_share(left, group)
    for priority in priorities:
        if left <= 0:
            break
        if denied[priority]:
            left = _leftovers(left, denied[priority])
    return left


def _leftovers(left: float, denied: dict[str, tuple[_Share, float]]) -> float:
    """Pieces of at most one to the largest denied fractions; the older queue wins ties."""
    for share, _fraction in sorted(
        denied.values(), key=lambda d: (-d[1], d[0].queue.order, d[0].queue.name)
    ):
        if left == 0:
            break
        piece = min(1.0, left)
        share.fair += piece
        left -= piece
    return left


def _up_to_fair_share(
    left: float, group: list[_Share]
) -> tuple[float, dict[str, tuple[_Share, float]]]:
    denied: dict[str, tuple[_Share, float]] = {}
    while True:
        another_round = False
        to_give = left
        total_weight = sum(s.queue.weight for s in group if s.remaining > 0)
        if total_weight == 0:
            break
        weights: dict[str, float] = {}
        weight_sum = 0.0
        for share in group:
            if share.satisfied():
                continue
            # KAI: max(0, nWeight + kValue * (nWeight - usage)); kValue is 0 unless
            # time-aware fairness is configured.
            normalised = share.queue.weight / total_weight
            weights[share.queue.name] = max(0.0, normalised + 0.0 * normalised)
            weight_sum += weights[share.queue.name]
        if weight_sum == 0:
            break
        for share in group:
            if left == 0:
                break
            if share.satisfied():
                continue
            wanted = share.remaining
            if share.queue.weight == 0:
                continue
            offer = to_give * (weights[share.queue.name] / weight_sum)
            if wanted <= offer:
                given = wanted
                denied.pop(share.queue.name, None)
            else:
                given = max(0.0, float(math.floor(offer)))
                if offer - given > 0:
                    denied[share.queue.name] = (share, offer - given)
            if given == 0:
                continue
            share.fair += given
            left -= given
            another_round = another_round or wanted < offer
        if not another_round or left == 0:
            break
    return left, denied


def fair_shares(total: float, top_level: list[QueueInput]) -> dict[str, float]:
    """Fair share of every queue in the tree, level by level."""
    result = divide(total, top_level)
    for queue in top_level:
        if queue.children:
            result.update(fair_shares(result[queue.name], list(queue.children)))
    return result


def usable(queue: QueueInput, fair: float) -> float:
    """What a queue can actually use of its fair share: never above its limit or demand."""
    cap = queue.demand if queue.limit == UNLIMITED else min(queue.limit, queue.demand)
    return max(0.0, min(fair, cap))
