"""Recording an event: its audit row and, for an event people hear of, a notification
for each person of its audience (e-mails and webhook posts with them), all in the
caller's transaction.

``HEARD`` is the one table of who hears of what: the event's topic (what the
preferences page lets a person mute), its audience and where its link points. The
words are in ``templates/events/<event>.txt`` (``app.notifications.messages``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Any, Protocol

from sqlalchemy.orm import Session

from app.audit import service as audit
from app.audit.events import Event
from app.core.models import AuditEvent, User
from app.notifications import messages, service
from app.notifications import repository as repo


class TeamLike(Protocol):
    @property
    def id(self) -> int: ...
    @property
    def name(self) -> str: ...


@dataclass(frozen=True)
class TeamRef:
    """A team by its id and name, where the caller holds no Team row."""

    id: int
    name: str


class Audience(StrEnum):
    REQUESTER = "requester"  # who asked (``requester_id``)
    LEADS = "leads"  # the team's leads
    ADMINS = "admins"  # every admin
    PERSON = "person"  # the one person it is about (``person_id``)


@dataclass(frozen=True)
class Heard:
    topic: str  # a key of notifications.service.EVENTS: what a person mutes it by
    audience: tuple[Audience, ...]
    link: str = "/teams/{team_id}"


_DECIDED = (Audience.REQUESTER, Audience.LEADS)

HEARD: dict[Event, Heard] = {
    Event.REQUEST_SUBMITTED: Heard("request.submitted", (Audience.ADMINS,), "/admin/requests"),
    Event.QUOTA_CHANGE_SUBMITTED: Heard(
        "quota_change.submitted", (Audience.ADMINS,), "/admin/requests"
    ),
    Event.REQUEST_APPROVED: Heard("request.approved", _DECIDED),
    Event.QUOTA_CHANGE_APPROVED: Heard("request.approved", _DECIDED),
    Event.REQUEST_ADJUSTED: Heard("request.adjusted", _DECIDED),
    Event.QUOTA_CHANGE_ADJUSTED: Heard("request.adjusted", _DECIDED),
    Event.REQUEST_REJECTED: Heard("request.rejected", _DECIDED),
    Event.QUOTA_CHANGE_REJECTED: Heard("request.rejected", _DECIDED),
    Event.TEAM_READY: Heard("cluster.ready", (Audience.LEADS,)),
    Event.TEAM_RECOVERED: Heard("cluster.ready", (Audience.LEADS,)),
    Event.PROVISIONING_FAILING: Heard("cluster.failed", (Audience.LEADS, Audience.ADMINS)),
    Event.MEMBER_ADDED: Heard("team.member_added", (Audience.PERSON,)),
    Event.KUBECONFIG_EXPIRING: Heard("kubeconfig.expiring", (Audience.PERSON,)),
    Event.RIGHTSIZING_DIGEST: Heard("rightsizing.digest", (Audience.LEADS,)),
}


def record(
    session: Session,
    event: Event,
    *,
    actor: User | None,
    summary: str,
    team: TeamLike | None = None,
    facts: Mapping[str, Any] | None = None,
    requester_id: int | None = None,
    person_id: int | None = None,
) -> AuditEvent:
    """Record ``event``: the audit line ``summary`` with ``facts`` as its details, and,
    when people hear of it, their notifications in the words of its template (rendered
    from ``facts``, ``team`` and ``actor``). Never to the person who caused it."""
    details = dict(facts or {})
    row = audit.record(
        session,
        actor=actor,
        event=event,
        summary=summary,
        team_id=team.id if team is not None else None,
        details=details,
    )
    heard = HEARD.get(event)
    if heard is None:
        return row
    words = messages.render(
        event,
        {
            **details,
            "team": team.name if team is not None else "",
            "actor": actor.email if actor is not None else "the portal",
        },
    )
    people: list[int | None] = []
    for audience in heard.audience:
        if audience is Audience.REQUESTER:
            people.append(requester_id)
        elif audience is Audience.PERSON:
            people.append(person_id)
        elif audience is Audience.ADMINS:
            people += repo.admin_ids(session)
        elif team is not None:
            people += repo.lead_ids(session, team.id)
    service.notify(
        session,
        event=heard.topic,
        title=words.title,
        email=words.email,
        chat=words.chat,
        link=heard.link.format(team_id=team.id if team is not None else ""),
        user_ids=people,
        team_id=team.id if team is not None else None,
        actor=actor,
    )
    return row
