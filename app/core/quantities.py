"""Exact GPU, CPU and memory amounts: parsing what people type, formatting what they read."""

from __future__ import annotations

from decimal import Decimal, InvalidOperation


def parse_hundredths(raw: str | float | int | None, *, what: str) -> int:
    """Parse "0.33" into 33; refuse negatives and more than two decimals."""
    text = str(raw).strip() if raw is not None else ""
    if not text:
        raise ValueError(f"enter {what}, e.g. 0.5")
    try:
        value = Decimal(text)
    except InvalidOperation:
        raise ValueError(f"{what} must be a number such as 0.33, not {text!r}") from None
    if not value.is_finite():
        raise ValueError(f"{what} must be a finite number")
    if value < 0:
        raise ValueError(f"{what} cannot be negative; enter 0 or more")
    scaled = value * 100
    if scaled != scaled.to_integral_value():
        raise ValueError(f"{what} allows at most two decimals (e.g. 0.33, not {text})")
    if scaled > 10**9:
        raise ValueError(f"{what} is too large")
    return int(scaled)


def format_hundredths(value: int | None) -> str:
    """33 -> "0.33", 100 -> "1", 150 -> "1.5"."""
    if value is None:
        return ""
    text = f"{Decimal(value) / 100:.2f}"
    return text.rstrip("0").rstrip(".") if "." in text else text
