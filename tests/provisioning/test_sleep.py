"""Sleep and wake as reconciler states: asked by people or the org's policy, brought about
by the reconciler, resumable, and a pause or resume by hand taken as the team's state."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from sqlalchemy import select
from sqlalchemy.orm import Session, sessionmaker

from app.adapters.simulated import SimulatedBackend
from app.core.db import unit_of_work
from app.core.errors import Conflict, InvalidInput
from app.core.models import AuditEvent, Notification, Sleep, Step, Team, TeamStatus, User, utcnow
from app.provisioning import quiet, sleep
from app.provisioning import repository as provisioning_repo
from app.provisioning.reconciler import Reconciler
from app.teams import repository as repo
from app.teams import service
from tests.provisioning.test_reconciler import approved_team


def ready_team(factory: sessionmaker[Session], reconciler: Reconciler, name: str = "nlp") -> int:
    team_id = approved_team(factory, name)
    reconciler.run_once()
    with factory() as session:
        assert repo.get_team(session, team_id).status == "ready"
    return team_id


def team(factory: sessionmaker[Session], team_id: int) -> Team:
    with factory() as session:
        return repo.get_team(session, team_id)


def events_of(factory: sessionmaker[Session], team_id: int) -> list[tuple[str, str]]:
    with factory() as session:
        rows = session.scalars(
            select(AuditEvent).where(AuditEvent.team_id == team_id).order_by(AuditEvent.id)
        ).all()
        return [(row.action, row.summary) for row in rows if row.action.startswith("vcluster.")]


def lead(factory: sessionmaker[Session]) -> User:
    with factory() as session:
        return session.scalars(select(User).where(User.email == "lead-nlp@example.org")).one()


def test_a_sleep_pauses_the_vcluster_keeps_its_queue_and_a_wake_resumes_it(
    session_factory: sessionmaker[Session], reconciler: Reconciler, backend: SimulatedBackend
) -> None:
    team_id = ready_team(session_factory, reconciler)
    with unit_of_work(session_factory) as session:
        sleep.ask_sleep(
            session, repo.get_team(session, team_id), actor=lead(session_factory), reason="asked"
        )
    assert team(session_factory, team_id).sleep == Sleep.FALLING_ASLEEP
    reconciler.run_once()
    slept = team(session_factory, team_id)
    assert (slept.sleep, slept.status) == (Sleep.ASLEEP, "ready")
    assert slept.asleep_since is not None
    spec = next(o.spec for (s, t), o in backend._objects.items() if s == Step.QUEUE)
    assert backend.observe(Step.VCLUSTER, spec).state == "asleep"
    assert backend.observe(Step.QUEUE, spec).done  # the queue stays
    assert backend.running_pods() == {}  # nothing of it runs
    # A resync of a sleeping team is no drift and keeps it asleep.
    with unit_of_work(session_factory) as session:
        repo.get_team(session, team_id).next_attempt_at = utcnow()
    reconciler.run_once()
    assert team(session_factory, team_id).sleep == Sleep.ASLEEP
    assert not any(
        a == "provisioning.drift_repaired" for a, _ in events_of(session_factory, team_id)
    )

    with unit_of_work(session_factory) as session:
        woke = sleep.wake(
            session,
            repo.get_team(session, team_id),
            actor=lead(session_factory),
            cause="person",
            reason="woken by its lead",
        )
    assert woke
    reconciler.run_once()
    awake = team(session_factory, team_id)
    assert (awake.sleep, awake.asleep_since) == (Sleep.AWAKE, None)
    actions = [a for a, _ in events_of(session_factory, team_id)]
    assert actions == [
        "vcluster.sleep_asked",
        "vcluster.asleep",
        "vcluster.wake_asked",
        "vcluster.awake",
    ]
    assert "s after it was asked to wake" in events_of(session_factory, team_id)[-1][1]


def test_a_pause_or_resume_by_hand_is_taken_as_the_teams_state(
    session_factory: sessionmaker[Session], reconciler: Reconciler, backend: SimulatedBackend
) -> None:
    team_id = ready_team(session_factory, reconciler)
    backend.pause_by_hand("nlp")
    with unit_of_work(session_factory) as session:
        repo.get_team(session, team_id).next_attempt_at = utcnow()
    reconciler.run_once()
    paused = team(session_factory, team_id)
    assert paused.sleep == Sleep.ASLEEP  # not resumed as drift
    assert "paused outside the portal" in paused.sleep_reason
    backend.resume_by_hand("nlp")
    with unit_of_work(session_factory) as session:
        repo.get_team(session, team_id).next_attempt_at = utcnow()
    reconciler.run_once()
    assert team(session_factory, team_id).sleep == Sleep.AWAKE
    assert "resumed outside the portal" in events_of(session_factory, team_id)[-1][1]


def test_a_failed_pause_is_retried_and_shown(
    session_factory: sessionmaker[Session], reconciler: Reconciler, backend: SimulatedBackend
) -> None:
    team_id = ready_team(session_factory, reconciler)
    with unit_of_work(session_factory) as session:
        sleep.ask_sleep(session, repo.get_team(session, team_id), actor=None, reason="asked")
    backend.inject_failure(Step.VCLUSTER, team="nlp", message="the API server is down")
    reconciler.run_once()
    failed = team(session_factory, team_id)
    assert failed.sleep == Sleep.FALLING_ASLEEP
    assert "the API server is down" in (failed.last_error or "")
    with unit_of_work(session_factory) as session:
        repo.get_team(session, team_id).next_attempt_at = utcnow()
    reconciler.run_once()
    assert team(session_factory, team_id).sleep == Sleep.ASLEEP


def test_bad_asks_get_clear_answers(
    session_factory: sessionmaker[Session], reconciler: Reconciler
) -> None:
    team_id = ready_team(session_factory, reconciler)
    with unit_of_work(session_factory) as session:
        nlp = repo.get_team(session, team_id)
        with pytest.raises(Conflict, match="runs 2 pods on the cluster: nothing sleeps"):
            sleep.ask_sleep(session, nlp, actor=None, reason="asked", running=2)
        assert not sleep.wake(session, nlp, actor=None, cause="person", reason="x")  # awake
        org = repo.get_org(session)
        admin = session.scalars(select(User).where(User.is_admin)).one()
        with pytest.raises(InvalidInput, match="sleep_after_hours"):
            sleep.set_policy(session, org, after_hours=0, max_hours=24, actor=admin)
        with pytest.raises(InvalidInput, match="at least the default"):
            sleep.set_policy(session, org, after_hours=48, max_hours=24, actor=admin)
        sleep.set_policy(session, org, after_hours=8, max_hours=24, actor=admin)
        with pytest.raises(InvalidInput, match="between 1 and 24 hours"):
            sleep.set_team_hours(session, nlp, org, hours=25, actor=admin)
        now = utcnow()
        with pytest.raises(InvalidInput, match="in the future"):
            sleep.keep_awake(session, nlp, actor=admin, until=now - timedelta(hours=1), now=now)
        sleep.ask_sleep(session, nlp, actor=None, reason="asked")
        with pytest.raises(Conflict, match="already asleep"):
            sleep.ask_sleep(session, nlp, actor=None, reason="again")
        nlp.status = TeamStatus.DECOMMISSIONING
        with pytest.raises(Conflict, match="being decommissioned"):
            sleep.wake(session, nlp, actor=None, cause="person", reason="x")


def test_the_policy_sleeps_an_idle_team_after_telling_its_leads_never_one_with_pods(
    session_factory: sessionmaker[Session], reconciler: Reconciler
) -> None:
    idle_id = ready_team(session_factory, reconciler, "nlp")
    busy_id = ready_team(session_factory, reconciler, "vision")
    now = utcnow()
    with unit_of_work(session_factory) as session:
        org = repo.get_org(session)
        admin = session.scalars(select(User).where(User.is_admin)).one()
        assert sleep.idle_pass(session, {}, now) == 0  # the policy is off by default
        sleep.set_policy(session, org, after_hours=8, max_hours=24, actor=admin)
        for team_id in (idle_id, busy_id):
            t = repo.get_team(session, team_id)
            t.ready_at = t.active_at = now - timedelta(hours=7, minutes=30)
    with unit_of_work(session_factory) as session:
        # Within its last hour: its leads are told, once.
        assert sleep.idle_pass(session, {"vcluster-vision": 1}, now) == 0
        assert sleep.idle_pass(session, {"vcluster-vision": 1}, now + timedelta(minutes=5)) == 0
    with session_factory() as session:
        told = session.scalars(select(Notification).where(Notification.team_id == idle_id)).all()
        assert [n.title for n in told if "goes to sleep" in n.title] == [
            "nlp's cluster goes to sleep at "
            f"{now + timedelta(minutes=30):%Y-%m-%d %H:%M} UTC: keep it awake from the team "
            "page if you need it"
        ]
        # Its link leads to the keep-awake form on the team page (a form: a link that
        # changed anything would be followed by mail scanners).
        assert {n.link for n in told if "goes to sleep" in n.title} == {
            f"/teams/{idle_id}#keep-awake"
        }
        # Its pods are use (written at most every few minutes).
        assert repo.get_team(session, busy_id).active_at == now + timedelta(minutes=5)
    with unit_of_work(session_factory) as session:
        assert sleep.idle_pass(session, {"vcluster-vision": 1}, now + timedelta(minutes=31)) == 1
    assert team(session_factory, idle_id).sleep == Sleep.FALLING_ASLEEP
    assert team(session_factory, idle_id).sleep_reason == (
        "nothing ran in it and nobody used it for 8 hours"
    )
    assert team(session_factory, busy_id).sleep == Sleep.AWAKE


def test_keep_awake_holds_the_policy_off_until_then(
    session_factory: sessionmaker[Session], reconciler: Reconciler
) -> None:
    team_id = ready_team(session_factory, reconciler)
    now = utcnow()
    with unit_of_work(session_factory) as session:
        org = repo.get_org(session)
        admin = session.scalars(select(User).where(User.is_admin)).one()
        sleep.set_policy(session, org, after_hours=1, max_hours=24, actor=admin)
        nlp = repo.get_team(session, team_id)
        nlp.ready_at = nlp.active_at = now - timedelta(hours=5)
        sleep.keep_awake(session, nlp, actor=admin, until=now + timedelta(hours=2), now=now)
    with unit_of_work(session_factory) as session:
        assert sleep.idle_pass(session, {}, now + timedelta(hours=1)) == 0
        assert sleep.idle_pass(session, {}, now + timedelta(hours=2, minutes=1)) == 1


def test_quiet_hours_are_read_as_people_write_them_and_overlaps_refused() -> None:
    night = quiet.parse("22:00-07:00, 12:00 - 13:00", weekends=True, zone="Europe/Berlin")
    assert night.windows == ((22 * 60, 7 * 60), (12 * 60, 13 * 60))
    assert night.describe() == "22:00-07:00 and 12:00-13:00 and weekends, Europe/Berlin"
    with pytest.raises(InvalidInput, match="22:00-07:00 and 06:00-08:00 overlap"):
        quiet.parse("22:00-07:00, 06:00-08:00", weekends=False, zone="UTC")
    with pytest.raises(InvalidInput, match="write each window as HH:MM-HH:MM"):
        quiet.parse("10pm-7am", weekends=False, zone="UTC")
    with pytest.raises(InvalidInput, match="starts and ends at different times"):
        quiet.parse("08:00-08:00", weekends=False, zone="UTC")
    with pytest.raises(InvalidInput, match="'Mars/Olympus' is not a time zone"):
        quiet.parse("", weekends=True, zone="Mars/Olympus")


def test_quiet_hours_find_the_next_quiet_moment_in_the_orgs_time_zone() -> None:
    berlin = quiet.parse("22:00-07:00", weekends=True, zone="Europe/Berlin")
    # Wednesday 2026-12-09 15:00 UTC is 16:00 in Berlin: quiet from 22:00 Berlin, 21:00 UTC.
    afternoon = datetime(2026, 12, 9, 15, 0, tzinfo=UTC)
    assert not berlin.holds(afternoon)
    assert berlin.first_from(afternoon) == datetime(2026, 12, 9, 21, 0, tzinfo=UTC)
    # 05:30 UTC is 06:30 in Berlin: within the night window.
    assert berlin.holds(datetime(2026, 12, 10, 5, 30, tzinfo=UTC))
    assert not berlin.holds(datetime(2026, 12, 10, 6, 30, tzinfo=UTC))
    # Saturday noon is quiet (weekends); a summer evening keeps to local time (UTC+2).
    assert berlin.holds(datetime(2026, 12, 12, 11, 0, tzinfo=UTC))
    summer = datetime(2026, 7, 8, 12, 0, tzinfo=UTC)
    assert berlin.first_from(summer) == datetime(2026, 7, 8, 20, 0, tzinfo=UTC)
    assert quiet.Quiet().first_from(summer) is None


def test_in_quiet_hours_an_idle_cluster_sleeps_after_an_hour(
    session_factory: sessionmaker[Session], reconciler: Reconciler
) -> None:
    team_id = ready_team(session_factory, reconciler)
    # A Thursday, 23:30 in UTC: within 22:00-07:00.
    night = datetime(2026, 12, 10, 23, 30, tzinfo=UTC)
    with unit_of_work(session_factory) as session:
        org = repo.get_org(session)
        admin = session.scalars(select(User).where(User.is_admin)).one()
        with pytest.raises(InvalidInput, match="overlap"):
            sleep.set_policy(
                session,
                org,
                after_hours=None,
                max_hours=24,
                actor=admin,
                quiet_hours="22:00-07:00, 23:00-23:30",
            )
        sleep.set_policy(
            session, org, after_hours=None, max_hours=24, actor=admin, quiet_hours="22:00-07:00"
        )
        nlp = repo.get_team(session, team_id)
        nlp.ready_at = nlp.active_at = night - timedelta(minutes=40)
    with unit_of_work(session_factory) as session:
        assert sleep.idle_pass(session, {}, night) == 0  # idle 40 minutes: told, not asleep
        assert sleep.idle_pass(session, {}, night + timedelta(minutes=21)) == 1
    assert team(session_factory, team_id).sleep_reason == (
        "nothing ran in it and nobody used it for an hour in quiet hours (22:00-07:00, UTC)"
    )


def test_a_sleeping_cluster_is_decommissioned_as_it_is(
    session_factory: sessionmaker[Session], reconciler: Reconciler, backend: SimulatedBackend
) -> None:
    team_id = ready_team(session_factory, reconciler)
    with unit_of_work(session_factory) as session:
        sleep.ask_sleep(session, repo.get_team(session, team_id), actor=None, reason="asked")
    reconciler.run_once()
    assert team(session_factory, team_id).sleep == Sleep.ASLEEP
    with unit_of_work(session_factory) as session:
        admin = session.scalars(select(User).where(User.is_admin)).one()
        service.decommission(session, actor=admin, team=repo.get_team(session, team_id))
        assert provisioning_repo.count_asleep(session) == 0  # no longer counted asleep
    for _ in range(3):
        reconciler.run_once()
    gone = team(session_factory, team_id)
    assert gone.status == TeamStatus.DECOMMISSIONED
    assert backend.empty


def test_a_steady_ready_team_asked_to_sleep_gets_the_full_pass(
    session_factory: sessionmaker[Session], reconciler: Reconciler
) -> None:
    """Ready teams found as recorded are re-checked together without their full pass: a
    sleep (or a wake) asked of one is work, never settled as "as recorded"."""
    team_id = ready_team(session_factory, reconciler)
    with unit_of_work(session_factory) as session:
        repo.get_team(session, team_id).next_attempt_at = utcnow()
    reconciler.run_once()  # settled
    assert team_id in reconciler._observed_as_recorded([team_id])
    with unit_of_work(session_factory) as session:
        sleep.ask_sleep(session, repo.get_team(session, team_id), actor=None, reason="asked")
    assert reconciler._observed_as_recorded([team_id]) == {}
    reconciler.run_once()
    assert team(session_factory, team_id).sleep == Sleep.ASLEEP
