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

import numpy as np
import numpy.typing as npt

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
    none). The one rule; ``can_use_columns`` is the same over columns."""
    return demand if limit == UNLIMITED else min(limit, demand)


def can_use_columns(
    limit: npt.NDArray[np.float64], demand: npt.NDArray[np.float64]
) -> npt.NDArray[np.float64]:
    """``can_use`` of each queue (tests/usage/test_fairshare_columns.py holds them equal)."""
    return np.where(limit == UNLIMITED, demand, np.minimum(limit, demand))


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


# --- The same division over columns -------------------------------------------------
#
# One level of many queues (an org's teams) divided with array arithmetic: the same
# operations on the same doubles in the same order, so every result is bit for bit the
# one above (tests/usage/test_fairshare_columns.py holds the two to that on every golden
# case and on random orgs of thousands of teams). Sums that KAI takes one queue after
# another stay sequential (``np.add.accumulate``, never numpy's pairwise ``sum``); a
# round stops where ``left`` reaches 0 exactly, as the loop above does.


@dataclass(frozen=True, slots=True)
class Columns:
    """A level's queues, one array per input, already in KAI's order (creation order,
    then uid or name, then name): ``order[i]`` is the queue's place in ``names``' list."""

    quota: npt.NDArray[np.float64]
    limit: npt.NDArray[np.float64]
    weight: npt.NDArray[np.float64]
    priority: npt.NDArray[np.int64]
    request: npt.NDArray[np.float64]
    usage: npt.NDArray[np.float64]

    @property
    def requestable(self) -> npt.NDArray[np.float64]:
        return can_use_columns(self.limit, self.request)


def _sequential_sum(values: npt.NDArray[np.float64]) -> float:
    """Python's ``sum`` of floats, one after another (numpy's ``sum`` pairs them)."""
    return float(np.add.accumulate(values)[-1]) if len(values) else 0.0


def _sequential_minus(start: float, values: npt.NDArray[np.float64]) -> npt.NDArray[np.float64]:
    """``start`` after subtracting each value in turn: every intermediate, ``start`` first."""
    return np.subtract.accumulate(np.concatenate(([start], values)))


def divide_columns(total: float, level: Columns, k_value: float = 0.0) -> npt.NDArray[np.float64]:
    """``divide`` over columns (no trace): every queue's fair share, in ``level``'s order."""
    requestable = level.requestable
    deserved = np.where(level.quota == UNLIMITED, total, level.quota)
    fair = np.minimum(deserved, requestable)
    left = float(_sequential_minus(total, fair)[-1])
    if left <= 0:
        return fair
    denied = np.full(len(fair), np.nan)  # the fraction a queue was denied, by priority
    highest, lowest = int(level.priority.max()), int(level.priority.min())
    # One priority (an org's usual case): its group is every queue, found without a sort.
    one = highest == lowest
    priorities = [highest] if one else sorted({int(p) for p in np.unique(level.priority)})[::-1]
    for priority in priorities:
        group = None if one else np.flatnonzero(level.priority == priority)
        left = _rounds(left, group, level, requestable, fair, denied, k_value)
    for priority in priorities:
        if left <= 0:
            break
        denied_ones = ~np.isnan(denied)
        members = np.flatnonzero(denied_ones if one else (level.priority == priority) & denied_ones)
        if len(members) == 0:
            continue
        # Largest denied fraction first, ties in KAI's order (``members`` is in it).
        fractions = denied[members]
        if fractions.min() == fractions.max():
            order = members
        else:
            order = members[np.argsort(-fractions, kind="stable")]
        full = min(len(order), math.floor(left)) if left >= 1 else 0
        fair[order[:full]] += 1.0
        left -= float(full)
        if full < len(order) and left > 0:
            fair[order[full]] += left
            left = 0.0
    return fair


def _rounds(
    left: float,
    group: npt.NDArray[np.intp] | None,
    level: Columns,
    requestable: npt.NDArray[np.float64],
    fair: npt.NDArray[np.float64],
    denied: npt.NDArray[np.float64],
    k_value: float,
) -> float:
    """``_up_to_fair_share`` over one priority group's columns (``fair`` and ``denied``
    are updated in place); returns what is left. ``group``: None for every queue."""
    if group is None:  # every queue, in order: the columns as they are, not copies
        weight, usage, wanted_all = level.weight, level.usage, requestable
    else:
        weight, usage, wanted_all = level.weight[group], level.usage[group], requestable[group]
    # A queue of weight 0 takes nothing, and where past usage cannot raise its weight
    # (kValue and usage not below 0) it adds exactly 0.0 to both sums: it is left out.
    weightless_out = k_value >= 0 and not bool(np.any(usage < 0))
    # Without past usage, ``w + kValue x (w - 0)`` is ``w + kValue x w`` (and ``w`` when
    # kValue is 0), never below 0: the same doubles with fewer passes.
    no_usage = weightless_out and not bool(np.any(usage))
    # Weights in quarters (an org's usual 1, 0.5 or 2): every sum of them is exact in
    # any order, so numpy's own sum gives the sequential one's double.
    quarters = weight * 4
    exact = bool(np.all(quarters == np.floor(quarters))) and (
        len(weight) * float(np.max(quarters, initial=0.0)) < 2.0**50
    )
    while True:
        to_give = left
        # ``group`` None: every queue still takes, in order (slices, not index arrays).
        mine = fair if group is None else fair[group]
        # A queue with nothing left to want (its request or its limit reached: exactly
        # the queues the loop above calls satisfied) never takes again: each round runs
        # over the others only, in the same order, so every sum adds the same values one
        # after another (at 10,000 teams most are satisfied after the first rounds).
        unsatisfied = wanted_all > mine
        if weightless_out:
            unsatisfied &= weight != 0
        if not unsatisfied.all():
            kept = np.flatnonzero(unsatisfied)
            group = kept if group is None else group[kept]
            weight = weight[kept]
            if not no_usage:
                usage = usage[kept]
            wanted_all, mine = wanted_all[kept], mine[kept]
        remaining = wanted_all - mine
        total_weight = float(weight.sum()) if exact else _sequential_sum(weight)
        if total_weight == 0:
            break
        normalised = weight / total_weight
        if no_usage:
            weights = normalised if k_value == 0 else normalised + k_value * normalised
        else:
            weights = np.maximum(0.0, normalised + k_value * (normalised - usage))
        weight_sum = _sequential_sum(weights)
        if weight_sum == 0:
            break
        if weightless_out:  # every queue left takes
            taking, wanted, offered = None, remaining, weights
        else:
            taking = np.flatnonzero(weight != 0)
            wanted, offered = remaining[taking], weights[taking]
        offer = to_give * (offered / weight_sum)
        fits = wanted <= offer
        given = np.where(fits, wanted, np.maximum(0.0, np.floor(offer)))
        lefts = _sequential_minus(left, given)
        # The loop stops before the first queue it meets with nothing left. Nothing given
        # is below 0, so ``left`` only falls: above 0 at the end, it never met 0.
        if lefts[-1] > 0:
            cut = len(wanted)
        else:
            empty = np.flatnonzero(lefts[:-1] == 0)
            cut = int(empty[0]) if len(empty) else len(wanted)
            wanted, offer, fits, given = wanted[:cut], offer[:cut], fits[:cut], given[:cut]
        left = float(lefts[cut])
        fraction = offer - given
        # Denied: nothing once it fits, else the fraction it was refused (where above 0).
        told = fits | (fraction > 0)
        value = np.where(fits, np.nan, fraction)
        # Every queue in order: slices (views), not index arrays.
        at = slice(0, cut) if taking is None else taking[:cut]
        where = at if group is None else group[at]
        was = denied[where]
        np.copyto(was, value, where=told)
        if not isinstance(where, slice):
            denied[where] = was
        fair[where] += given
        # Another round only if a queue took less than offered: one that fits takes
        # what it wants, above 0 (its request above what it has).
        if not bool(np.any(wanted < offer)) or left == 0:
            break
    return left


def columns_of(queues: list[QueueInput]) -> tuple[list[str], Columns]:
    """A level's queues as columns, in KAI's order (their names in the same order)."""
    ordered = sorted(queues, key=lambda q: (q.order, q.uid or q.name, q.name))
    return [q.name for q in ordered], Columns(
        quota=np.array([q.quota for q in ordered], dtype=np.float64),
        limit=np.array([q.limit for q in ordered], dtype=np.float64),
        weight=np.array([q.weight for q in ordered], dtype=np.float64),
        priority=np.array([q.priority for q in ordered], dtype=np.int64),
        request=np.array([request_of(q) for q in ordered], dtype=np.float64),
        usage=np.array([q.usage for q in ordered], dtype=np.float64),
    )
