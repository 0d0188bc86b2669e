"""Domain events: one enumeration, one table of who hears of what, one template per event
people hear of, rendered from the facts the portal records with it."""

from __future__ import annotations

import re

import pytest
from sqlalchemy import select
from sqlalchemy.orm import Session

from app.core import labels
from app.core.events import HEARD, Event
from app.core.models import Notification, User
from app.notifications import events, messages
from app.notifications.service import EVENTS, PERSONAL_EVENTS

QUOTA = {
    "gpu_quota": "0.5",
    "gpu_limit": "1",
    "over_quota_weight": "1",
    "priority": "100",
    "cpu_quota": "",
    "memory_quota": "",
}
# Facts as the portal records them with each event people hear of.
FACTS: dict[Event, dict[str, object]] = {
    Event.REQUEST_SUBMITTED: {"request_id": 1, **QUOTA},
    Event.QUOTA_CHANGE_SUBMITTED: {"request_id": 1, **QUOTA, "cpu_quota": "4"},
    Event.REQUEST_APPROVED: {"request_id": 1, "changes": {}, **QUOTA, "reason": ""},
    Event.QUOTA_CHANGE_APPROVED: {"request_id": 1, "changes": {}, **QUOTA, "reason": ""},
    Event.REQUEST_ADJUSTED: {
        "request_id": 1,
        "changes": {"gpu_quota": ["0.5", "0.25"], "gpu_limit": ["1", "0.75"]},
        **QUOTA,
        "reason": "the pool is tight",
    },
    Event.QUOTA_CHANGE_ADJUSTED: {
        "request_id": 1,
        "changes": {"memory_quota": ["", "16"]},
        **QUOTA,
        "reason": "",
    },
    Event.REQUEST_REJECTED: {"request_id": 1, "reason": "pool full"},
    Event.BUDGET_ALERT: {
        "percent": "80",
        "used": "400.0",
        "hours": "500",
        "month": "2026-12",
        "stops": False,
    },
    Event.BUDGET_LIMITED: {"month": "2026-12"},
    Event.BUDGET_RESTORED: {"month": "2026-12"},
    **{
        event: {
            "grant_id": 1,
            "gpus": "2",
            "pool": "",
            "window": "from 2026-12-08 09:00 until 2026-12-11 18:00 UTC",
            "reason": "paper deadline",
            **({"ends": "2026-12-11 18:00"} if event == Event.GRANT_ENDING else {}),
        }
        for event in (
            Event.GRANT_SUBMITTED,
            Event.GRANT_APPROVED,
            Event.GRANT_REJECTED,
            Event.GRANT_STARTED,
            Event.GRANT_ENDING,
            Event.GRANT_ENDED,
        )
    },
    Event.QUOTA_CHANGE_REJECTED: {"request_id": 1, "reason": "pool full"},
    Event.TEAM_READY: {"queue": "team-nlp", "namespace": "vcluster-nlp", "vcluster": "nlp"},
    Event.TEAM_RECOVERED: {"queue": "team-nlp", "namespace": "vcluster-nlp", "vcluster": "nlp"},
    Event.PROVISIONING_FAILING: {"attempts": 3, "error": "quota webhook down"},
    Event.MEMBER_ADDED: {"email": "a@example.org", "role": "member"},
    Event.KUBECONFIG_EXPIRING: {"user_id": 2, "expires_at": "2026-12-02 10:00"},
    Event.SLEEP_SOON: {
        "at": "2026-12-07 22:00",
        "why": "nothing ran in it and nobody used it for 8 hours",
        "wake_seconds": 30,
    },
    Event.VCLUSTER_ASLEEP: {"reason": "put to sleep by lead-nlp@example.org", "wake_seconds": 30},
    Event.WAKE_ASKED: {
        "reason": "lead-nlp@example.org asked for a kubeconfig",
        "cause": "kubeconfig",
        "wake_seconds": 30,
    },
    Event.RIGHTSIZING_DIGEST: {
        "week": "2026-W49",
        "used": "0.12",
        "guaranteed": "0.5",
        "suggested": "0.15",
        "direction": "lower",
        "evicted": 4,
        "lost": "3.5",
        "evicted_by": ["vision"],
        "borrowing": True,
    },
    Event.WORKLOAD_EVICTED: {
        "count": 2,
        "workloads": ["default/sweep-3", "default/sweep-4"],
        "more": 0,
        "gpus": "1",
        "by": ["vision"],
        "actions": ["reclaim"],
    },
}


def words(event: Event) -> messages.Words:
    return messages.render(event, {**FACTS[event], "team": "nlp", "actor": "admin@example.org"})


def test_every_event_people_hear_of_has_its_template_and_a_topic() -> None:
    templates = {p.name for p in messages.FOLDER.glob("*.txt") if not p.name.startswith("_")}
    assert templates == {messages.template_name(e) for e in HEARD}
    assert {h.topic for h in HEARD.values()} == set(EVENTS), "every preference has its events"
    assert set(FACTS) == set(HEARD)
    personal = {e for e, h in HEARD.items() if h.topic in PERSONAL_EVENTS}
    assert personal == {Event.KUBECONFIG_EXPIRING}


def test_no_sign_in_event_is_heard() -> None:
    """The auth domain records its events below the notifications: nobody hears of them."""
    assert not [e for e in HEARD if e.value.startswith(("auth.", "token."))]


@pytest.mark.parametrize("event", list(FACTS), ids=str)
def test_each_message_renders_from_its_facts(event: Event) -> None:
    said = words(event)
    assert said.title
    assert "\n" not in said.title, "the bell's line and the subject are one line"
    assert "\n" not in said.chat
    assert "nlp" in said.title
    assert "_" not in said.title.replace("team-nlp", ""), "no field names in people's words"


def test_a_missing_fact_fails_instead_of_saying_nothing() -> None:
    with pytest.raises(Exception, match="reason"):
        messages.render(Event.REQUEST_REJECTED, {"team": "nlp", "actor": "a@example.org"})


def test_changes_are_named_with_the_forms_labels() -> None:
    said = words(Event.REQUEST_ADJUSTED)
    assert said.title == (
        "The cluster for nlp was approved with changes: GPU guarantee 0.5 → 0.25, "
        "GPU limit 1 → 0.75"
    )
    assert "Why: the pool is tight" in said.email
    assert words(Event.QUOTA_CHANGE_ADJUSTED).title.endswith("Memory guarantee none → 16 GB")
    assert labels.label("gpu_quota") == "GPU guarantee"


def test_the_e_mail_says_more_than_the_title() -> None:
    ready = words(Event.TEAM_READY)
    assert ready.title == "nlp is ready: download your kubeconfig"
    assert "queue team-nlp" in ready.email
    assert "vcluster-nlp" in ready.email
    failing = words(Event.PROVISIONING_FAILING)
    assert failing.title == "Provisioning nlp failed 3 times, retrying: quota webhook down"
    assert "The last error: quota webhook down" in failing.email
    evicted = words(Event.WORKLOAD_EVICTED)
    assert evicted.title == "KAI evicted 2 workloads of nlp for team vision (1 GPU)"
    assert evicted.chat == "KAI evicted 2 workloads of nlp for team vision (reclaim)"
    digest = words(Event.RIGHTSIZING_DIGEST)
    assert digest.title == (
        "nlp this week: 0.12 GPU in use on average of 0.5 guaranteed; "
        "suggested: lower the guarantee to 0.15 GPU; work evicted by KAI 4 times"
    )
    assert "KAI evicted the team's work 4 times this week, 3.5 GPU-hours of work lost, " in (
        digest.email
    )
    assert "always by vision while the team borrowed above its guarantee" in digest.email


def test_a_broken_message_never_refuses_the_change(
    session: Session, caplog: pytest.LogCaptureFixture
) -> None:
    """A template that cannot be rendered (here: a fact missing) is a bug to log, not a
    reason to refuse the decision it describes: people hear of it in the audit's words."""
    person = User(email="lead@example.org", display_name="Lead")
    session.add(person)
    session.flush()
    row = events.record(
        session,
        Event.REQUEST_REJECTED,
        actor=None,
        summary="rejected request #7 for nlp: pool full",
        facts={"request_id": 7},  # no "reason": the template needs it
        requester_id=person.id,
    )
    session.flush()
    assert row.action == "request.rejected"
    told = session.scalars(select(Notification).where(Notification.user_id == person.id)).all()
    assert [n.title for n in told] == ["rejected request #7 for nlp: pool full"]
    assert "could not be written" in caplog.text


@pytest.mark.parametrize("event", [e for e in FACTS if e.value not in PERSONAL_EVENTS], ids=str)
def test_a_channels_line_speaks_of_the_team_not_to_you(event: Event) -> None:
    """A team's or the org's chat channel and JSON webhook are read by many: their line
    (the chat block, else the title) never says "you" — "made you a member" posted to
    a team's channel named the wrong person."""
    line = words(event).chat
    assert not re.search(r"\b(you|your|yours)\b", line, re.IGNORECASE), line
