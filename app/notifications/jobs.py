"""The notifications domain's periodic job: delivering what is due."""

from __future__ import annotations

import logging
from typing import Protocol

from app.core.config import Settings
from app.core.db import Effect
from app.core.jobs import Job, Loop, Role
from app.notifications.delivery import Deliverer

log = logging.getLogger(__name__)


class Parts(Protocol):
    @property
    def settings(self) -> Settings: ...
    @property
    def deliverer(self) -> Deliverer: ...


def delivery_loop(parts: Parts) -> Loop:
    """Sends what is due; woken at once after a commit that notified. Checks the SMTP
    server first (the notification settings page shows its problem); stopping hands the
    delivery leases back."""
    deliverer = parts.deliverer

    def run() -> None:
        deliverer.run_once()

    def close() -> None:
        try:
            deliverer.close()
        except Exception:
            log.exception("could not hand the delivery leases back; they expire on their own")

    return Loop(
        name="notification_delivery",
        run=run,
        period=parts.settings.delivery_poll_seconds,
        wake=deliverer.wake,
        on_start=deliverer.check_smtp,
        on_stop=close,
        failure="failed; retrying",
    )


JOBS: tuple[Job[Parts], ...] = (
    Job(
        name="notification_delivery",
        roles=frozenset({Role.DELIVER}),
        build=delivery_loop,
        wakes_on=(Effect.NOTIFIED,),
    ),
)
