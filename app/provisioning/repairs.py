"""What the portal put back in the cluster (drift repairs), as the admins see and
acknowledge it: each repair is an audit event; the overview lists those after the last
one an admin acknowledged."""

from __future__ import annotations

from sqlalchemy.orm import Session

from app.audit import repository as audit_repo
from app.audit import service as audit
from app.core.events import Event
from app.core.models import Org, User


def acknowledge(session: Session, org: Org, *, actor: User, upto: int) -> int:
    """The repairs up to audit id ``upto`` (at most the newest there is) are seen; the
    overview lists only later ones. Returns the id now acknowledged up to; audited."""
    newest = audit_repo.newest_id(session, Event.DRIFT_REPAIRED.value) or 0
    seen = min(upto, newest)
    if seen <= org.repairs_seen_id:
        return org.repairs_seen_id
    org.repairs_seen_id = seen
    audit.record(
        session,
        actor=actor,
        event=Event.REPAIRS_ACKNOWLEDGED,
        summary=f"acknowledged the repairs in the cluster up to event #{seen}",
        details={"upto": seen},
    )
    return seen
