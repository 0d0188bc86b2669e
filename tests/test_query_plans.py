"""Queries that must not scan a table that grows without bound, checked in PostgreSQL's
own plans (sequential and bitmap scans switched off, so a usable index shows whatever the
size)."""

from __future__ import annotations

import pytest
from sqlalchemy import select, text
from sqlalchemy.dialects import postgresql
from sqlalchemy.orm import Session, sessionmaker

from app.audit import repository as audit
from app.auth import repository as auth
from app.core.models import COMMITTED_STATUSES, LIVE_STATUSES
from app.teams import repository as teams

pytestmark = pytest.mark.parametrize("db_url", ["postgresql"], indirect=True)


def _plan(session: Session, statement: str) -> str:
    session.execute(text("SET LOCAL enable_seqscan = off"))
    # Nor bitmap scans, which the planner takes over a table it has no statistics of: an
    # index read in its order (and from the index alone, where it holds every column)
    # shows as it does in a large org.
    session.execute(text("SET LOCAL enable_bitmapscan = off"))
    rows = session.execute(text("EXPLAIN " + statement)).scalars().all()
    return "\n".join(rows)


def _ready_teams(session_factory: sessionmaker[Session], versions: list[str]) -> None:
    """A pool with one ready team at each of these chart versions."""
    from app.core.db import unit_of_work
    from app.core.models import Team, TeamStatus
    from tests.factories import make_org

    with unit_of_work(session_factory) as session:
        org = make_org(session, gpus="8")
        session.add_all(
            Team(org_id=org.id, name=f"t{i}", status=TeamStatus.READY, vcluster_version=version)
            for i, version in enumerate(versions)
        )


def test_the_overview_drift_list_reads_the_action_index(
    session_factory: sessionmaker[Session],
) -> None:
    # The ids of the newest repairs, read with the overview's figures.
    query = select(*audit.newest_ids_columns("provisioning.drift_repaired", 5))
    compiled = query.compile(
        dialect=postgresql.dialect(),  # type: ignore[no-untyped-call]
        compile_kwargs={"literal_binds": True},
    )
    with session_factory() as session:
        plan = _plan(session, str(compiled))
    assert plan.count("ix_audit_events_action_id") == 5, plan
    assert "Sort" not in plan, "newest first straight from the index, no sort: " + plan


def test_an_overview_page_reads_its_ids_along_the_name_index(
    session_factory: sessionmaker[Session],
) -> None:
    # The live teams (the overview's default) in constants, as the index's predicate is
    # written: a prepared statement's parameters could not be matched to it, and a later
    # page would build and sort every team's joined row to skip them.
    live = tuple(s.value for s in LIVE_STATUSES)
    committed = tuple(s.value for s in COMMITTED_STATUSES)
    query, _count = teams._page_query(live, "", "name", committed)
    dialect = postgresql.dialect()  # type: ignore[no-untyped-call]
    assert not {k for k in query.compile(dialect=dialect).params if "status" in k}
    compiled = query.params(offset=4950, limit=50).compile(
        dialect=dialect, compile_kwargs={"literal_binds": True}
    )
    assert "NOT IN ('rejected', 'decommissioned')" in str(compiled)
    with session_factory() as session:
        plan = _plan(session, str(compiled))
    assert plan.count("Index Only Scan using uq_teams_live_name") == 1, plan
    # The teams holding a guarantee are counted from the ready view: the statement counts
    # only the submitted ones, along the status index (counting every live team was a
    # scan of the teams table at 10,000 teams).
    assert "Index Only Scan using ix_teams_status" in plan, plan
    assert "Seq Scan on teams" not in plan, plan


def test_the_overview_counts_the_teams_for_a_rollout_only_when_one_is_behind(
    session_factory: sessionmaker[Session],
) -> None:
    # Whether any team is behind is asked along two indexes; the counts, which read every
    # team, are not run when none is (at 10,000 teams they were 1-2 ms of every view).
    from app.provisioning import repository as provisioning

    _ready_teams(session_factory, ["0.36.1"] * 3)
    with session_factory() as session:
        # The table's statistics as of now: left from an earlier test's rows, they
        # made the planner read the wider index (the plan depended on the test order).
        session.execute(text("ANALYZE teams"))
        session.commit()
    compiled = select(*provisioning.rollout_columns("0.36.1")).compile(
        dialect=postgresql.dialect(),  # type: ignore[no-untyped-call]
        compile_kwargs={"literal_binds": True},
    )
    with session_factory() as session:
        plan = _plan(session, str(compiled))
    assert "ix_teams_chart_version" in plan, plan
    assert "ix_teams_template_behind" in plan, plan
    with session_factory() as session:
        run = "\n".join(
            session.execute(text("EXPLAIN (ANALYZE, COSTS OFF) " + str(compiled))).scalars()
        )
    counts = run[run.index("CTE rollout_counts") :].splitlines()[1]
    assert "Aggregate" in counts, run
    assert "never executed" in counts, run


def test_the_api_pages_every_team_along_the_name_index(
    session_factory: sessionmaker[Session],
) -> None:
    # An admin's teams list (every status) in name, then id order: read from the index
    # in that order, not a sort of every team (5 ms of each page at 10,000 teams).
    query = teams.teams_query(None, None, "", limit=50, offset=100)
    compiled = query.compile(
        dialect=postgresql.dialect(),  # type: ignore[no-untyped-call]
        compile_kwargs={"literal_binds": True},
    )
    with session_factory() as session:
        plan = _plan(session, str(compiled))
    assert "ix_teams_name_id" in plan, plan
    assert "Sort" not in plan, plan


def test_the_signed_in_lookup_reads_the_users_memberships_by_the_user_index(
    session_factory: sessionmaker[Session],
) -> None:
    # Every signed-in request: the primary key (team, user) would be walked whole for one
    # user's rows (0.4 ms of PostgreSQL a request at 10,000 teams).
    lookup = auth.signed_in("0" * 64)
    compiled = lookup.statement.params(lookup.params).compile(
        dialect=postgresql.dialect(),  # type: ignore[no-untyped-call]
        compile_kwargs={"literal_binds": True},
    )
    with session_factory() as session:
        plan = _plan(session, str(compiled))
    assert "ix_team_members_user" in plan, plan


def test_the_overview_figures_keep_one_generic_plan(
    session_factory: sessionmaker[Session],
) -> None:
    # The portal's statements are prepared by the driver after five runs; PostgreSQL then
    # keeps one generic plan only while it looks no costlier than the plans made for the
    # values. An event name, a status or the chart version sent as a parameter made the
    # generic plan look far costlier (an average action's thousands of events, where the
    # drift repairs are a handful), so the overview's statement was planned anew on each
    # view from about 1,000 teams up: 3-5 ms of the database's CPU a view. A skewed audit
    # log and chart version are built here as a large org has them.
    from app.reads.overview import overview_figures_read

    _ready_teams(session_factory, ["0.36.1" if i % 50 else "0.36.0" for i in range(400)])
    with session_factory() as session:
        session.execute(
            text(
                "INSERT INTO audit_events (at, actor, action, summary, details) "
                "SELECT now(), 'portal', CASE WHEN n % 2000 = 0 THEN "
                "'provisioning.drift_repaired' ELSE 'usage.sampled' || (n % 3) END, '', '{}' "
                "FROM generate_series(1, 20000) AS n"
            )
        )
        session.commit()
    with session_factory() as session:
        session.execute(text("ANALYZE"))
        session.commit()
    read = overview_figures_read("0.36.1")
    with session_factory() as session:
        compiled = read.statement.compile(dialect=session.get_bind().dialect)
        driver = session.connection().connection.driver_connection
        assert driver is not None
        for _ in range(10):
            driver.execute(str(compiled), {**compiled.params, **read.params}, prepare=True)
        plans = driver.execute(  # the overview's (the set-up's own may be prepared too)
            "SELECT generic_plans, custom_plans FROM pg_prepared_statements "
            "WHERE statement LIKE '%drift_repaired%'"
        ).fetchall()
    assert len(plans) == 1, plans
    generic, custom = plans[0]
    assert (generic, custom) == (5, 5), f"{generic} generic and {custom} custom plans"
