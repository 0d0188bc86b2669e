"""API: who is asking."""

from __future__ import annotations

from fastapi import APIRouter

from app.web.deps import CurrentPrincipal
from app.web.schemas import PROBLEMS, MeOut

router = APIRouter(prefix="/api/v1", responses=PROBLEMS, tags=["me"])


@router.get("/me", response_model=MeOut)
async def me(principal: CurrentPrincipal) -> MeOut:
    """Who the portal thinks you are, and your teams. A coroutine: it does no I/O, so
    neither it nor the validation of its answer takes a thread (the caller's lookup does)."""
    return MeOut(
        email=principal.user.email,
        name=principal.user.display_name,
        admin=principal.is_admin,
        lead_of=sorted(principal.lead_of),
        member_of=sorted(principal.member_of),
    )
