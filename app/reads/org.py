"""The org view as the pages read it: every team's quota row and share, from the
usage cache (kept ready by the view refresher), for one org."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from sqlalchemy.orm import Session

from app.core.models import (
    Org,
)
from app.core.quota import GPU
from app.teams.repository import PoolLine
from app.usage import repository as usage_repo
from app.usage.model import ShareKey
from app.usage.service import GpuShare, OrgView, Shares, TeamQuota, UsageCache


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


@dataclass(frozen=True)
class PoolView:
    """One other node pool of the org as the overview shows it: its budget, what teams
    are guaranteed there, what they use (from the pool's own division, KAI's shard's),
    the GPUs its nodes hold (None: not read yet) and every team's share in it."""

    key: ShareKey
    gpu_type: str
    budget_centi: int
    committed_centi: int
    allocated: float | None  # None: no team's use there is reported
    node_gpus: float | None
    shares: Shares

    @property
    def teams(self) -> int:
        return len(self.shares)

    @property
    def idle(self) -> float | None:
        """GPUs of the pool's nodes nobody uses (None: the nodes or the use unknown)."""
        if self.node_gpus is None or self.allocated is None:
            return None
        return max(0.0, round(self.node_gpus - self.allocated, 2))


def key_rows(
    session: Session, usage: UsageCache, org: Org, key: ShareKey, view: OrgView | None
) -> list[TeamQuota]:
    """Every row of ``key`` (the teams holding a line of it), once per ready view."""

    def read() -> list[TeamQuota]:
        return usage_repo.get_quota_rows(session, org.id, key)

    return read() if view is None else usage.remembered(view, ("rows", key), read)


def shares_of(
    session: Session, usage: UsageCache, org: Org, key: ShareKey, view: OrgView | None
) -> Shares:
    """``key``'s division: one per key and ready view, whoever looks (a pool of thousands
    of teams is not read and divided again for every page view)."""

    def divide() -> Shares:
        return usage.key_shares(
            key_rows(session, usage, org, key, view),
            key,
            capacity_centi=usage_repo.pool_capacity(session, key, org.id),
            parent=org.parent_queue,
        )

    return divide() if view is None else usage.remembered(view, ("key", key), divide)


def pool_views(
    session: Session, usage: UsageCache, org: Org, view: OrgView | None = None
) -> list[PoolView]:
    """Every other node pool of the org (by name), each with its division; none for a
    single-pool org (read once per ready ``view``)."""
    if view is not None and not usage.remembered(
        view, ("other keys", org.id), lambda: usage_repo.holds_other_keys(session, org.id)
    ):
        return []
    found = []
    for pool in usage_repo.other_pools(session, org.id):
        key = ShareKey.of_pool(pool)
        shares = shares_of(session, usage, org, key, view)
        inputs = shares.division.inputs
        reported = bool(inputs.shown.any())
        top = usage.pool_top(key)
        found.append(
            PoolView(
                key=key,
                gpu_type=pool.gpu_type or "",
                budget_centi=pool.capacity.get(GPU.key, 0),
                committed_centi=round(float(inputs.quota.sum()) * 100),
                allocated=round(float(inputs.allocated.sum()), 2) if reported else None,
                node_gpus=top.gpus if top is not None else None,
                shares=shares,
            )
        )
    return found


def other_shares(
    session: Session,
    usage: UsageCache,
    org: Org,
    team_id: int,
    view: OrgView | None = None,
    lines: Sequence[PoolLine] | None = None,
) -> list[KeyShare]:
    """The team's share in every other pool and divided resource it holds a line of,
    each from its own division over every team holding that key (KAI's algorithm, as for
    the default pool's GPUs). Whether any team holds such a line is read once per ready
    org ``view``: a single-pool org's team page reads nothing more. ``lines``: the team's
    quota lines, when read already (``team_pool_lines``)."""
    if view is not None and not usage.remembered(
        view, ("other keys", org.id), lambda: usage_repo.holds_other_keys(session, org.id)
    ):
        return []
    return [
        KeyShare(key, shares_of(session, usage, org, key, view).get(team_id))
        for key in usage_repo.other_keys(session, team_id, lines)
    ]


def shares_in_pools(pools: Sequence[PoolView], team_id: int) -> list[tuple[str, GpuShare]]:
    """The team's share in each of ``pools`` it holds quota in: (pool name, share)."""
    return [(p.key.pool_name, p.shares[team_id]) for p in pools if team_id in p.shares]
