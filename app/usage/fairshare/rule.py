"""KAI Scheduler's fair share, as its proportion plugin computes it, per resource.

It follows `resource_division.go` step by step (unchanged from KAI v0.13.0 to v0.17.0),
and is checked against that code's own answers: 400 cases of v0.13.0 and 418 of v0.17.0
with time-based fairshare on (../shared/golden/). KAI's own `cmd/fairshare-simulator`
(since v0.13.0) runs the scheduler's code; this one runs in the portal, per view:

1. Deserved: each queue gets min(quota, requestable), where requestable is its request
   capped by its limit (quota -1 means the whole amount).
2. Over quota, priority groups from the highest down: in rounds, each queue that is not
   satisfied and has weight > 0 is offered `left x (w / Σw) / Σ(w / Σw)`, the weights
   normalised the way KAI does it. A queue whose remaining request fits takes exactly it;
   otherwise it takes the offer rounded *down to a whole number* and remembers the
   fraction it was denied. With time-based fairshare a queue's normalised weight ``w``
   becomes ``max(0, w + kValue x (w - usage))``, usage being its past use as a fraction
   of the cluster. Another round runs only if some queue took less than it was
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
    # KAI's next tie-break, the queue's uid, where the cluster gives it (creation times
    # have one-second resolution); else the name.
    uid: str = ""
    # Time-based fairshare: the queue's past GPU usage as KAI's usage database hands it to
    # the proportion plugin (normalised to the cluster's capacity, 0 to 1).
    usage: float = 0.0
    children: tuple[QueueInput, ...] = field(default=())


@dataclass(frozen=True, slots=True)
class Step:
    """One step of the division, as the calculator took it (``trace``): what the page's
    "why this share" tells, from the same arithmetic, not a second text."""

    level: str  # what was divided: "cluster" at the top, else the parent queue's name
    kind: str  # "total", "deserved", "round", "leftover", "unassigned"
    queue: str  # "" for a level's own steps
    amount: float  # GPUs given (or divided, or left)
    priority: int = 0
    round: int = 0
    offer: float = 0.0  # a round's offer by weight (before rounding down)
    wanted: float = 0.0  # what the queue could still take
    fraction: float = 0.0  # the part of an offer rounded away (remembered for leftovers)
    quota: float = 0.0
    weight: float = 0.0  # a round's normalised weight (usage included)


Trace = list[Step]


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


def can_use(limit: float, demand: float) -> float:
    """What a queue can use at most: its demand, never above its limit (unless it has
    none). The one rule; ``columns.can_use_columns`` is the same over columns."""
    return demand if limit == UNLIMITED else min(limit, demand)


def requestable(queue: QueueInput) -> float:
    return can_use(queue.limit, request_of(queue))


def divide(
    total: float,
    queues: list[QueueInput],
    k_value: float = 0.0,
    trace: Trace | None = None,
    level: str = "cluster",
) -> dict[str, float]:
    """Fair share of every queue in ``queues`` (one level) out of ``total``. ``k_value``:
    the weight of past usage (KAI's time-based fairshare; 0 when it is off). ``trace``:
    where to record each step (for the pages' explanation)."""
    shares = [
        _Share(q, request_of(q), requestable(q))
        for q in sorted(queues, key=lambda q: (q.order, q.uid or q.name, q.name))
    ]
    if trace is not None:
        trace.append(Step(level, "total", "", total))
    left = total
    for share in shares:
        deserved = total if share.queue.quota == UNLIMITED else share.queue.quota
        amount = min(deserved, share.requestable)
        share.fair += amount
        left -= amount
        if trace is not None:
            trace.append(
                Step(
                    level,
                    "deserved",
                    share.queue.name,
                    amount,
                    quota=share.queue.quota,
                    wanted=share.requestable,
                )
            )
    if left > 0:
        left = _over_quota(left, shares, k_value, trace, level)
    if trace is not None and left > 0.0005:
        trace.append(Step(level, "unassigned", "", left))
    return {s.queue.name: s.fair for s in shares}


def _over_quota(
    left: float, shares: list[_Share], k_value: float, trace: Trace | None, level: str
) -> float:
    priorities = sorted({s.queue.priority for s in shares}, reverse=True)
    denied: dict[int, dict[str, tuple[_Share, float]]] = {}
    for priority in priorities:
        group = [s for s in shares if s.queue.priority == priority]
        left, denied[priority] = _up_to_fair_share(left, group, k_value, trace, level)
    for priority in priorities:
        if left <= 0:
            break
        if denied[priority]:
            left = _leftovers(left, denied[priority], trace, level, priority)
    return left


def _leftovers(
    left: float,
    denied: dict[str, tuple[_Share, float]],
    trace: Trace | None = None,
    level: str = "cluster",
    priority: int = 0,
) -> float:
    """Pieces of at most one to the largest denied fractions; the older queue wins ties."""
    for share, fraction in sorted(
        denied.values(),
        key=lambda d: (-d[1], d[0].queue.order, d[0].queue.uid or d[0].queue.name, d[0].queue.name),
    ):
        if left == 0:
            break
        piece = min(1.0, left)
        share.fair += piece
        left -= piece
        if trace is not None:
            trace.append(
                Step(
                    level, "leftover", share.queue.name, piece, priority=priority, fraction=fraction
                )
            )
    return left


def _up_to_fair_share(
    left: float,
    group: list[_Share],
    k_value: float,
    trace: Trace | None = None,
    level: str = "cluster",
) -> tuple[float, dict[str, tuple[_Share, float]]]:
    denied: dict[str, tuple[_Share, float]] = {}
    round_no = 0
    while True:
        round_no += 1
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
            # KAI: max(0, nWeight + kValue * (nWeight - usage)): a queue that used more
            # than its normalised weight lately gets less of what is idle, one that used
            # less gets more (kValue is 0 unless time-based fairshare is configured).
            normalised = share.queue.weight / total_weight
            weight = max(0.0, normalised + k_value * (normalised - share.queue.usage))
            weights[share.queue.name] = weight
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
            if trace is not None:
                trace.append(
                    Step(
                        level,
                        "round",
                        share.queue.name,
                        given,
                        priority=share.queue.priority,
                        round=round_no,
                        offer=offer,
                        wanted=wanted,
                        fraction=0.0 if wanted <= offer else offer - given,
                        weight=weights[share.queue.name] / weight_sum,
                    )
                )
            if given == 0:
                continue
            share.fair += given
            left -= given
            another_round = another_round or wanted < offer
        if not another_round or left == 0:
            break
    return left, denied


def fair_shares(
    total: float,
    top_level: list[QueueInput],
    k_value: float = 0.0,
    trace: Trace | None = None,
    level: str = "cluster",
) -> dict[str, float]:
    """Fair share of every queue in the tree, level by level."""
    result = divide(total, top_level, k_value, trace, level)
    for queue in top_level:
        if queue.children:
            result.update(
                fair_shares(result[queue.name], list(queue.children), k_value, trace, queue.name)
            )
    return result


def usable(queue: QueueInput, fair: float) -> float:
    """What a queue can actually use of its fair share: never above its limit or demand."""
    return max(0.0, min(fair, can_use(queue.limit, queue.demand)))
