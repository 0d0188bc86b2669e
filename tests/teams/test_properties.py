"""Properties that hold for every input Hypothesis can think of."""

from __future__ import annotations

from decimal import Decimal

from hypothesis import given, settings
from hypothesis import strategies as st
from sqlalchemy.pool import StaticPool

from app.core.db import Base, make_engine, make_session_factory
from app.core.errors import Conflict, InvalidInput
from app.core.quantities import QUANTITY_MAX, format_hundredths, is_plain_number, parse_hundredths
from app.teams import repository as repo
from app.teams import service
from tests.factories import make_org, make_user, submit


@given(st.text(max_size=30) | st.integers() | st.floats() | st.booleans() | st.none())
def test_a_quantity_is_a_plain_number_or_a_clear_refusal(raw: object) -> None:
    try:
        centi = parse_hundredths(raw, what="the guarantee")  # type: ignore[arg-type]
    except ValueError as exc:
        message = str(exc)
    else:
        message = ""
    if message:
        assert "the guarantee" in message, "every refusal names the field"
        return
    text = str(raw).strip()
    assert not isinstance(raw, bool)
    assert is_plain_number(text)
    assert Decimal(text) * 100 == centi
    assert 0 <= centi <= QUANTITY_MAX * 100


@given(st.integers(min_value=0, max_value=QUANTITY_MAX * 100))
def test_formatting_and_parsing_round_trip(centi: int) -> None:
    assert parse_hundredths(format_hundredths(centi), what="x") == centi


@given(st.integers(min_value=-(QUANTITY_MAX * 100), max_value=QUANTITY_MAX * 100))
def test_hundredths_are_formatted_as_the_exact_decimal_is(centi: int) -> None:
    # Two decimals at most, no trailing zero, no point for whole numbers: what
    # ``Decimal(centi) / 100`` prints so, the quantity exactly.
    text = format_hundredths(centi)
    assert Decimal(text) == Decimal(centi) / 100
    assert text == f"{Decimal(centi) / 100:.2f}".rstrip("0").rstrip(".")


@settings(max_examples=40, deadline=None)
@given(
    pool=st.integers(min_value=0, max_value=400),
    asks=st.lists(st.integers(min_value=0, max_value=200), min_size=1, max_size=8),
)
def test_approvals_never_commit_more_than_the_pool(pool: int, asks: list[int]) -> None:
    """Whatever is asked, in whatever order: an approval lands exactly when it fits."""
    engine = make_engine("sqlite://", poolclass=StaticPool)
    Base.metadata.create_all(engine)
    try:
        with make_session_factory(engine)() as session:
            org = make_org(session, gpus=format_hundredths(pool) or "0")
            admin = make_user(session, "admin@example.org", admin=True)
            lead = make_user(session, "lead@example.org")
            committed = 0
            for i, ask in enumerate(asks):
                quota = format_hundredths(ask)
                try:
                    request = submit(session, lead, f"t{i}", gpu_quota=quota, gpu_limit=quota)
                except InvalidInput:
                    assert ask > pool, "only a limit above the pool is refused at submission"
                    continue
                try:
                    service.approve(session, actor=admin, request_id=request.id)
                except Conflict:
                    assert committed + ask > pool
                else:
                    committed += ask
                assert repo.committed_gpu_centi(session, org.id) == committed <= pool
    finally:
        engine.dispose()
