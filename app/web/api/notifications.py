"""API: your notifications."""

from __future__ import annotations

from fastapi import APIRouter

from app.notifications import service as notifications
from app.web.deps import CurrentPrincipal, SessionDep
from app.web.schemas import PROBLEMS, NotificationOut, NotificationsOut, ReadOut

router = APIRouter(prefix="/api/v1", responses=PROBLEMS, tags=["notifications"])


@router.get("/notifications", response_model=NotificationsOut)
def list_notifications(session: SessionDep, principal: CurrentPrincipal) -> NotificationsOut:
    """Your newest notifications (30) and how many are unread."""
    return NotificationsOut(
        unread=notifications.unread(session, principal.user),
        items=[
            NotificationOut(
                id=n.id,
                event=n.event,
                title=n.title,
                link=n.link,
                team_id=n.team_id,
                created_at=n.created_at,
                read=n.read_at is not None,
            )
            for n in notifications.recent(session, principal.user)
        ],
    )


@router.post("/notifications/read", response_model=ReadOut)
def mark_notifications_read(session: SessionDep, principal: CurrentPrincipal) -> ReadOut:
    """Mark all your notifications read."""
    return ReadOut(marked=notifications.mark_all_read(session, principal.user))
