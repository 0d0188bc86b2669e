"""Writing notifications with the change they describe, fanning them out to the channels,
and reading them.

``notify`` runs in the caller's transaction: the in-app notification, one e-mail delivery
per person who wants it, and one post per webhook of the team and of the org exist
exactly when the change does. Nothing is sent here; the delivery worker does that.
"""

from __future__ import annotations

from collections.abc import Iterable
from urllib.parse import urlsplit

from sqlalchemy.orm import Session

from app.audit import service as audit
from app.auth.secrets import new_secret, seal
from app.core import outbound
from app.core.db import Effect, configured_channels, request_effect
from app.core.errors import InvalidInput, NotFound
from app.core.events import Event
from app.core.models import Delivery, Notification, User, Webhook, WebhookKind, utcnow
from app.core.text import one_line
from app.notifications import repository as repo

SHOWN = 30

# Every event a person can hear of, with how the preferences page names it.
EVENTS: dict[str, str] = {
    "request.submitted": "A cluster request waits for a decision (admins)",
    "quota_change.submitted": "A quota change waits for a decision (admins)",
    "grant.submitted": "A temporary grant waits for a decision (admins)",
    "quota.grant": "Your team's temporary grant starts, ends soon or ends",
    "quota.budget": "Your team's GPU-hour budget passes a threshold or stops borrowing",
    "request.approved": "Your team's request was approved",
    "request.adjusted": "Your team's request was approved with changes",
    "request.rejected": "Your team's request was rejected",
    "cluster.ready": "Your team's cluster is ready",
    "cluster.failed": "Provisioning keeps failing",
    "team.member_added": "You were added to a team",
    "kubeconfig.expiring": "Your kubeconfig expires within a day",
    "rightsizing.digest": "Weekly right-sizing digest (leads)",
    "workload.evicted": "KAI evicted your team's work (once per burst)",
    "cluster.sleep": "Your team's cluster goes to sleep, sleeps or is woken",
}
# About one person only: never posted to a team's or the org's channel.
PERSONAL_EVENTS = frozenset({"kubeconfig.expiring"})
PERSONAL_CHANNELS = ("inapp", "email")
WEBHOOK_KINDS = ("slack", "json")


def notify(
    session: Session,
    *,
    event: str,
    title: str,
    link: str,
    user_ids: Iterable[int | None],
    team_id: int | None = None,
    actor: User | None = None,
    email: str = "",
    chat: str = "",
) -> int:
    """One notification per person (never to the person who caused it), an e-mail for each
    who wants one, and one post per webhook of the team and of the org; all in the
    caller's transaction. Returns how many people were notified. ``email`` and ``chat``:
    the e-mail's text and the chat line (default: the title). Called by
    ``notifications.events.record``, which takes the words from the event's template."""
    people = sorted({u for u in user_ids if u is not None and (actor is None or u != actor.id)})
    # A title is one line wherever it goes (the bell, an e-mail's Subject, a chat line,
    # a webhook's field): a line break in a rejection reason or a backend's error would
    # otherwise make the e-mail unsendable.
    title, link = one_line(title, 300), one_line(link)[:300]
    words = {"email": email or title, "slack": chat or title, "json": ""}
    off = repo.muted(session, people, event)
    mail = "email" in configured_channels(session)
    now = utcnow()
    for user_id in people:
        # A notification muted in the bell is still the e-mail's record: born read.
        note = Notification(
            user_id=user_id,
            team_id=team_id,
            event=event,
            title=title,
            link=link,
            created_at=now,
            read_at=now if (user_id, "inapp") in off else None,
        )
        session.add(note)
        if mail and (user_id, "email") not in off:
            session.flush()
            session.add(
                _delivery(
                    "email", event, title, words["email"], link, team_id, notification_id=note.id
                )
            )
    hooks: list[Webhook] = []
    if event not in PERSONAL_EVENTS:
        scopes = ["org"] if team_id is None else ["org", f"team:{team_id}"]
        hooks = repo.webhooks_for(session, scopes)
        # A channel is read by many: its line speaks of the team, not to "you".
        said = one_line(chat, 300) if chat else title
        for hook in hooks:
            body = words.get(hook.kind, "")
            session.add(_delivery(hook.kind, event, said, body, link, team_id, webhook_id=hook.id))
    if hooks or (mail and people):
        request_effect(session, Effect.NOTIFIED)
    return len(people)


def _delivery(
    channel: str,
    event: str,
    title: str,
    body: str,
    link: str,
    team_id: int | None,
    *,
    notification_id: int | None = None,
    webhook_id: int | None = None,
) -> Delivery:
    now = utcnow()
    return Delivery(
        channel=channel,
        event=event,
        title=title,
        body=body,
        link=link,
        team_id=team_id,
        notification_id=notification_id,
        webhook_id=webhook_id,
        status="pending",
        attempts=0,
        next_attempt_at=now,
        created_at=now,
        last_error="",
    )


def unread(session: Session, user: User) -> int:
    return repo.count_unread(session, user.id)


def recent(session: Session, user: User) -> list[Notification]:
    return repo.get_recent(session, user.id, SHOWN)


def mark_all_read(session: Session, user: User) -> int:
    return repo.mark_read(session, user.id, utcnow())


# Preferences -------------------------------------------------------------------------


def preferences(session: Session, user: User) -> dict[str, dict[str, bool]]:
    """event -> channel -> on (everything is on until muted)."""
    off = repo.get_mutes(session, user.id)
    return {e: {c: (e, c) not in off for c in PERSONAL_CHANNELS} for e in EVENTS}


def save_preferences(session: Session, user: User, on: Iterable[str]) -> int:
    """``on``: "event:channel" keys that are ticked; everything else is muted. Returns how
    many pairs are muted."""
    ticked = set(on)
    unknown = sorted(k for k in ticked if k.partition(":")[::2] not in _pairs())
    if unknown:
        raise InvalidInput({"events": f"unknown event or channel: {', '.join(unknown[:3])}"})
    off = {p for p in _pairs() if f"{p[0]}:{p[1]}" not in ticked}
    repo.set_mutes(session, user.id, off)
    return len(off)


def _pairs() -> set[tuple[str, str]]:
    return {(e, c) for e in EVENTS for c in PERSONAL_CHANNELS}


# Webhooks ----------------------------------------------------------------------------


def scope_of(team_id: int | None) -> str:
    return "org" if team_id is None else f"team:{team_id}"


def get_webhooks(session: Session, team_id: int | None) -> dict[str, Webhook]:
    return {h.kind: h for h in repo.webhooks_for(session, [scope_of(team_id)])}


def check_webhook_url(
    url: str, *, allow_private: bool, development: bool, resolver: outbound.Resolver | None = None
) -> str | None:
    """Why the portal must not post to ``url``, or None. Outside development only https;
    every address of the host must be public unless private ones are allowed (a lead must
    not make the portal reach into the internal network). The delivery worker checks
    again when it sends, and connects to the address it checked."""
    try:
        outbound.check(
            url, https_only=not development, allow_private=allow_private, resolver=resolver
        )
    except outbound.Refused as exc:
        return str(exc)
    return None


def hint_of(url: str) -> str:
    """What pages show of a webhook: scheme and host only (a Slack path is the secret)."""
    parts = urlsplit(url)
    return f"{parts.scheme}://{parts.netloc}/…"


def save_webhook(
    session: Session,
    *,
    actor: User,
    team_id: int | None,
    kind: str,
    url: str,
    key: str,
    allow_private: bool,
    development: bool,
) -> tuple[Webhook, str | None]:
    """Set (or replace) the scope's webhook of ``kind``. Returns it and, for a new JSON
    webhook, its signing secret: shown once, stored sealed."""
    if kind not in WEBHOOK_KINDS:
        raise InvalidInput({"kind": "choose slack or json"})
    url = url.strip()
    problem = check_webhook_url(url, allow_private=allow_private, development=development)
    if problem:
        raise InvalidInput({"url": problem})
    scope = scope_of(team_id)
    hook = repo.get_webhook(session, scope, kind)
    secret: str | None = None
    if hook is None:
        hook = Webhook(scope=scope, team_id=team_id, kind=kind, created_by_id=actor.id)
        if kind == "json":
            secret = new_secret("whsec_")
            hook.secret_sealed = seal(secret, key)
        else:
            hook.secret_sealed = ""
        session.add(hook)
    hook.url_sealed = seal(url, key)
    hook.url_hint = hint_of(url)
    hook.created_by_id = actor.id
    hook.created_at = utcnow()
    session.flush()
    audit.record(
        session,
        actor=actor,
        event=Event.WEBHOOK_SET,
        team_id=team_id,
        summary=f"set {_whose(team_id)} {kind} webhook to {hook.url_hint}",
        details={"kind": kind, "host": hook.url_hint},
    )
    return hook, secret


def delete_webhook(session: Session, *, actor: User, team_id: int | None, kind: str) -> None:
    known = kind in {k.value for k in WebhookKind}  # the column refuses any other value
    hook = repo.get_webhook(session, scope_of(team_id), kind) if known else None
    if hook is None:
        raise NotFound(f"no {kind[:40]} webhook is set here")
    session.delete(hook)
    audit.record(
        session,
        actor=actor,
        event=Event.WEBHOOK_REMOVED,
        team_id=team_id,
        summary=f"removed {_whose(team_id)} {kind} webhook",
    )


TEST_EVENT = "webhook.test"  # a delivery asked by a person to try the webhook


def send_test(session: Session, *, actor: User, team_id: int | None, kind: str) -> int:
    """Queue one test message to the webhook (as any event is: delivered, retried and
    listed among the deliveries). Returns the delivery's id."""
    known = kind in {k.value for k in WebhookKind}
    hook = repo.get_webhook(session, scope_of(team_id), kind) if known else None
    if hook is None:
        raise NotFound(f"no {kind[:40]} webhook is set here: save an address first")
    title = f"Test message from the GPU portal, sent by {actor.display_name or actor.email}"
    link = f"/teams/{team_id}/webhooks" if team_id is not None else "/admin/webhooks"
    delivery = _delivery(hook.kind, TEST_EVENT, title, title, link, team_id, webhook_id=hook.id)
    session.add(delivery)
    session.flush()
    request_effect(session, Effect.NOTIFIED)
    return delivery.id


def _whose(team_id: int | None) -> str:
    return "the org's" if team_id is None else "the team's"


# Delivery admin ----------------------------------------------------------------------


def delivery_counts(session: Session) -> dict[str, int]:
    return repo.count_deliveries(session)


def troubled(session: Session, limit: int = 50) -> list[Delivery]:
    return repo.get_troubled(session, limit)


def retry(session: Session, delivery_id: int) -> None:
    """Try a delivery again now: one given up starts over, one waiting for its next try
    goes now (its attempts kept)."""
    if not repo.retry_delivery(session, delivery_id, utcnow()):
        raise NotFound(f"no delivery #{delivery_id} waits or was given up")
    request_effect(session, Effect.NOTIFIED)
