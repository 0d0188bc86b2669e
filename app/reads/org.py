"""The org view as the pages read it: every team's quota row and share, from the
usage cache (kept ready by the view refresher), for one org."""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy.orm import Session

from app.core.models import (
    Org,
)
from app.usage import repository as usage_repo
from app.usage.model import ShareKey
from app.usage.service import GpuShare, OrgView, Shares, UsageCache


def org_view(session: Session, usage: UsageCache, org: Org) -> OrgView:
    return usage.org_view(
        lambda: usage_repo.get_quota_rows(session, org.id),
        pool_centi=org.gpus_centi,
        parent=org.parent_queue,
    )


@dataclass(frozen=True)
class KeyShare:
    """A team's share in one more key than the default pool's GPUs: its own gauge."""

    key: ShareKey
    share: GpuShare | None  # None: the team holds no queue in that division yet


def other_shares(
    session: Session, usage: UsageCache, org: Org, team_id: int, view: OrgView | None = None
) -> list[KeyShare]:
    """The team's share in every other pool and divided resource it holds a line of,
    each from its own division over every team holding that key (KAI's algorithm, as for
    the default pool's GPUs). Whether any team holds such a line is read once per ready
    org ``view``: a single-pool org's team page reads nothing more."""
    if view is not None and not usage.remembered(
        view, ("other keys", org.id), lambda: usage_repo.holds_other_keys(session, org.id)
    ):
        return []
    found: list[KeyShare] = []
    for key in usage_repo.other_keys(session, team_id):

        def divide(key: ShareKey = key) -> Shares:
            rows = usage_repo.get_quota_rows(session, org.id, key)
            return usage.key_shares(
                rows,
                key,
                capacity_centi=usage_repo.pool_capacity(session, key, org.id),
                parent=org.parent_queue,
            )

        # One division per key and ready view, whoever looks (a pool of thousands of
        # teams is not read and divided again for every page view).
        shares = divide() if view is None else usage.remembered(view, ("key", key), divide)
        found.append(KeyShare(key, shares.get(team_id)))
    return found
