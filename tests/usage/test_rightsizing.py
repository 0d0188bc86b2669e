"""Right-sizing on generated usage history, both directions and at the thresholds'
edges, on both databases; a suggestion becomes a normal quota-change request."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime, timedelta

import pytest
from sqlalchemy import func, select, update
from sqlalchemy.orm import Session, sessionmaker

from app.core.config import Settings
from app.core.db import unit_of_work
from app.core.errors import Conflict
from app.core.models import (
    ClusterRequest,
    Notification,
    PoolCapacity,
    RequestKind,
    RightsizingSuggestion,
    Team,
    TeamQuotaLine,
    TeamStatus,
    UsageSample,
    User,
    utcnow,
)
from app.teams.seed import seed_example
from app.usage import rightsizing
from app.usage.history import RightsizingRun
from tests.factories import write_history

NOW = datetime(2026, 11, 29, 12, 0, 0, tzinfo=UTC)
HOURS = 14 * 24
SETTINGS = Settings(development=True)


@pytest.fixture
def seeded(session_factory: sessionmaker[Session]) -> sessionmaker[Session]:
    """The example org on a 10-GPU pool; team 1 (nlp) guaranteed 2 GPUs, all ready."""
    with unit_of_work(session_factory) as session:
        seed_example(session)
        session.execute(
            update(PoolCapacity).where(PoolCapacity.resource == "gpu").values(amount=1000)
        )
        session.execute(update(Team).values(status=TeamStatus.READY))
        session.execute(
            update(TeamQuotaLine).where(TeamQuotaLine.resource == "gpu").values(quota_limit=400)
        )
        session.execute(
            update(TeamQuotaLine)
            .where(TeamQuotaLine.team_id == 1, TeamQuotaLine.resource == "gpu")
            .values(guarantee=200)
        )
    return session_factory


def recompute(
    factory: sessionmaker[Session], **overrides: object
) -> dict[int, RightsizingSuggestion]:
    settings = Settings(development=True, **overrides)  # type: ignore[arg-type]
    with unit_of_work(factory) as session:
        rightsizing.recompute(session, settings, now=NOW)
    with factory() as session:
        return {s.team_id: s for _, s in rightsizing.for_org(session).rows}


def spiky(low: float, high: float, every: int) -> Callable[[int], float]:
    """``high`` one hour in ``every``, else ``low``."""
    return lambda hour: high if hour % every == 0 else low


def test_idle_team_gets_the_p95_rounded_up(seeded: sessionmaker[Session]) -> None:
    # 0.1 GPU most hours, 0.3 one hour in ten (10 % of the time: above the p95), 1.5 never.
    write_history(seeded, 1, spiky(0.1, 0.3, 10))
    found = recompute(seeded)
    s = found[1]
    assert s.direction == "lower"
    assert s.guarantee_centi == 200
    assert s.p95_centi == 30
    assert s.average_centi == 12
    assert s.suggested_centi == 30
    with seeded() as session:
        org = rightsizing.for_org(session)
        assert org.idle_centi == 170
        assert [name for name, _ in org.rows] == ["nlp"]
        assert rightsizing.describe(org.rows[0][1]) == (
            "Right-sizing: over 14 days 0.12 GPU in use on average, p95 0.3, of 2 guaranteed: "
            "lower the guarantee to 0.3 GPU."
        )


def test_rounding_up_to_the_next_twentieth(seeded: sessionmaker[Session]) -> None:
    write_history(seeded, 1, lambda hour: 0.31)
    assert recompute(seeded)[1].suggested_centi == 35


def test_idle_threshold_edge(seeded: sessionmaker[Session]) -> None:
    # Exactly 20 % of a 2-GPU guarantee is not "below" it; a hundredth less is.
    write_history(seeded, 1, lambda hour: 0.4)
    assert 1 not in recompute(seeded)
    with unit_of_work(seeded) as session:
        session.execute(update(UsageSample).values(allocated_gpu=0.39, requested_gpu=0.39))
    assert recompute(seeded)[1].suggested_centi == 40
    # A larger share in the settings flags the 0.4 too.
    with unit_of_work(seeded) as session:
        session.execute(update(UsageSample).values(allocated_gpu=0.4, requested_gpu=0.4))
    assert recompute(seeded, rightsizing_idle_share=0.25)[1].direction == "lower"


def test_too_little_history_is_not_judged(seeded: sessionmaker[Session]) -> None:
    # 12 of 14 days (86 %) is under the 90 % coverage needed.
    write_history(seeded, 1, lambda hour: 0.0, hours=12 * 24)
    assert recompute(seeded) == {}
    # 7 days is enough when the period is 7 days.
    assert recompute(seeded, rightsizing_days=7)[1].suggested_centi == 0


def test_starved_team_gets_its_demand_p95(seeded: sessionmaker[Session]) -> None:
    # Team 2 (guarantee 0.33): one hour in three its work waited, asking 1.2 GPU, got 0.5.
    write_history(seeded, 2, spiky(0.3, 0.5, 3), spiky(0.3, 1.2, 3))
    s = recompute(seeded)[2]
    assert s.direction == "raise"
    assert s.demand_p95_centi == 120
    assert s.suggested_centi == 120
    assert s.waiting_share == pytest.approx(1 / 3, abs=0.01)
    with seeded() as session:
        assert rightsizing.for_org(session).wanted_centi == 87


def test_starved_threshold_edge(seeded: sessionmaker[Session]) -> None:
    # Waiting one hour in five (20 %) is under the 25 % default; one in four is at it.
    write_history(seeded, 2, spiky(0.3, 0.5, 5), spiky(0.3, 1.2, 5))
    assert 2 not in recompute(seeded)
    assert recompute(seeded, rightsizing_waiting_share=0.2)[2].direction == "raise"


def test_waiting_within_the_guarantee_is_not_starved(seeded: sessionmaker[Session]) -> None:
    # Work waited half the time but never asked more than the 2 guaranteed GPUs: a
    # larger guarantee would not have helped (fragmentation, reclaim in progress).
    write_history(seeded, 1, spiky(0.5, 1.0, 2), spiky(1.5, 2.0, 2))
    assert 1 not in recompute(seeded)


def test_a_busy_team_fits(seeded: sessionmaker[Session]) -> None:
    write_history(seeded, 1, spiky(1.2, 1.9, 4))
    write_history(seeded, 3, lambda hour: 0.3)
    assert recompute(seeded) == {}


def test_a_suggestion_becomes_a_prefilled_quota_change(seeded: sessionmaker[Session]) -> None:
    write_history(seeded, 1, lambda hour: 0.5)  # 25 % of its 2 GPUs: fits
    write_history(seeded, 2, spiky(0.3, 0.5, 2), spiky(0.3, 1.6, 2))
    found = recompute(seeded)
    assert 1 not in found
    with unit_of_work(seeded) as session:
        admin = session.scalars(select(User).where(User.is_admin)).one()
        team = session.get(Team, 2)
        assert team is not None
        request = rightsizing.propose(session, actor=admin, team=team)
        assert request.kind == RequestKind.QUOTA_CHANGE
        assert request.quota.gpu.guarantee == 160
        # The limit (4 GPUs) already allows it; the other values are unchanged.
        assert (request.quota.gpu.limit, request.quota.weight, request.priority) == (400, 100, 100)
        assert request.purpose.startswith("Right-sizing: over 14 days work waited 50 %")
    with seeded() as session:
        waiting = session.scalars(
            select(ClusterRequest).where(
                ClusterRequest.team_id == 2, ClusterRequest.kind == RequestKind.QUOTA_CHANGE
            )
        ).all()
        assert [r.quota.gpu.guarantee for r in waiting] == [160]
        # The admin who proposed it is not told of their own act.
        told = session.scalars(
            select(Notification).where(Notification.event == "quota_change.submitted")
        ).all()
        assert all(n.user_id != admin.id for n in told)
    # Asking again while the request waits is refused with the reason.
    with unit_of_work(seeded) as session:
        team = session.get(Team, 2)
        assert team is not None
        with pytest.raises(Conflict, match="already has request"):
            rightsizing.propose(session, actor=admin, team=team)


def test_a_changed_guarantee_drops_the_stale_suggestion(seeded: sessionmaker[Session]) -> None:
    write_history(seeded, 1, lambda hour: 0.1)
    recompute(seeded)
    with unit_of_work(seeded) as session:
        session.execute(
            update(TeamQuotaLine)
            .where(TeamQuotaLine.team_id == 1, TeamQuotaLine.resource == "gpu")
            .values(guarantee=150)
        )
    with unit_of_work(seeded) as session:
        assert rightsizing.for_team(session, 1, 150) is None
        team = session.get(Team, 1)
        admin = session.scalars(select(User).where(User.is_admin)).one()
        assert team is not None
        with pytest.raises(Conflict, match="no right-sizing suggestion"):
            rightsizing.propose(session, actor=admin, team=team)


def test_the_collector_recomputes_hourly(seeded: sessionmaker[Session]) -> None:
    write_history(seeded, 1, lambda hour: 0.1, now=utcnow())
    run = RightsizingRun(seeded, SETTINGS, every=3600)
    assert run.maybe_run() == 1
    write_history(seeded, 2, lambda hour: 0.0, now=utcnow() - timedelta(seconds=1))
    assert run.maybe_run() is None, "not again within the hour"
    run.every = 0
    assert run.maybe_run() == 2


def test_a_team_that_became_ready_gets_its_suggestion_within_the_minute(
    seeded: sessionmaker[Session],
) -> None:
    """The job looks every 30 s (a count of the ready teams): a new portal's teams, or one
    that just became ready, need not wait for the hourly round."""
    from types import SimpleNamespace

    from app.usage.jobs import rightsizing_loop

    loop = rightsizing_loop(SimpleNamespace(session_factory=seeded, settings=SETTINGS))
    assert loop.period <= 30
    write_history(seeded, 1, lambda hour: 0.1, now=utcnow())
    loop.run()  # the first look computes
    write_history(seeded, 2, lambda hour: 0.0, now=utcnow() - timedelta(seconds=1))
    with unit_of_work(seeded) as session:
        assert session.scalar(select(func.count()).select_from(RightsizingSuggestion)) == 1
