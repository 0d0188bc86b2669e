"""Validation: every bad input gets a message that says what to change."""

from __future__ import annotations

import pytest

from app.core.errors import InvalidInput
from app.core.models import Org
from app.core.quantities import format_hundredths, parse_hundredths
from app.core.quota import Line, Quota
from app.teams.rules import parse_quota, team_name_error

POOL = Org.with_pool("ml-org", {"gpu": 100, "cpu": 40_000, "memory": 160_000})

GOOD = {"gpu_quota": "0.33", "gpu_limit": "1", "over_quota_weight": "1", "priority": "100"}


@pytest.mark.parametrize(
    ("name", "message"),
    [
        ("", "enter a team name"),
        ("NLP", "use lower-case letters only: 'nlp'"),
        ("nlp_team", "DNS-1123 label"),
        ("-nlp", "DNS-1123 label"),
        ("nlp-", "DNS-1123 label"),
        ("nlp.team", "DNS-1123 label"),
        ("a" * 41, "at most 40 characters"),
        ("default", "reserved by Kubernetes"),
        ("kube-team", "reserved by Kubernetes"),
    ],
)
def test_bad_team_names_say_what_to_change(name: str, message: str) -> None:
    problem = team_name_error(name)
    assert problem is not None
    assert message in problem


@pytest.mark.parametrize("name", ["nlp", "vision-2", "a", "a" * 40, "0team"])
def test_good_team_names(name: str) -> None:
    assert team_name_error(name) is None


@pytest.mark.parametrize(
    ("overrides", "field", "message"),
    [
        ({"gpu_quota": ""}, "gpu_quota", "enter the GPU guarantee"),
        ({"gpu_quota": "abc"}, "gpu_quota", "must be a number such as 0.33, not 'abc'"),
        ({"gpu_quota": "-0.5"}, "gpu_quota", "cannot be negative"),
        ({"gpu_quota": "0.333"}, "gpu_quota", "at most two decimals (e.g. 0.33, not 0.333)"),
        ({"gpu_quota": "nan"}, "gpu_quota", "must be a number such as 0.33, not 'nan'"),
        ({"gpu_quota": "0_1"}, "gpu_quota", "must be a number such as 0.33, not '0_1'"),
        ({"gpu_quota": "\u0660.\u0665"}, "gpu_quota", "must be a number such as 0.33"),
        ({"gpu_quota": "+0.5"}, "gpu_quota", "must be a number such as 0.33"),
        ({"gpu_quota": "1."}, "gpu_quota", "must be a number such as 0.33"),
        ({"gpu_quota": True}, "gpu_quota", "must be a number such as 0.33, not 'true'"),
        ({"priority": "\u0661\u0660\u0660"}, "priority", "whole number from 1 to 1000"),
        ({"priority": True}, "priority", "whole number from 1 to 1000"),
        ({"gpu_quota": "0.8", "gpu_limit": "0.5"}, "gpu_limit", "cannot be below the guarantee"),
        ({"gpu_limit": "2"}, "gpu_limit", "cannot exceed the pool of 1 GPU: enter 1 or less"),
        ({"gpu_limit": "1e3"}, "gpu_limit", "must be a number such as 0.33, not '1e3'"),
        ({"cpu_quota": "1000000.01"}, "cpu_quota", "can be at most 1000000"),
        ({"over_quota_weight": "-1"}, "over_quota_weight", "cannot be negative"),
        ({"priority": "0"}, "priority", "whole number from 1 to 1000"),
        ({"priority": "1.5"}, "priority", "whole number from 1 to 1000"),
        ({"cpu_quota": "41"}, "cpu_quota", "cannot exceed the pool of 40 cores"),
        ({"memory_quota": "160.01"}, "memory_quota", "cannot exceed the pool of 160 GB"),
        ({"memory_quota": "0.001"}, "memory_quota", "at most two decimals"),
    ],
)
def test_bad_quota_values_say_what_to_change(
    overrides: dict[str, object], field: str, message: str
) -> None:
    with pytest.raises(InvalidInput) as caught:
        parse_quota({**GOOD, **overrides}, pool=POOL)
    assert field in caught.value.errors
    assert message in caught.value.errors[field]


def test_every_problem_is_reported_at_once() -> None:
    with pytest.raises(InvalidInput) as caught:
        parse_quota({"gpu_quota": "x", "gpu_limit": "5", "priority": "0"}, pool=POOL)
    assert set(caught.value.errors) == {"gpu_quota", "gpu_limit", "priority"}


def test_good_quota_in_storage_units() -> None:
    values = parse_quota({**GOOD, "cpu_quota": "2.5", "memory_quota": "16"}, pool=POOL)
    assert values == Quota(
        (Line(33, 100, 100), Line(2500, None, 100), Line(16_000, None, 100)), 100
    )
    assert values.display()["cpu_quota"] == "2.5"
    assert values.display()["memory_quota"] == "16"


def test_weight_defaults_to_one_and_zero_is_allowed() -> None:
    assert parse_quota({"gpu_quota": "0", "gpu_limit": "0"}, pool=POOL).weight == 100
    zero = parse_quota({**GOOD, "over_quota_weight": "0"}, pool=POOL)
    assert zero.weight == 0


@pytest.mark.parametrize(
    ("text", "centi"), [("0.33", 33), ("1", 100), (" 2.50 ", 250), ("0", 0), ("0.1", 10)]
)
def test_hundredths_round_trip(text: str, centi: int) -> None:
    assert parse_hundredths(text, what="x") == centi
    assert parse_hundredths(format_hundredths(centi), what="x") == centi
