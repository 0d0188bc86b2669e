"""Recording an event: its audit row and, for an event people hear of, a notification
for each person of its audience (e-mails and webhook posts with them), all in the
caller's transaction.

Who hears of what is declared with the events themselves (``app.core.events.HEARD``);
the words are in ``templates/events/<event>.txt`` (``app.notifications.messages``).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from sqlalchemy.orm import Session

from app.audit import service as audit
from app.core.events import HEARD, Audience, Event, Heard
from app.core.models import AuditEvent, User, utcnow
from app.notifications import messages, service
from app.notifications import repository as repo

# Notices that ask admins for a decision, and the topics of decisions that settle them.
ASKING = ("request.submitted", "quota_change.submitted")
DECISIONS = frozenset({"request.approved", "request.adjusted", "request.rejected"})

log = logging.getLogger(__name__)


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
    if heard is not None and heard.topic in DECISIONS and team is not None:
        # A decision settles the notices that asked for it: no admin's bell keeps
        # counting a request another admin decided (or the seed decided long ago).
        repo.mark_read_for_team(session, team.id, ASKING, utcnow())
    if heard is None:
        return row
    words = _words(event, details, summary, team, actor)
    people = _audience(session, heard, team, requester_id, person_id)
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


def _words(
    event: Event,
    details: Mapping[str, Any],
    summary: str,
    team: TeamLike | None,
    actor: User | None,
) -> messages.Words:
    """The notice's words from the event's template; the audit line's if it breaks."""
    try:
        return messages.render(
            event,
            {
                **details,
                "team": team.name if team is not None else "",
                "actor": (actor.display_name or actor.email) if actor is not None else "the portal",
            },
        )
    except Exception:
        # A broken template must not refuse the change it describes (an approval, a
        # cluster ready): people are told in the audit line's words, and the log says why.
        log.exception("the message of %s could not be written; using its audit line", event)
        return messages.Words(title=summary, email=summary, chat=summary)


def _audience(
    session: Session,
    heard: Heard,
    team: TeamLike | None,
    requester_id: int | None,
    person_id: int | None,
) -> list[int | None]:
    """Who hears of it (the caller's own id is left out where they are notified)."""
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
    return people
