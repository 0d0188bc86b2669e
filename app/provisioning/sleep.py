"""Sleep and wake: a team's idle vCluster paused as `vcluster pause` pauses it, and
resumed in one action.

People and the org's policy only change what the team wants (``Team.sleep``); the
reconciler pauses or resumes the vCluster (``Reconciler._to_sleep``), so a sleep or a
wake survives a crash and is retried like any step.

What counts as use, for the policy (``idle_pass``): pods of the team's vCluster on the
host (running or waiting: one listing of the cluster per pass), a kubeconfig handed out,
a wake. Each moves ``active_at``. Not used: the vCluster API server's own request
counters (reading them means a connection into every awake vCluster on every pass, and
work started inside the team shows as its pods anyway), nor page views (a look at the
numbers is not a use of the cluster).
"""

from __future__ import annotations

import logging
import math
import statistics
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta

from sqlalchemy.orm import Session

from app.audit import repository as audit
from app.catalog import service as catalog
from app.core import metrics
from app.core.db import Effect, request_effect
from app.core.errors import Conflict, InvalidInput
from app.core.events import Event
from app.core.models import Org, Sleep, Team, TeamStatus, User, utcnow
from app.notifications import events
from app.provisioning import quiet
from app.provisioning import repository as repo
from app.provisioning.backend import ClusterBackend
from app.provisioning.quiet import Quiet
from app.teams import repository as teams

log = logging.getLogger(__name__)

# What pages and messages say a wake takes before any wake was measured here (the
# syncer's start and the API's first answer); then the median of the last measured ones.
WAKE_SECONDS_FIRST = 30
WAKES_COUNTED = 20
WARN_BEFORE = timedelta(hours=1)  # the team is told this long before the policy pauses it
ACTIVE_WRITE_EVERY = timedelta(minutes=5)  # a page view moves ``active_at`` at most this often
SLEEP_HOURS_MAX = 24 * 30


def ask_sleep_now(session: Session, team: Team, *, actor: User, backend: ClusterBackend) -> None:
    """A lead's "put to sleep now" (page and API): refused while a team pod runs on the
    host, as the cluster lists them now."""
    ask_sleep(
        session,
        team,
        actor=actor,
        reason=f"put to sleep by {actor.email}",
        running=backend.running_pods().get(team.namespace, 0),
    )


def wake_seconds(session: Session) -> int:
    """What a wake takes, as pages and messages say it: the median of the last
    ``WAKES_COUNTED`` wakes measured here (asked → the control plane answering, from the
    "awake" audit lines), rounded up to 5 s; ``WAKE_SECONDS_FIRST`` before the first."""
    measured = [
        float(seconds)
        for facts in audit.newest_details(session, Event.VCLUSTER_AWAKE.value, WAKES_COUNTED)
        if isinstance(seconds := facts.get("seconds"), int | float) and seconds >= 0
    ]
    if not measured:
        return WAKE_SECONDS_FIRST
    return max(5, math.ceil(statistics.median(measured) / 5) * 5)


def ask_sleep(
    session: Session, team: Team, *, actor: User | None, reason: str, running: int = 0
) -> None:
    """Put the team's vCluster to sleep (the reconciler pauses it). ``running``: the
    team's pods on the host now; nothing sleeps while one runs."""
    if team.status != TeamStatus.READY:
        raise Conflict(
            f"Only a ready cluster can sleep: {team.name} is {TeamStatus(team.status).value}."
        )
    state = Sleep(team.sleep)
    if state.wanted_asleep:
        raise Conflict(f"{team.name}'s cluster is already asleep or going to sleep.")
    if state == Sleep.WAKING:
        raise Conflict(f"{team.name}'s cluster is waking; put it to sleep once it is awake.")
    if running:
        raise Conflict(
            f"{team.name} runs {running} pod{'s' if running != 1 else ''} on the cluster: "
            "nothing sleeps while a team pod runs. Stop them first."
        )
    now = utcnow()
    team.sleep, team.sleep_asked_at, team.sleep_reason = Sleep.FALLING_ASLEEP, now, reason
    team.next_attempt_at = now
    request_effect(session, Effect.PROVISIONING_DUE)
    events.record(
        session,
        Event.SLEEP_ASKED,
        actor=actor,
        team=team,
        summary=f"{team.name}'s vCluster to sleep: {reason}",
        facts={"reason": reason},
    )


def wake(session: Session, team: Team, *, actor: User | None, cause: str, reason: str) -> bool:
    """Wake the team's vCluster (the reconciler resumes it and waits for its API). False
    when it is awake or waking already."""
    if team.status in (TeamStatus.DECOMMISSIONING, TeamStatus.DECOMMISSIONED):
        raise Conflict(f"{team.name} is being decommissioned: its cluster is not woken.")
    state = Sleep(team.sleep)
    if state in (Sleep.AWAKE, Sleep.WAKING):
        return False
    now = utcnow()
    team.sleep, team.sleep_asked_at, team.sleep_reason = Sleep.WAKING, now, reason
    team.active_at = now
    team.next_attempt_at = now
    request_effect(session, Effect.PROVISIONING_DUE)
    metrics.WAKES.labels(cause).inc()
    events.record(
        session,
        Event.WAKE_ASKED,
        actor=actor,
        team=team,
        summary=f"{team.name}'s vCluster to wake: {reason}",
        facts={"reason": reason, "cause": cause, "wake_seconds": wake_seconds(session)},
    )
    return True


def wake_for_kubeconfig(session: Session, team: Team, *, actor: User) -> str:
    """A kubeconfig asked of a sleeping (or waking) cluster: woken, its API makes the
    credential once it answers; what to tell the person."""
    wake(
        session,
        team,
        actor=actor,
        cause="kubeconfig",
        reason=f"{actor.email} asked for a kubeconfig",
    )
    return f"{team.name}'s cluster was asleep and is waking"


def keep_awake(
    session: Session, team: Team, *, actor: User, until: datetime | None, now: datetime
) -> None:
    """A lead's "keep awake until" (None: no longer kept awake)."""
    if until is not None and until <= now:
        raise InvalidInput({"awake_until": "Choose a time in the future."})
    if until is not None and until - now > timedelta(hours=SLEEP_HOURS_MAX):
        raise InvalidInput({"awake_until": "Keep it awake for at most 30 days at a time."})
    team.awake_until = until
    events.record(
        session,
        Event.SLEEP_ASKED if until is None else Event.WAKE_ASKED,
        actor=actor,
        team=team,
        summary=f"{team.name}'s vCluster kept awake until {until:%Y-%m-%d %H:%M} UTC"
        if until is not None
        else f"{team.name}'s vCluster no longer kept awake",
        facts={"awake_until": until.isoformat() if until is not None else None},
    )


def until_from_hours(hours: str, now: datetime) -> datetime | None:
    """A form's "keep awake for N hours" ("": no longer kept awake)."""
    if not hours.strip():
        return None
    try:
        count = int(hours)
    except ValueError:
        raise InvalidInput({"hours": "Choose how many hours to keep it awake."}) from None
    if not 1 <= count <= SLEEP_HOURS_MAX:
        raise InvalidInput({"hours": f"Choose between 1 and {SLEEP_HOURS_MAX} hours."})
    return now + timedelta(hours=count)


def set_policy(
    session: Session,
    org: Org,
    *,
    after_hours: int | None,
    max_hours: int,
    actor: User,
    quiet_hours: str = "",
    weekends: bool = False,
    time_zone: str = "UTC",
) -> None:
    """The org's sleep policy: idle clusters pause after ``after_hours`` (None: not by
    the hours) or after an hour in quiet hours (``quiet_hours``, ``weekends``, in
    ``time_zone``); a team may choose up to ``max_hours``."""
    errors = {}
    if after_hours is not None and not 1 <= after_hours <= SLEEP_HOURS_MAX:
        errors["sleep_after_hours"] = (
            f"Choose between 1 and {SLEEP_HOURS_MAX} hours, or leave it empty for never."
        )
    if not 1 <= max_hours <= SLEEP_HOURS_MAX:
        errors["sleep_max_hours"] = f"Choose between 1 and {SLEEP_HOURS_MAX} hours."
    elif after_hours is not None and after_hours > max_hours:
        errors["sleep_max_hours"] = "The longest a team may choose is at least the default."
    try:
        hush = quiet.parse(quiet_hours, weekends=weekends, zone=time_zone.strip() or "UTC")
    except InvalidInput as exc:
        errors.update(exc.errors)
        hush = NO_QUIET
    if errors:
        raise InvalidInput(errors)
    org.sleep_after_hours, org.sleep_max_hours = after_hours, max_hours
    org.sleep_quiet_hours = ", ".join(
        f"{s // 60:02d}:{s % 60:02d}-{e // 60:02d}:{e % 60:02d}" for s, e in hush.windows
    )
    org.sleep_weekends, org.time_zone = hush.weekends, hush.zone
    rules = [f"after {after_hours} idle hours"] if after_hours is not None else []
    if hush.any:
        rules.append(f"after an idle hour in quiet hours ({hush.describe()})")
    events.record(
        session,
        Event.SLEEP_ASKED,
        actor=actor,
        summary="sleep policy: idle clusters sleep " + " or ".join(rules)
        if rules
        else "sleep policy: nothing sleeps by policy",
        facts={
            "after_hours": after_hours,
            "max_hours": max_hours,
            "quiet_hours": org.sleep_quiet_hours,
            "weekends": hush.weekends,
            "time_zone": hush.zone,
        },
    )


def set_team_hours(
    session: Session, team: Team, org: Org, *, hours: int | None, actor: User
) -> None:
    """A team's own "asleep after N idle hours", within the org's bounds (None: the org's
    policy); audited."""
    if hours is not None and not 1 <= hours <= org.sleep_max_hours:
        raise InvalidInput(
            {"sleep_after_hours": f"Choose between 1 and {org.sleep_max_hours} hours."}
        )
    if hours == team.sleep_after_hours:
        return
    team.sleep_after_hours = hours
    events.record(
        session,
        Event.SLEEP_ASKED,
        actor=actor,
        team=team,
        summary=f"{team.name}'s vCluster sleeps after {hours} idle hours"
        if hours is not None
        else f"{team.name}'s vCluster sleeps by the org's policy",
        facts={"sleep_after_hours": hours},
    )


def hours_from_form(typed: str) -> int | None:
    """A form's "sleep after N idle hours" ("": the org's policy)."""
    if not typed.strip():
        return None
    try:
        return int(typed)
    except ValueError:
        raise InvalidInput({"sleep_after_hours": "Choose a whole number of hours."}) from None


def touch(team: Team, now: datetime) -> None:
    """Someone used the team's cluster from the portal (a page view, a kubeconfig):
    written at most every few minutes."""
    if team.active_at is None or now - team.active_at >= ACTIVE_WRITE_EVERY:
        team.active_at = now


def sleep_after(team: Team, org: Org, template_hours: int | None = None) -> int | None:
    """The idle hours after which the policy pauses the team's cluster (None: never): the
    team's own choice, else its template's default (``template_hours``), else the org's."""
    if org.sleep_after_hours is None:
        return None
    return team.sleep_after_hours or template_hours or org.sleep_after_hours


def template_hours(team: Team) -> int | None:
    """The idle hours the team's cluster template suggests (None: none)."""
    version = team.template_version
    return catalog.spec_of(version).sleep_after_hours if version is not None else None


QUIET_IDLE = timedelta(hours=1)  # idle this long in quiet hours: asleep
NO_QUIET = Quiet()


@dataclass(frozen=True)
class Idle:
    """When the policy pauses a team's cluster, and why."""

    last_use: datetime
    hours: int | None  # the idle hours (None: only quiet hours put it to sleep)
    awake_until: datetime | None = None  # a lead's "keep awake until"
    quiet: Quiet = NO_QUIET

    @property
    def _times(self) -> tuple[datetime | None, datetime | None]:
        """When the idle hours end, and when quiet hours find it idle an hour."""
        after = self.last_use + timedelta(hours=self.hours) if self.hours is not None else None
        return after, self.quiet.first_from(self.last_use + QUIET_IDLE)

    @property
    def at(self) -> datetime:
        found = [t for t in self._times if t is not None]
        at = min(found) if found else datetime.max.replace(tzinfo=self.last_use.tzinfo)
        return max(at, self.awake_until) if self.awake_until is not None else at

    @property
    def short(self) -> str:
        """What puts it to sleep then: "8 idle hours", "an idle hour in quiet hours (…)"."""
        after, quiet = self._times
        if quiet is not None and (after is None or quiet < after):
            return f"an idle hour in quiet hours ({self.quiet.describe()})"
        hours = self.hours or 0
        return f"{hours} idle hour" + ("s" if hours != 1 else "")

    @property
    def reason(self) -> str:
        after, quiet = self._times
        if quiet is not None and (after is None or quiet < after):
            return (
                "nothing ran in it and nobody used it for an hour in quiet hours "
                f"({self.quiet.describe()})"
            )
        hours = self.hours or 0
        return f"nothing ran in it and nobody used it for {hours} hour" + (
            "s" if hours != 1 else ""
        )


def quiet_of(org: Org) -> Quiet:
    return Quiet(quiet.stored(org.sleep_quiet_hours), org.sleep_weekends, org.time_zone)


def idle_since(team: Team, org: Org, suggested: int | None = None) -> Idle | None:
    """When the team's cluster goes to sleep by policy (None: it does not); ``suggested``:
    its template's idle hours."""
    hours = sleep_after(team, org, suggested)
    hush = quiet_of(org)
    if hours is None and not hush.any:
        return None
    if team.status != TeamStatus.READY or Sleep(team.sleep) != Sleep.AWAKE:
        return None
    uses = [t for t in (team.active_at, team.ready_at) if t is not None]
    if not uses:
        return None
    return Idle(max(uses), hours, team.awake_until, hush)


def count_slept(session: Session, now: datetime) -> None:
    """Add the cluster-seconds asleep since the last count to the month's (the clusters
    asleep now, over the time since: off by at most one pass for a cluster that fell
    asleep or woke in between). A new month starts from its first second."""
    org = teams.get_org(session)
    month = f"{now:%Y-%m}"
    since = org.slept_counted_at or now
    if org.slept_month != month:
        start = now.replace(day=1, hour=0, minute=0, second=0, microsecond=0)
        org.slept_month, org.slept_seconds = month, 0
        since = max(since, start)
    asleep = repo.count_asleep(session)
    org.slept_seconds += int(asleep * max(0.0, (now - since).total_seconds()))
    org.slept_counted_at = now


def policy_on(session: Session) -> bool:
    org = teams.get_org(session)
    return org.sleep_after_hours is not None or quiet_of(org).any


def idle_pass(session: Session, running: Mapping[str, int], now: datetime) -> int:
    """One pass of the policy over the ready, awake teams: a team with pods on the host
    is in use now; one idle past its hours is put to sleep; one within the last hour is
    told once. ``running``: pods per host namespace. Returns how many were put to sleep."""
    org = teams.get_org(session)
    if not policy_on(session):
        return 0
    slept = 0
    for team in repo.awake_ready_teams(session):
        if running.get(team.namespace, 0):
            touch(team, now)
            continue
        idle = idle_since(team, org, template_hours(team))
        if idle is None:
            continue
        if idle.at <= now:
            ask_sleep(session, team, actor=None, reason=idle.reason)
            slept += 1
        elif idle.at - now <= WARN_BEFORE and not _warned(team, idle):
            team.sleep_asked_at = now  # told once per idle stretch
            events.record(
                session,
                Event.SLEEP_SOON,
                actor=None,
                team=team,
                summary=f"told {team.name}'s leads its cluster sleeps at {idle.at:%H:%M} UTC",
                facts={
                    "at": f"{idle.at:%Y-%m-%d %H:%M}",
                    "why": idle.reason,
                    "wake_seconds": wake_seconds(session),
                },
            )
    return slept


def _warned(team: Team, idle: Idle) -> bool:
    """Told already in this idle stretch (a warning is the last thing asked of an awake
    cluster: ``sleep_asked_at`` after its last use)."""
    return team.sleep_asked_at is not None and team.sleep_asked_at > idle.last_use
