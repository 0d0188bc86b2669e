"""KAI's division of one level over columns: the same operations on the same doubles in
the same order as the readable loop in ``rule``, so every result is bit for bit the
loop's (tests/usage/test_fairshare_columns.py holds the two to that on every golden case
and on random orgs of thousands of teams). Sums that KAI takes one queue after another
stay sequential (``np.add.accumulate``, never numpy's pairwise ``sum``); a round stops
where ``left`` reaches 0 exactly, as the loop does. The fast path of an org of many
teams; the loop is the rule a reader checks."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from app.usage.fairshare.rule import UNLIMITED, QueueInput, request_of


def can_use_columns(
    limit: npt.NDArray[np.float64], demand: npt.NDArray[np.float64]
) -> npt.NDArray[np.float64]:
    """``can_use`` of each queue (tests/usage/test_fairshare_columns.py holds them equal)."""
    return np.where(limit == UNLIMITED, demand, np.minimum(limit, demand))


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
