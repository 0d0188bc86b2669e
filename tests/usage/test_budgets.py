"""GPU-hour budgets, with a clock the tests control: the month's burn from the usage
history, each threshold told once, borrowing stopped at 100 % and put back on the 1st,
bad input refused naming the field, showback carrying budget and burn."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

import pytest
from fastapi import FastAPI
from sqlalchemy import select

from app.core.db import unit_of_work
from app.core.errors import InvalidInput
from app.core.models import AuditEvent, Notification, Step, User
from app.runtime import portal_of
from app.teams import repository as teams
from app.usage import budgets
from app.usage import repository as repo
from tests.web.conftest import client_for, portal

NOW = datetime(2026, 12, 7, 9, 0, tzinfo=UTC)
NLP = 1


@pytest.fixture
def app(db_url: str) -> Iterator[FastAPI]:
    yield from portal(db_url)


def _use(app: FastAPI, hours: int, gpus: float, *, start: datetime) -> None:
    """nlp held ``gpus`` for ``hours`` hours from ``start`` (its guarantee 0.33)."""
    rows: list[dict[str, object]] = []
    for h in range(hours):
        inside = min(gpus, 0.33)
        rows.append(
            {
                "team_id": NLP,
                "pool": "",
                "resolution": "hour",
                "at": start + timedelta(hours=h),
                "seconds": 3600,
                "allocated_gpu": gpus,
                "requested_gpu": gpus,
                "quota_gpu": 0.33,
                "guaranteed_gpu_s": inside * 3600,
                "borrowed_gpu_s": (gpus - inside) * 3600,
            }
        )
    with unit_of_work(portal_of(app).session_factory) as session:
        repo.add_samples(session, rows)


def _check(app: FastAPI, now: datetime) -> int:
    with unit_of_work(portal_of(app).session_factory) as session:
        return budgets.check(session, now, alerts=[50, 80, 100])


def _set(app: FastAPI, hours: str, at_limit: str) -> None:
    with unit_of_work(portal_of(app).session_factory) as session:
        admin = session.scalar(select(User).where(User.email == "admin@example.org"))
        assert admin is not None
        asked = budgets.parse_budget(
            {"gpu_hours": hours, "month": "2026-12", "at_limit": at_limit}, now=NOW
        )
        budgets.set_budget(
            session, actor=admin, team=teams.get_team(session, NLP), asked=asked, now=NOW
        )


def _limit(app: FastAPI) -> int | None:
    with portal_of(app).session_factory() as session:
        return teams.get_team(session, NLP).quota.gpu.limit


def _alerts(app: FastAPI) -> list[str]:
    with portal_of(app).session_factory() as session:
        return [
            n.title
            for n in session.scalars(
                select(Notification)
                .where(Notification.event == "quota.budget", Notification.user_id == 2)
                .order_by(Notification.id)
            )
        ]


def test_each_threshold_is_told_once_and_borrowing_stops_until_the_first(app: FastAPI) -> None:
    _set(app, "20", "stop_borrowing")
    start = datetime(2026, 12, 1, tzinfo=UTC)
    _use(app, 10, 1.0, start=start)  # 10 GPU-hours: 50 %
    assert _check(app, NOW) == 1
    assert _check(app, NOW) == 0, "told once"
    _use(app, 6, 1.0, start=start + timedelta(hours=10))  # 16: 80 %
    assert _check(app, NOW) == 1
    assert _limit(app) == 100, "borrowing goes on below 100 %"
    _use(app, 4, 1.0, start=start + timedelta(hours=16))  # 20: 100 %
    assert _check(app, NOW) == 1
    assert _limit(app) == 33, "the limit lowered to the guarantee"
    portal_of(app).reconciler.run_once()
    backend = portal_of(app).backend
    queue = dict(backend._objects[(Step.QUEUE, "nlp")].spec.resources)["gpu"]  # type: ignore[attr-defined]
    assert (queue.quota, queue.limit) == (0.33, 0.33)
    assert _alerts(app) == [
        "nlp used 50 % of its 2026-12 GPU-hour budget (10.0 of 20)",
        "nlp used 80 % of its 2026-12 GPU-hour budget (16.0 of 20)",
        "nlp used 100 % of its 2026-12 GPU-hour budget (20.0 of 20)",
        "nlp's 2026-12 GPU-hour budget is spent: no borrowing until the month ends",
    ]
    # Still December: the limit stays down. On the 1st it is put back, once.
    assert _check(app, datetime(2026, 12, 31, 23, 0, tzinfo=UTC)) == 0
    assert _check(app, datetime(2027, 1, 1, 0, 5, tzinfo=UTC)) == 1
    assert _limit(app) == 100
    assert _check(app, datetime(2027, 1, 1, 0, 10, tzinfo=UTC)) == 0
    with portal_of(app).session_factory() as session:
        actions = [
            e.action
            for e in session.scalars(
                select(AuditEvent).where(AuditEvent.action.like("budget.%")).order_by(AuditEvent.id)
            )
        ]
    assert actions == [
        "budget.set",
        "budget.alert",
        "budget.alert",
        "budget.alert",
        "budget.limited",
        "budget.restored",
    ]


def test_an_alert_only_budget_keeps_the_limit_and_pages_show_the_burn(app: FastAPI) -> None:
    _set(app, "20", "alert")
    _use(app, 10, 1.0, start=datetime(2026, 12, 1, tzinfo=UTC))
    _use(app, 30, 1.0, start=datetime(2026, 11, 1, tzinfo=UTC))  # November: not this budget's
    assert _check(app, NOW) == 1
    _use(app, 12, 1.0, start=datetime(2026, 12, 2, tzinfo=UTC))  # 22 of 20
    assert _check(app, NOW) == 1, "80 and 100 % crossed at once: one message"
    assert _limit(app) == 100
    assert _alerts(app)[-1] == "nlp used 110 % of its 2026-12 GPU-hour budget (22.0 of 20)"
    with portal_of(app).session_factory() as session:
        (burn,) = budgets.of_team(session, NLP, NOW)
    assert (burn.used_hours, round(burn.percent)) == (22.0, 110)
    # Showback carries the budget and its burn.
    admin = client_for(app, "admin@example.org", admin=True)
    csv = admin.get("/admin/showback.csv?month=2026-12").text
    assert "nlp,2026-12,7.260,14.740,22.000,default,NVIDIA H100,,,20,110.0" in csv


def test_the_projection_says_when_the_month_runs_out(app: FastAPI) -> None:
    _set(app, "100", "alert")
    _use(app, 24, 1.0, start=datetime(2026, 12, 6, 9, tzinfo=UTC))  # 24 GPU-hours in 6 days
    with portal_of(app).session_factory() as session:
        (burn,) = budgets.of_team(session, NLP, NOW)
    # 24 GPU-hours over the month's first 6 days and 9 hours: 100 at that rate ~ day 27.
    assert burn.reaches_at is not None
    assert burn.reaches_at.strftime("%Y-%m-%d") == "2026-12-27"


@pytest.mark.parametrize(
    ("fields", "field", "says"),
    [
        ({"gpu_hours": "0"}, "gpu_hours", "at least 0.01"),
        ({"gpu_hours": "-5"}, "gpu_hours", "GPU-hours"),
        ({"gpu_hours": "5", "month": "2026-13"}, "month", "from 01 to 12"),
        ({"gpu_hours": "5", "month": "2026-11"}, "month", "that month is over"),
        ({"gpu_hours": "5", "at_limit": "halt"}, "at_limit", "alert or stop_borrowing"),
    ],
)
def test_bad_budgets_are_refused_naming_the_field(
    fields: dict[str, str], field: str, says: str
) -> None:
    with pytest.raises(InvalidInput) as refused:
        budgets.parse_budget(fields, now=NOW)
    assert says in refused.value.errors[field], refused.value.errors
