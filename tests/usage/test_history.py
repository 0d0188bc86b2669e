"""Usage history: sampling, bounded storage, sparkline and showback, on both databases."""

from __future__ import annotations

import threading
import time
import weakref
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from sqlalchemy import event, func, select, update
from sqlalchemy.orm import Session, sessionmaker

from app.adapters.simulated import SimulatedBackend
from app.core.db import unit_of_work
from app.core.models import Org, Team, TeamQuotaLine, TeamStatus, UsageSample
from app.core.quota import Quota
from app.teams.seed import seed_example
from app.usage import division, history, service
from app.usage import repository as usage_repo
from app.usage.service import TeamQuota, UsageCache
from app.usage.sources import QueueUsage

NOW = datetime(2026, 11, 29, 12, 0, 30, tzinfo=UTC)


class FixedUsage(SimulatedBackend):
    """The simulated backend with usage the test decides."""

    def __init__(self, values: dict[str, tuple[float, float]]) -> None:
        super().__init__(step_seconds=0)
        self.values = values
        self.reads = 0

    def cluster_top(self, pool: str = "") -> None:
        return None

    def usage(self, queue_names: list[str]) -> dict[str, QueueUsage]:
        self.reads += 1
        return {
            n: QueueUsage(allocated_gpu=a, requested_gpu=r)
            for n, (a, r) in self.values.items()
            if n in queue_names
        }


@pytest.fixture
def seeded(session_factory: sessionmaker[Session]) -> sessionmaker[Session]:
    with unit_of_work(session_factory) as session:
        seed_example(session)
        # Provisioned: only ready teams run work, so only they are sampled.
        session.execute(update(Team).values(status=TeamStatus.READY))
    return session_factory


def sample(
    team_id: int,
    at: datetime,
    allocated: float,
    *,
    quota: float = 0.33,
    seconds: int = 60,
    resolution: str = "raw",
) -> UsageSample:
    inside = min(allocated, quota)
    return UsageSample(
        team_id=team_id,
        resolution=resolution,
        at=at,
        seconds=seconds,
        allocated_gpu=allocated,
        requested_gpu=allocated,
        quota_gpu=quota,
        guaranteed_gpu_s=inside * seconds,
        borrowed_gpu_s=(allocated - inside) * seconds,
    )


def count(factory: sessionmaker[Session], resolution: str) -> int:
    with factory() as session:
        return int(
            session.scalar(
                select(func.count())
                .select_from(UsageSample)
                .where(UsageSample.resolution == resolution)
            )
            or 0
        )


def test_collector_samples_every_team_once_per_period(seeded: sessionmaker[Session]) -> None:
    backend = FixedUsage({"team-nlp": (0.8, 1.0), "team-vision": (0.1, 0.1)})
    collector = history.Collector(seeded, UsageCache(backend, ttl=60), interval=60)
    result = collector.collect_once(NOW)
    assert result.sampled == 2, "recommender has no usage reading: no sample invented"
    collector.collect_once(NOW + timedelta(seconds=10))
    assert count(seeded, "raw") == 2, "the same period is written once"
    collector.collect_once(NOW + timedelta(seconds=60))
    assert count(seeded, "raw") == 4
    with seeded() as session:
        nlp = session.scalars(
            select(UsageSample).join(Team).where(Team.name == "nlp").limit(1)
        ).one()
    assert nlp.at == datetime(2026, 11, 29, 12, 0, tzinfo=UTC)
    assert nlp.guaranteed_gpu_s == pytest.approx(0.33 * 60)
    assert nlp.borrowed_gpu_s == pytest.approx(0.47 * 60)


def test_raw_samples_older_than_a_day_become_hourly(seeded: sessionmaker[Session]) -> None:
    old_hour = datetime(2026, 11, 27, 9, 0, tzinfo=UTC)
    with unit_of_work(seeded) as session:
        for minute in range(60):
            session.add(
                sample(1, old_hour + timedelta(minutes=minute), 0.2 if minute < 30 else 0.6)
            )
        session.add(sample(1, NOW - timedelta(hours=2), 0.5))
        session.add(sample(1, NOW - timedelta(days=401), 1.0, seconds=3600, resolution="hour"))
    collector = history.Collector(seeded, UsageCache(FixedUsage({}), ttl=60), interval=60)
    result = collector.collect_once(NOW)
    # 60 raw -> 1 hourly row; the 401-day-old hourly row -> a daily row, which is expired.
    assert result.rolled_up == 2
    assert result.deleted == 62
    assert count(seeded, "raw") == 1, "the recent sample stays raw"
    assert count(seeded, "day") == 0
    with seeded() as session:
        hour = session.scalars(select(UsageSample).where(UsageSample.resolution == "hour")).one()
    assert hour.at == old_hour
    assert hour.seconds == 3600
    assert hour.allocated_gpu == pytest.approx(0.4)
    assert hour.guaranteed_gpu_s == pytest.approx((30 * 0.2 + 30 * 0.33) * 60)
    assert hour.borrowed_gpu_s == pytest.approx(30 * 0.27 * 60)


def test_every_team_and_hour_is_rolled_up_on_its_own(seeded: sessionmaker[Session]) -> None:
    """The roll-up is summed in the database per team and hour: three teams over two
    hours (samples of different lengths) give six hourly rows, each weighted by the
    seconds its samples cover, and a day boundary in UTC starts a new hour, not a
    merged one."""
    start = datetime(2026, 11, 26, 23, 0, tzinfo=UTC)  # the second hour is the 27th's
    expected: dict[tuple[int, datetime], tuple[int, float, float]] = {}
    with unit_of_work(seeded) as session:
        for team_id in (1, 2, 3):
            for hour in range(2):
                at = start + timedelta(hours=hour)
                weighted = seconds_in = quota = 0.0
                for minute, seconds in ((0, 60), (1, 120), (3, 30)):
                    allocated = 0.1 * team_id + 0.05 * minute + 0.2 * hour
                    q = 0.33 + 0.01 * minute
                    session.add(
                        sample(
                            team_id,
                            at + timedelta(minutes=minute),
                            allocated,
                            quota=q,
                            seconds=seconds,
                        )
                    )
                    weighted += allocated * seconds
                    seconds_in += seconds
                    quota = max(quota, q)
                expected[(team_id, at)] = (int(seconds_in), weighted / seconds_in, quota)
    collector = history.Collector(seeded, UsageCache(FixedUsage({}), ttl=60), interval=60)
    result = collector.collect_once(NOW)
    assert result.rolled_up == 6
    assert count(seeded, "raw") == 0
    with seeded() as session:
        hours = session.scalars(select(UsageSample).where(UsageSample.resolution == "hour")).all()
    got = {(h.team_id, h.at): (h.seconds, h.allocated_gpu, h.quota_gpu) for h in hours}
    assert got.keys() == expected.keys()
    for key, (seconds, allocated, quota) in expected.items():
        assert got[key][0] == seconds
        assert got[key][1] == pytest.approx(allocated, rel=1e-6)
        assert got[key][2] == pytest.approx(quota, rel=1e-6)


def test_hourly_rows_older_than_a_week_become_daily(seeded: sessionmaker[Session]) -> None:
    day = datetime(2026, 11, 10, tzinfo=UTC)
    with unit_of_work(seeded) as session:
        for h in range(24):
            session.add(
                sample(
                    2,
                    day + timedelta(hours=h),
                    1.0 if h < 6 else 0.0,
                    seconds=3600,
                    resolution="hour",
                )
            )
        session.add(sample(2, NOW - timedelta(days=3), 0.5, seconds=3600, resolution="hour"))
    collector = history.Collector(seeded, UsageCache(FixedUsage({}), ttl=60), interval=60)
    collector.collect_once(NOW)
    assert count(seeded, "hour") == 1, "the sparkline's week stays hourly"
    with seeded() as session:
        daily = session.scalars(select(UsageSample).where(UsageSample.resolution == "day")).one()
        totals = history.showback(session, month="2026-11")
    assert daily.at == day
    assert daily.seconds == 86400
    assert daily.allocated_gpu == pytest.approx(0.25)
    vision = next(r for r in totals if r.team == "vision")
    # six busy hours on 10 November and one hour at 0.5 three days ago, 0.33 of each inside
    assert vision.guaranteed_gpu_hours == pytest.approx(6 * 0.33 + 0.33, abs=0.01)


def test_showback_splits_guaranteed_and_borrowed_hours(seeded: sessionmaker[Session]) -> None:
    with unit_of_work(seeded) as session:
        session.add(
            sample(
                1,
                datetime(2026, 10, 31, 23, tzinfo=UTC),
                0.83,
                quota=0.33,
                seconds=3600,
                resolution="hour",
            )
        )
        session.add(
            sample(
                1,
                datetime(2026, 11, 1, 0, tzinfo=UTC),
                0.2,
                quota=0.33,
                seconds=3600,
                resolution="hour",
            )
        )
        session.add(sample(2, datetime(2026, 11, 2, 0, tzinfo=UTC), 0.5, quota=0.33, seconds=1800))
    with seeded() as session:
        rows = history.showback(session)
        november = history.showback(session, month="2026-11")
    assert [(r.team, r.month, r.guaranteed_gpu_hours, r.borrowed_gpu_hours) for r in rows] == [
        ("nlp", "2026-10", 0.33, 0.5),
        ("nlp", "2026-11", 0.2, 0.0),
        ("vision", "2026-11", 0.165, 0.085),
    ]
    assert [r.team for r in november] == ["nlp", "vision"]


def test_sparkline_of_the_last_week(seeded: sessionmaker[Session]) -> None:
    with unit_of_work(seeded) as session:
        session.add(sample(1, NOW - timedelta(days=8), 1.0, seconds=3600, resolution="hour"))
        session.add(sample(1, NOW - timedelta(days=3), 0.9, seconds=3600, resolution="hour"))
        session.add(sample(1, NOW - timedelta(minutes=5), 0.3))
        session.add(sample(1, NOW - timedelta(minutes=4), 0.5))
    with seeded() as session:
        points = history.last_days(session, 1, now=NOW)
    assert [round(p.allocated, 2) for p in points] == [0.9, 0.4]
    line = history.sparkline(points, limit=1.0, now=NOW)
    assert line is not None
    assert line.peak == pytest.approx(0.9)
    assert line.points == 2
    assert float(line.allocated.split()[-1].split(",")[0]) > 298, (
        "the last hour is at the right edge"
    )


def test_one_cluster_read_serves_every_viewer() -> None:
    backend = FixedUsage({"team-a": (0.5, 0.5)})
    cache = UsageCache(backend, ttl=0.3)
    for _ in range(50):
        assert cache.get(["team-a"])["team-a"].allocated_gpu == 0.5
    assert backend.reads == 1
    time.sleep(0.35)
    cache.get(["team-a"])
    assert backend.reads == 2


class SlowUsage(FixedUsage):
    """Usage read slowly, as a real cluster's list of 10,000 queues is: each read waits
    until the test lets it go."""

    def __init__(self, values: dict[str, tuple[float, float]]) -> None:
        super().__init__(values)
        self.started = threading.Event()
        self.go = threading.Event()

    def usage(self, queue_names: list[str]) -> dict[str, QueueUsage]:
        self.started.set()
        assert self.go.wait(10), "the test never let the read go"
        return super().usage(queue_names)


def one_row() -> list[TeamQuota]:
    return [
        TeamQuota(id=1, name="a", quota_centi=50, limit_centi=100, weight_centi=100, priority=100)
    ]


def test_a_page_never_waits_for_a_cluster_read() -> None:
    """While the refresher reads the cluster (slow at 10,000 teams), a page takes the
    ready view and the last usage at once: the read holds no lock the pages take."""
    backend = SlowUsage({"team-a": (0.5, 0.5)})
    cache = UsageCache(backend, ttl=0)  # every refresh reads usage again
    backend.go.set()
    cache.refresh_view(one_row, pool_centi=100, parent="org")
    backend.go.clear()
    backend.started.clear()
    cache.refresher_running = True
    refresh = threading.Thread(
        target=cache.refresh_view, args=(one_row,), kwargs={"pool_centi": 100, "parent": "org"}
    )
    refresh.start()
    try:
        assert backend.started.wait(10)
        began = time.monotonic()
        view = cache.org_view(one_row, pool_centi=100, parent="org")
        assert view.shares[1].allocated == 0.5
        assert cache.remembered(view, "k", lambda: "v") == "v"
        assert cache.division() is not None
        assert time.monotonic() - began < 1, "a page waited for the cluster read"
    finally:
        backend.go.set()
        refresh.join(10)
    assert backend.reads == 2


def test_callers_that_wait_for_a_read_take_its_result() -> None:
    """Several callers finding the usage stale at once: one reads, the others wait for
    that read and take its result (one read, not one each)."""
    backend = SlowUsage({"team-a": (0.5, 0.5), "team-b": (0.2, 0.3)})
    cache = UsageCache(backend, ttl=60)
    seen: list[float] = []

    def read() -> None:
        seen.append(cache.get(["team-a", "team-b"])["team-b"].requested_gpu)

    threads = [threading.Thread(target=read) for _ in range(8)]
    for thread in threads:
        thread.start()
    assert backend.started.wait(10)
    time.sleep(0.2)  # the others are waiting by now
    backend.go.set()
    for thread in threads:
        thread.join(10)
    assert seen == [0.3] * 8
    assert backend.reads == 1


def test_usage_forgotten_during_a_read_is_read_again() -> None:
    """``forget`` (after a change on the cluster) while a read is under way: that read may
    predate the change, so the next caller reads again instead of taking it as fresh."""
    backend = SlowUsage({"team-a": (0.5, 0.5)})
    cache = UsageCache(backend, ttl=60)
    reading = threading.Thread(target=cache.get, args=(["team-a"],))
    reading.start()
    assert backend.started.wait(10)
    cache.forget()
    backend.go.set()
    reading.join(10)
    backend.values["team-a"] = (0.9, 1.0)
    assert cache.get(["team-a"])["team-a"].allocated_gpu == 0.9
    assert backend.reads == 2


def test_pages_take_the_refreshers_reading_as_they_take_its_view() -> None:
    """While the refresher runs, a page takes the reading the ready view was built from
    (up to 3 ttl + 1 s old, as the view) instead of reading every queue itself between
    two of its reads; the refresher asks for the latest. Asked for no queue, nobody
    reads."""
    backend = FixedUsage({"team-a": (0.5, 0.5)})
    cache = UsageCache(backend, ttl=0.2)
    assert cache.get([]) == {}
    assert backend.reads == 0, "nothing asked for, nothing read"
    cache.get(["team-a"], latest=True)
    assert backend.reads == 1
    cache.refresher_running = True
    backend.values["team-a"] = (0.9, 0.9)
    time.sleep(0.3)  # older than ttl, younger than 3 ttl + 1 s
    assert cache.get(["team-a"])["team-a"].allocated_gpu == 0.5
    assert cache.get([]) == {}
    assert backend.reads == 1
    assert cache.get(["team-a"], latest=True)["team-a"].allocated_gpu == 0.9
    assert backend.reads == 2
    cache.refresher_running = False  # no refresher: a page reads what is older than ttl
    backend.values["team-a"] = (0.1, 0.1)
    time.sleep(0.3)
    assert cache.get(["team-a"])["team-a"].allocated_gpu == 0.1
    assert backend.reads == 3
    assert cache.get(["team-b"]) == {}, "a queue not read yet is read"
    assert backend.reads == 4


def test_one_computation_however_many_viewers_wait() -> None:
    """When the org view is stale, one caller computes it and the others wait for that
    result: no herd of identical computations (16 viewers, a slow quota read)."""
    cache = UsageCache(FixedUsage({"team-a": (0.5, 0.5)}), ttl=60)
    loads = 0
    rows = [
        TeamQuota(id=1, name="a", quota_centi=50, limit_centi=100, weight_centi=100, priority=100)
    ]

    def load() -> list[TeamQuota]:
        nonlocal loads
        loads += 1
        time.sleep(0.3)
        return rows

    barrier = threading.Barrier(16)
    seen: list[float | None] = []

    def view() -> None:
        barrier.wait(10)
        seen.append(cache.org_view(load, pool_centi=100, parent="org").shares[1].allocated)

    threads = [threading.Thread(target=view) for _ in range(16)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(10)
    assert loads == 1
    assert seen == [0.5] * 16
    cache.forget_quotas()  # a decision: the next view reads quotas again
    cache.org_view(load, pool_centi=100, parent="org")
    assert loads == 2


def test_the_view_is_computed_again_only_when_what_it_shows_moved(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The refresher re-reads quotas and usage every interval; at 10,000 teams computing
    the shares costs far more than comparing what they depend on, and mostly nothing moved."""
    computed = 0
    compute = division.divide_org

    def counting(*args: Any, **kwargs: Any) -> Any:
        nonlocal computed
        computed += 1
        return compute(*args, **kwargs)

    monkeypatch.setattr(service, "divide_org", counting)
    backend = FixedUsage({"team-a": (0.5, 0.5), "team-b": (0.0, 0.0)})
    cache = UsageCache(backend, ttl=0)  # every refresh reads usage again
    quota = {"a": 50, "b": 30}

    def load() -> list[TeamQuota]:  # a new list of equal rows each time, as from the database
        return [
            TeamQuota(
                id=n,
                name=name,
                quota_centi=quota[name],
                limit_centi=100,
                weight_centi=100,
                priority=100,
            )
            for n, name in enumerate(("a", "b"), 1)
        ]

    views = [cache.refresh_view(load, pool_centi=100, parent="org") for _ in range(3)]
    assert backend.reads == 3
    assert computed == 1
    assert views[0] is views[1] is views[2]
    backend.values["team-a"] = (0.7, 0.9)  # usage moved
    moved = cache.refresh_view(load, pool_centi=100, parent="org")
    assert computed == 2
    assert moved.shares[1].allocated == 0.7
    quota["b"] = 40  # a decision elsewhere (another replica)
    changed = cache.refresh_view(load, pool_centi=100, parent="org")
    assert computed == 3
    assert changed.shares[2].guaranteed == 0.4
    assert cache.refresh_view(load, pool_centi=200, parent="org").shares[1].pool == 2.0
    assert computed == 4


def test_the_refresher_keeps_the_view_ready(seeded: sessionmaker[Session]) -> None:
    """Viewers read the refresher's result; an old one is served while it runs."""
    cache = UsageCache(FixedUsage({"team-nlp": (0.8, 1.0)}), ttl=0.2)
    refresher = history.ViewRefresher(seeded, cache)
    refresher.refresh_once()

    def fail() -> list[TeamQuota]:
        raise AssertionError("a viewer computed the org view")

    cache.refresher_running = True
    time.sleep(0.3)  # older than ttl: the refresher is about to replace it
    view = cache.org_view(fail, pool_centi=100, parent="ml-org")
    assert view.names[1] == "nlp"
    assert view.shares[1].allocated == 0.8
    assert view.allocated == 0.8, "the org's GPUs in use, summed once per refresh"


def test_a_decision_input_is_computed_once_per_view_and_old_views_are_let_go() -> None:
    cache = UsageCache(FixedUsage({}), ttl=0)
    computed: list[str] = []

    def compute(what: str) -> Callable[[], str]:
        def run() -> str:
            computed.append(what)
            return what

        return run

    class View:  # a stand-in for the ready org view: only its identity matters
        pass

    first, second = View(), View()
    assert cache.remembered(first, "a", compute("a")) == "a"
    assert cache.remembered(first, "a", compute("a")) == "a"
    assert cache.remembered(first, "b", compute("b")) == "b"
    assert computed == ["a", "b"], "once per decision input over the same view"
    assert cache.remembered(second, "a", compute("a")) == "a"
    assert computed == ["a", "b", "a"], "a new view computes again"
    held = weakref.ref(first)
    del first
    assert held() is None, "the memo keeps no older view alive"


def test_the_quota_rows_are_read_again_when_any_value_read_moved(
    seeded: sessionmaker[Session],
) -> None:
    """PostgreSQL's digest of the quota rows moves with every value fair share is
    computed over, and only then: the kept rows are returned while it stays; SQLite
    gives none (the rows are read every time)."""
    with seeded() as session:
        org_id = session.scalars(select(Team.org_id)).first()
        assert org_id is not None
        kept = usage_repo.quota_rows_since(session, org_id, None)
        assert kept.rows == usage_repo.get_quota_rows(session, org_id)
        if session.get_bind().dialect.name != "postgresql":
            assert kept.digest is None
            again = usage_repo.quota_rows_since(session, org_id, kept)
            assert again is not kept
            assert again.rows == kept.rows
            return
        assert usage_repo.quota_rows_since(session, org_id, kept) is kept, "nothing moved"
        other = usage_repo.quota_rows_since(session, org_id + 1, kept)
        assert other.rows == [], "another org"
        assert other.digest != kept.digest, "another org"
        team = session.scalars(select(Team).order_by(Team.id)).first()
        assert team is not None
        seen = {kept.digest}
        gpu = next(line for line in team.quota_lines if line.resource == "gpu")
        changes: list[tuple[object, str, object]] = [
            (gpu, "guarantee", (gpu.guarantee or 0) + 1),
            (gpu, "quota_limit", (gpu.quota_limit or 0) + 1),
            (gpu, "weight", gpu.weight + 1),
            (team, "priority", team.priority + 1),
            (team, "name", team.name + ",1"),
            (team, "created_at", team.created_at + timedelta(seconds=1)),
            (team, "status", TeamStatus.PROVISIONING),  # still holds a queue, not ready
            (team, "status", TeamStatus.DECOMMISSIONED),  # holds none
        ]
        for target, field, value in changes:
            setattr(target, field, value)
            moved = usage_repo.quota_rows_since(session, org_id, kept)  # flushed first
            assert moved.digest not in seen, field
            assert moved.rows == usage_repo.get_quota_rows(session, org_id), field
            seen.add(moved.digest)
            kept = moved
        late = Team(org_id=org_id, name="late", status=TeamStatus.APPROVED)
        late.set_quota(session.get_one(Org, org_id).default_pool, Quota.of_gpu(25, 0))
        session.add(late)
        moved = usage_repo.quota_rows_since(session, org_id, kept)
        assert moved.digest not in seen, "a new team"
        assert [row.name for row in moved.rows][-1] == "late"
        session.execute(
            update(Team).where(Team.org_id == org_id).values(status=TeamStatus.DECOMMISSIONED)
        )
        emptied = usage_repo.quota_rows_since(session, org_id, moved)
        assert emptied is not moved, "no team holds a queue"
        assert emptied.rows == []
        session.rollback()


def test_the_refresher_reads_the_rows_again_only_when_they_moved(
    seeded: sessionmaker[Session],
) -> None:
    cache = UsageCache(FixedUsage({"team-nlp": (0.8, 1.0)}), ttl=0)
    cache.refresher_running = True  # pages take its view (up to a second old here)
    refresher = history.ViewRefresher(seeded, cache)
    refresher.refresh_once()
    first = cache.org_view(lambda: [], pool_centi=100, parent="ml-org")
    refresher.refresh_once()
    refresher.refresh_once()
    postgres = seeded().get_bind().dialect.name == "postgresql"
    assert refresher.rows_read == (1 if postgres else 3)
    with unit_of_work(seeded) as session:
        session.execute(
            update(TeamQuotaLine)
            .where(TeamQuotaLine.team_id == 1, TeamQuotaLine.resource == "gpu")
            .values(guarantee=77)
        )
    refresher.refresh_once()
    assert refresher.rows_read == (2 if postgres else 4)
    view = cache.org_view(lambda: [], pool_centi=100, parent="ml-org")
    assert view.by_id[1].quota_centi == 77
    assert view.shares[1].guaranteed == 0.77
    assert first.by_id[1].quota_centi != 77


def test_the_digest_and_the_rows_are_read_in_one_statement(
    seeded: sessionmaker[Session],
) -> None:
    """Rows kept under a digest must be the rows it was computed from: a decision
    committed between a digest and a second read of the rows, then undone, would
    otherwise be shown until the next change. One statement sees one snapshot."""
    with seeded() as session:
        org_id = session.scalars(select(Team.org_id)).first()
        assert org_id is not None
        statements: list[str] = []

        def count(*args: object) -> None:
            statements.append(str(args[2]))

        engine = session.get_bind()
        event.listen(engine, "before_cursor_execute", count)
        try:
            kept = usage_repo.quota_rows_since(session, org_id, None)
            unmoved = usage_repo.quota_rows_since(session, org_id, kept)
        finally:
            event.remove(engine, "before_cursor_execute", count)
    postgres = engine.dialect.name == "postgresql"
    assert (unmoved is kept) is postgres, "SQLite reads the rows every time"
    assert len(statements) == 2, statements
    assert ("md5" in statements[0]) is postgres


def test_quota_rows_carry_whole_seconds_and_readiness(seeded: sessionmaker[Session]) -> None:
    """What fair share is computed over, read as plain values on both databases: the
    creation time cut to whole seconds as KAI's one-second tie-break reads it, readiness,
    and only the teams holding a queue (a pending team counts once flushed)."""
    with unit_of_work(seeded) as session:
        teams = session.scalars(select(Team).order_by(Team.id)).all()
        first, second = teams[0], teams[1]
        first.created_at = datetime(2026, 11, 29, 12, 0, 30, 999_999, tzinfo=UTC)
        second.created_at = datetime(2026, 11, 29, 12, 0, 30, 1, tzinfo=UTC)
        second.status = TeamStatus.PROVISIONING
        teams[2].status = TeamStatus.REJECTED
        org_id = first.org_id
    with seeded() as session:
        rows = {row.id: row for row in usage_repo.get_quota_rows(session, org_id)}
        first = session.get_one(Team, teams[0].id)
        assert rows[first.id] == TeamQuota(
            first.id,
            first.name,
            first.quota.gpu.guarantee or 0,
            first.quota.gpu.limit or 0,
            first.quota.weight,
            first.priority,
            created=int(NOW.timestamp()),
            ready=True,
        )
        assert rows[teams[1].id].created == int(NOW.timestamp())
        assert rows[teams[1].id].ready is False, "provisioning: committed, not running yet"
        assert teams[2].id not in rows, "a rejected team holds no queue"
        assert list(rows) == sorted(rows)
        late = Team(
            org_id=org_id,
            name="late",
            status=TeamStatus.APPROVED,
            created_at=datetime(2026, 11, 30, tzinfo=UTC),
        )
        late.set_quota(session.get_one(Org, org_id).default_pool, Quota.of_gpu(25, 50))
        session.add(late)
        pending = usage_repo.get_quota_rows(session, org_id)[-1]
        assert (pending.name, pending.created, pending.ready) == (
            "late",
            int(datetime(2026, 11, 30, tzinfo=UTC).timestamp()),
            False,
        )
        session.rollback()
