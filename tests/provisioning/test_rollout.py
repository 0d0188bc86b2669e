"""The vCluster upgrade turn: one team at a time, across racing workers; stop and resume."""

from __future__ import annotations

import threading
import time

from sqlalchemy import event
from sqlalchemy.orm import Session, sessionmaker

from app.core.db import unit_of_work
from app.core.models import ChartRollout, Team, TeamStatus, utcnow
from app.provisioning import repository as repo
from tests.factories import make_org

VERSION = "0.36.1"


def _teams(factory: sessionmaker[Session], count: int) -> list[int]:
    with unit_of_work(factory) as session:
        org = make_org(session, gpus="8")
        teams = [
            Team(org_id=org.id, name=f"t{i}", status=TeamStatus.READY, vcluster_version="0.36.0")
            for i in range(count)
        ]
        session.add_all(teams)
        session.flush()
        return [t.id for t in teams]


def test_racing_workers_give_the_turn_to_one_team(session_factory: sessionmaker[Session]) -> None:
    team_ids = _teams(session_factory, 4)
    barrier = threading.Barrier(len(team_ids))
    answers: dict[int, str | None] = {}

    def take(team_id: int) -> None:
        with unit_of_work(session_factory) as session:
            # Every worker reads the free turn before any of them commits.
            event.listen(session, "before_commit", lambda _s: time.sleep(0.2))
            barrier.wait(timeout=10)
            answers[team_id] = repo.take_turn(
                session, version=VERSION, team_id=team_id, now=utcnow()
            )

    threads = [threading.Thread(target=take, args=(t,)) for t in team_ids]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    winners = [t for t, why in answers.items() if why is None]
    assert len(answers) == len(team_ids)
    assert len(winners) == 1, answers
    with session_factory() as session:
        row = session.get(ChartRollout, VERSION)
        assert row is not None
        assert row.team_id == winners[0]


def test_stop_keeps_others_waiting_until_resumed(session_factory: sessionmaker[Session]) -> None:
    first, second, _ = _teams(session_factory, 3)
    with unit_of_work(session_factory) as session:
        assert repo.take_turn(session, version=VERSION, team_id=first, now=utcnow()) is None
        waiting = repo.take_turn(session, version=VERSION, team_id=second, now=utcnow())
        assert waiting == f"waiting for its turn to upgrade to {VERSION} (t0 is upgrading)"
        assert repo.stop_rollout(session, version=VERSION, error="t0: boom", now=utcnow())
        refused = repo.take_turn(session, version=VERSION, team_id=second, now=utcnow())
        assert refused == f"the rollout of chart {VERSION} is stopped: t0: boom"
        progress = repo.rollout_progress(session, VERSION)
        assert progress is not None
        assert (progress.state, progress.holder, progress.upgraded, progress.total) == (
            "stopped",
            "t0",
            0,
            3,
        )
        assert repo.resume_rollout(session, version=VERSION, now=utcnow())
        assert not repo.resume_rollout(session, version=VERSION, now=utcnow()), "not stopped"
        assert repo.finish_turn(session, version=VERSION, team_id=first, now=utcnow())
        session.get_one(Team, first).vcluster_version = VERSION
        assert repo.take_turn(session, version=VERSION, team_id=second, now=utcnow()) is None
        progress = repo.rollout_progress(session, VERSION)
        assert progress is not None
        assert (progress.upgraded, progress.total, progress.holder) == (1, 3, "t1")


def test_a_decommissioned_holder_frees_the_turn(session_factory: sessionmaker[Session]) -> None:
    first, second = _teams(session_factory, 2)
    with unit_of_work(session_factory) as session:
        assert repo.take_turn(session, version=VERSION, team_id=first, now=utcnow()) is None
        session.get_one(Team, first).status = TeamStatus.DECOMMISSIONED
        session.flush()
        assert repo.take_turn(session, version=VERSION, team_id=second, now=utcnow()) is None


def test_nothing_to_show_when_every_team_runs_the_version(
    session_factory: sessionmaker[Session],
) -> None:
    _teams(session_factory, 2)
    with unit_of_work(session_factory) as session:
        assert repo.rollout_progress(session, "0.36.0") is None
        assert repo.rollout_progress(session, VERSION) is not None


def test_a_team_on_either_side_of_the_version_or_its_template_is_behind(
    session_factory: sessionmaker[Session],
) -> None:
    # The overview counts the teams only when one is behind; "behind" is found along the
    # version index on both sides of the wanted version, and along the template index.
    first, second = _teams(session_factory, 2)
    with unit_of_work(session_factory) as session:
        assert repo.rollout_progress(session, "0.36.0") is None
        session.get_one(Team, first).vcluster_version = "0.37.0"  # newer: moved back too
        session.flush()
        progress = repo.rollout_progress(session, "0.36.0")
        assert progress is not None
        assert (progress.total, progress.upgraded) == (2, 1)
        session.get_one(Team, first).vcluster_version = "0.36.0"
        team = session.get_one(Team, second)
        team.template_version_id, team.template_installed_id = 7, 6  # installed an older one
        session.flush()
        progress = repo.rollout_progress(session, "0.36.0")
        assert progress is not None
        assert (progress.total, progress.upgraded) == (2, 1)
        team.template_installed_id = None  # never installed
        session.flush()
        progress = repo.rollout_progress(session, "0.36.0")
        assert progress is not None
        assert (progress.total, progress.upgraded) == (2, 1)
        team.template_installed_id = 7
        session.get_one(Team, first).status = TeamStatus.DECOMMISSIONED
        session.get_one(Team, first).vcluster_version = "0.1.0"  # not counted: gone
        session.flush()
        assert repo.rollout_progress(session, "0.36.0") is None


def test_a_stopped_rollout_shows_its_counts_with_nobody_behind(
    session_factory: sessionmaker[Session],
) -> None:
    first, _second = _teams(session_factory, 2)
    with unit_of_work(session_factory) as session:
        repo.take_turn(session, version="0.36.0", team_id=first, now=utcnow())
        repo.stop_rollout(session, version="0.36.0", error="stuck", now=utcnow())
        progress = repo.rollout_progress(session, "0.36.0")
        assert progress is not None
        assert (progress.state, progress.total, progress.upgraded) == ("stopped", 2, 2)
