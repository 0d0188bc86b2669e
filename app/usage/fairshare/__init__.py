"""KAI Scheduler's fair share: the rule as KAI's proportion plugin computes it, a queue
at a time (``rule``, what a reader checks against KAI's code), and the same division of
one level over columns (``columns``, the fast path for an org of many teams), held bit for
bit equal by their tests."""

from app.usage.fairshare.columns import Columns, can_use_columns, columns_of, divide_columns
from app.usage.fairshare.rule import (
    UNLIMITED,
    QueueInput,
    Step,
    Trace,
    can_use,
    divide,
    fair_shares,
    request_of,
    requestable,
    usable,
)

__all__ = [
    "UNLIMITED",
    "Columns",
    "QueueInput",
    "Step",
    "Trace",
    "can_use",
    "can_use_columns",
    "columns_of",
    "divide",
    "divide_columns",
    "fair_shares",
    "request_of",
    "requestable",
    "usable",
]
