"""Exact GPU, CPU and memory amounts: parsing what people type, formatting what they read.

Also the one source of numeric bounds: every id and stored amount is an integer column,
and PostgreSQL's ``integer`` holds at most ``DB_INT_MAX``.
"""

from __future__ import annotations

import re
from decimal import Decimal

DB_INT_MAX = 2**31 - 1
# The largest amount anyone may type (GPUs, cores, GB, weights): with two decimals and the
# x10 of CPU (millicores) and memory (MB) it stays far below DB_INT_MAX.
QUANTITY_MAX = 1_000_000
# ASCII digits, at most one dot: no signs, exponents, underscores or other scripts' digits.
_NUMBER = re.compile(r"(?:[0-9]+(?:\.[0-9]+)?|\.[0-9]+)", re.ASCII)


def is_plain_number(text: str) -> bool:
    """ASCII digits with at most one dot, as people type amounts."""
    return _NUMBER.fullmatch(text.strip()) is not None


def parse_hundredths(raw: str | float | int | None, *, what: str) -> int:
    """Parse "0.33" into 33; refuse anything but a plain non-negative number with at most
    two decimals and at most ``QUANTITY_MAX``."""
    if isinstance(raw, bool):
        raise ValueError(f"{what} must be a number such as 0.33, not {str(raw).lower()}")
    text = str(raw).strip() if raw is not None else ""
    if not text:
        raise ValueError(f"enter {what}, e.g. 0.5")
    if text.startswith("-") and _NUMBER.fullmatch(text[1:]):
        raise ValueError(f"{what} cannot be negative; enter 0 or more")
    if not _NUMBER.fullmatch(text):
        shown = text if len(text) <= 20 else text[:20] + "…"
        raise ValueError(f"{what} must be a number such as 0.33, not {shown!r}")
    value = Decimal(text)
    scaled = value * 100
    if scaled != scaled.to_integral_value():
        raise ValueError(f"{what} allows at most two decimals (e.g. 0.33, not {text})")
    if value > QUANTITY_MAX:
        raise ValueError(f"{what} can be at most {QUANTITY_MAX}")
    return int(scaled)


def gpus(centi: int) -> float:
    """A stored amount (hundredths of a GPU, the unit of every ``*_centi`` column) in GPUs,
    the unit KAI and the pages use: 33 -> 0.33."""
    return centi / 100


def format_figure(value: float | None, digits: int = 2) -> str:
    """A figure to at most ``digits`` decimals: 1.5 -> "1.5", 2.0 -> "2", None -> an en
    dash (no value)."""
    if value is None:
        return "\u2013"
    text = f"{value:.{digits}f}"
    return text.rstrip("0").rstrip(".") if "." in text else text


def format_hundredths(value: int | None) -> str:
    """33 -> "0.33", 100 -> "1", 150 -> "1.5", -5 -> "-0.05".

    In integers: a page formats two per team row, and ``Decimal`` is slow at it."""
    if value is None:
        return ""
    whole, cents = divmod(abs(value), 100)
    sign = "-" if value < 0 else ""
    if not cents:
        return f"{sign}{whole}"
    return f"{sign}{whole}." + f"{cents:02d}".rstrip("0")
