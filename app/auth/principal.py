"""Who is asking, and what they may see and do. Every route decides through this."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from app.core.errors import Forbidden, NotFound
from app.core.models import MemberRole, Team, User


@dataclass(frozen=True)
class Principal:
    user: User
    lead_of: frozenset[int]
    member_of: frozenset[int]
    unread: int = 0  # unread notices when the request began (the bell on each page)

    @property
    def is_admin(self) -> bool:
        return self.user.is_admin

    @property
    def team_ids(self) -> frozenset[int]:
        return self.lead_of | self.member_of

    @property
    def visible_team_ids(self) -> list[int] | None:
        """The teams this principal may see, or None for every team (admins)."""
        return None if self.is_admin else sorted(self.team_ids)

    def can_view(self, team: Team) -> bool:
        return self.is_admin or team.id in self.team_ids

    def can_lead(self, team: Team) -> bool:
        return self.is_admin or team.id in self.lead_of

    def require_view(self, team: Team) -> None:
        if not self.can_view(team):
            # Same answer as a missing team: ids of other teams leak nothing.
            raise NotFound(f"no team with id {team.id}")

    def require_lead(self, team: Team) -> None:
        self.require_view(team)
        if not self.can_lead(team):
            raise Forbidden(f"only a lead of {team.name} or an admin may do this")

    def require_admin(self) -> None:
        if not self.is_admin:
            raise Forbidden("only a portal admin may do this")


def principal_for(user: User, memberships: Sequence[tuple[int, str]], unread: int = 0) -> Principal:
    lead = frozenset(t for t, role in memberships if role == MemberRole.LEAD)
    member = frozenset(t for t, role in memberships if role != MemberRole.LEAD)
    return Principal(user=user, lead_of=lead, member_of=member, unread=unread)
