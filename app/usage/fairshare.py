"""KAI Scheduler's fair share, as its proportion plugin computes it, per resource.

KAI promises a fair-share simulator in its documentation but does not ship one; this is
one, written from the behaviour of `resource_division.go`:

1. Deserved: each queue gets min(quota, requestable), where requestable is its demand
   capped by its limit (quota -1 means the whole amount).
2. Over quota, priority groups from the highest down: in rounds, each unsatisfied queue
   with weight > 0 is offered `left x weight / sum(weights)`. A queue whose remaining
   demand fits takes exactly it; otherwise it takes the offer rounded *down to a whole
   number* and remembers the fraction it was denied. Another round runs only if some
   queue took less than it was offered. A group of a single queue takes everything left.
3. Leftovers: pieces of min(1, left) go to the queues with the largest denied fraction
   first (ties: the older queue, then the name), not capped by limit or demand.

It is applied level by level: a parent's fair share is what its children divide.
The quirks are kept on purpose (floating-point residue included): the portal shows what
KAI will do, and beside it what a team can actually use.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

UNLIMITED = -1.0


@dataclass(frozen=True)
class QueueInput:
    name: str
    quota: float
    limit: float
    weight: float
    priority: int = 100
    demand: float = 0.0
    order: int = 0  # creation order: older queues win ties
    children: tuple[QueueInput, ...] = field(default=())


@dataclass
class _Share:
    queue: QueueInput
    requestable: float
    fair: float = 0.0

    @property
    def remaining(self) -> float:
        return max(0.0, self.requestable - self.fair)

    def satisfied(self) -> bool:
        q = self.queue
        if self.requestable <= self.fair:
            return True
        return q.limit != UNLIMITED and q.limit <= self.fair


def demand_of(queue: QueueInput) -> float:
    """A parent's demand is what its children can request."""
    if not queue.children:
        return queue.demand
    return sum(requestable(child) for child in queue.children)


def requestable(queue: QueueInput) -> float:
    demand = demand_of(queue)
    return demand if queue.limit == UNLIMITED else min(demand, queue.limit)


def divide(total: float, queues: list[QueueInput]) -> dict[str, float]:
    """Fair share of every queue in ``queues`` (one level) out of ``total``."""
    shares = [_Share(q, requestable(q)) for q in sorted(queues, key=lambda q: (q.order, q.name))]
    left = total
    for share in shares:
        deserved = total if share.queue.quota == UNLIMITED else share.queue.quota
        amount = min(deserved, share.requestable)
        share.fair += amount
        left -= amount
    if left > 0:
        left = _over_quota(left, shares)
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
        pending = sorted(
            denied[priority].values(), key=lambda d: (-d[1], d[0].queue.order, d[0].queue.name)
        )
        for share, _fraction in pending:
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
        if len(group) == 1:
            group[0].fair += left
            return 0.0, denied
        total_weight = sum(s.queue.weight for s in group if s.remaining > 0)
        if total_weight == 0:
            break
        weights = {s.queue.name: s.queue.weight / total_weight for s in group if not s.satisfied()}
        weight_sum = sum(weights.values())
        if weight_sum == 0:
            break
        for share in group:
            if left == 0:
                break
            if share.satisfied() or share.queue.weight == 0:
                continue
            wanted = share.remaining
            offer = to_give * weights[share.queue.name] / weight_sum
            if wanted <= offer:
                given = wanted
                denied.pop(share.queue.name, None)
            else:
                given = float(math.floor(offer))
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
