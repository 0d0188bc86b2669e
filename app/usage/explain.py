"""Why a queue's fair share is what it is: the calculator's own steps (``fairshare.Trace``)
told for one queue, level by level (the cluster's division for its parent, then the
parent's among its children). The same arithmetic that made the figure, not a second
text that could drift from it."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from app.core.quantities import format_figure
from app.usage.fairshare import Trace


@dataclass(frozen=True)
class Level:
    """One division the queue took part in, told in order."""

    title: str
    lines: list[str]
    result: float
    who: str  # the queue whose share this level gives


def _n(value: float) -> str:
    if 0 < value < 0.005:
        return "less than 0.01"
    return format_figure(round(value + 1e-9, 2))


def explain(trace: Trace, queue: str, name: Callable[[str], str] = str) -> list[Level]:
    """The divisions that made ``queue``'s fair share, outermost first. ``name``: how a
    queue is called on the page (a team's queue by the team's name)."""
    parent = next((s.level for s in trace if s.queue == queue and s.kind == "deserved"), None)
    if parent is None:
        return []
    levels = []
    if parent != "cluster":
        levels += _level(trace, parent, "cluster", name)
    levels += _level(trace, queue, parent, name)
    return levels


def _level(trace: Trace, queue: str, level: str, name: Callable[[str], str]) -> list[Level]:
    steps = [s for s in trace if s.level == level]
    total = next((s.amount for s in steps if s.kind == "total"), 0.0)
    who = name(queue)
    where = "the cluster's" if level == "cluster" else f"{name(level)}'s"
    lines: list[str] = []
    deserved = {s.queue: s for s in steps if s.kind == "deserved"}
    mine = deserved[queue]
    others = sum(s.amount for q, s in deserved.items() if q != queue)
    asked = (
        "" if mine.amount >= mine.quota or mine.quota < 0 else f", as it asks for {_n(mine.wanted)}"
    )
    guarantee = "everything (no limit on its guarantee)" if mine.quota < 0 else _n(mine.quota)
    rest = len(deserved) - 1
    besides = (
        f"; the other {rest} queue{'s' if rest != 1 else ''} {_n(others)} together"
        if rest
        else f" — the only queue here{'' if level != 'cluster' else ' at the top'}"
    )
    lines.append(
        f"Guarantees first: {who} gets {_n(mine.amount)} (its guarantee is {guarantee}"
        f"{asked}){besides}."
    )
    left = total - mine.amount - others
    rounds = [s for s in steps if s.kind == "round"]
    if left <= 0.0005:
        lines.append("Nothing is left after the guarantees: no share of idle GPUs to divide.")
    for step in (s for s in rounds if s.queue == queue):
        if step.amount >= step.wanted - 1e-9:
            took = f"it still wanted {_n(step.wanted)} and took all of it"
        else:
            took = (
                f"KAI hands out whole GPUs in a round, so it took {_n(step.amount)} and "
                f"{_n(step.fraction)} was set aside for the leftovers"
            )
        lines.append(
            f"Round {step.round} of priority {step.priority}: by weight ({step.weight:.0%} "
            f"of the weights of the queues still asking) {who} was offered "
            f"{_n(step.offer)}; {took}."
        )
    if left > 0.0005 and not any(s.queue == queue for s in rounds):
        lines.append(
            f"{who} takes no part in dividing the idle GPUs: it already has what it asks for, "
            "reached its limit, or its weight is 0."
        )
    pieces = [s for s in steps if s.kind == "leftover"]
    if pieces:
        given = ", ".join(f"{name(s.queue)} +{_n(s.amount)}" for s in pieces)
        lines.append(
            f"Leftovers: what the rounds set aside goes in pieces of at most 1 GPU to the "
            f"largest set-aside parts first, ties to the older queue: {given}. KAI settles "
            "this the same way in every cycle, so it is not a passing figure."
        )
        if not any(s.queue == queue for s in pieces) and any(
            s.queue == queue and s.fraction > 0 for s in rounds
        ):
            lines.append(
                f"{who}'s set-aside part was smaller (or its queue younger) than theirs, so "
                "it got no piece."
            )
    unassigned = next((s.amount for s in steps if s.kind == "unassigned"), 0.0)
    if unassigned > 0.0005:
        lines.append(f"{_n(unassigned)} GPU stays unassigned: no queue asks for it.")
    result = mine.amount + sum(s.amount for s in rounds if s.queue == queue)
    result += sum(s.amount for s in pieces if s.queue == queue)
    return [Level(f"Dividing {where} {_n(total)} GPU", lines, result, who)]
