"""Right-sizing: guarantees that the usage history says are too large or too small.

Over the last ``rightsizing_days`` (raw samples for the last day, hourly averages before
that, each weighted by the seconds it covers):

- idle: the p95 of GPUs in use stayed below ``rightsizing_idle_share`` of the guarantee;
  suggested guarantee = that p95 rounded up to 0.05 GPU (what the team really used, the
  rest is guaranteed-but-idle: other teams could be promised it);
- starved: the team's work waited (its demand above what it got) in at least
  ``rightsizing_waiting_share`` of the period and its p95 demand exceeds its guarantee;
  suggested guarantee = the p95 of demand rounded up to 0.05 GPU (at most the pool).

A team is judged only once its history covers 90 % of the period (a new team, or a
portal that was down for days, is not judged on a few samples). Suggestions are
recomputed off the request path (by the collector, hourly) and stored, so a page reads
one row per team.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from datetime import datetime, timedelta
from itertools import groupby

from sqlalchemy.orm import Session

from app.core.config import Settings
from app.core.errors import Conflict
from app.core.models import ClusterRequest, RightsizingSuggestion, Team, User, utcnow
from app.core.quantities import format_hundredths, gpus
from app.teams import grants
from app.teams import repository as teams
from app.teams import service as team_service
from app.usage import repository as repo
from app.usage.model import ShareKey

STEP_CENTI = 5  # suggestions are whole multiples of 0.05 GPU
COVERAGE = 0.9
# Work counts as waiting in a sample when its demand exceeds what it got by this much.
WAITING_CENTI = 5


@dataclass(frozen=True)
class Sample:
    seconds: int
    allocated: float
    requested: float


@dataclass(frozen=True)
class Verdict:
    direction: str  # lower | raise
    average: float
    p95: float
    demand_p95: float
    waiting_share: float
    suggested_centi: int


def weighted_p95(values: Iterable[tuple[float, int]]) -> float:
    """The smallest value at or below which 95 % of the seconds lie."""
    ordered = sorted(values)
    total = sum(w for _, w in ordered)
    if total <= 0:
        return 0.0
    running = 0
    for value, weight in ordered:
        running += weight
        if running >= 0.95 * total:
            return value
    return ordered[-1][0]


def round_up_centi(gpus: float) -> int:
    """Hundredths of a GPU, rounded up to the next 0.05 GPU (samples are single precision:
    noise below a thousandth of a step is ignored)."""
    centi = gpus * 100
    return math.ceil(centi / STEP_CENTI - 1e-3) * STEP_CENTI if centi > 0 else 0


def judge(
    samples: list[Sample],
    *,
    guarantee_centi: int,
    pool_centi: int,
    settings: Settings,
) -> Verdict | None:
    """What the history says about one team's guarantee; None when it fits (or the history
    is too short to tell)."""
    period = settings.rightsizing_days * 86400
    covered = sum(s.seconds for s in samples)
    if covered < COVERAGE * period:
        return None
    average = sum(s.allocated * s.seconds for s in samples) / covered
    p95 = weighted_p95((s.allocated, s.seconds) for s in samples)
    demand_p95 = weighted_p95((s.requested, s.seconds) for s in samples)
    waited = sum(
        s.seconds for s in samples if (s.requested - s.allocated) * 100 >= WAITING_CENTI - 1e-6
    )
    waiting_share = waited / covered
    guarantee = gpus(guarantee_centi)
    if guarantee_centi > 0 and p95 < settings.rightsizing_idle_share * guarantee:
        suggested = round_up_centi(p95)
        if suggested < guarantee_centi:
            return Verdict("lower", average, p95, demand_p95, waiting_share, suggested)
    if waiting_share >= settings.rightsizing_waiting_share and demand_p95 > guarantee:
        suggested = min(round_up_centi(demand_p95), pool_centi)
        if suggested > guarantee_centi:
            return Verdict("raise", average, p95, demand_p95, waiting_share, suggested)
    return None


def _by_team(rows: Iterator[tuple[int, int, float, float]]) -> Iterator[tuple[int, list[Sample]]]:
    for team_id, group in groupby(rows, key=lambda r: r[0]):
        yield team_id, [Sample(seconds, a, r) for _, seconds, a, r in group]


def recompute(session: Session, settings: Settings, now: datetime | None = None) -> int:
    """Judge every ready team in every node pool it holds a guarantee in and store the
    suggestions (replacing the previous ones)."""
    now = now or utcnow()
    org = teams.get_org(session)
    since = now - timedelta(days=settings.rightsizing_days)
    scopes = [(repo.DEFAULT_POOL, repo.get_quota_rows(session, org.id), org.gpus_centi)]
    for pool in repo.other_pools(session, org.id):
        key = ShareKey.of_pool(pool)
        held = repo.get_quota_rows(session, org.id, key)
        if held:
            scopes.append((pool.name, held, repo.pool_capacity(session, key, org.id)))
    rows: list[RightsizingSuggestion] = []
    for pool_name, quota_rows, pool_centi in scopes:
        quotas = {q.id: q for q in quota_rows if q.ready}
        for team_id, samples in _by_team(repo.window_samples(session, since=since, pool=pool_name)):
            quota = quotas.get(team_id)
            if quota is None:
                continue
            verdict = judge(
                samples,
                guarantee_centi=quota.quota_centi,
                pool_centi=pool_centi,
                settings=settings,
            )
            if verdict is not None:
                rows.append(
                    _suggestion(team_id, pool_name, quota.quota_centi, verdict, settings, now)
                )
    repo.replace_suggestions(session, rows)
    return len(rows)


def _suggestion(
    team_id: int,
    pool: str,
    guarantee_centi: int,
    verdict: Verdict,
    settings: Settings,
    now: datetime,
) -> RightsizingSuggestion:
    return RightsizingSuggestion(
        team_id=team_id,
        pool=pool,
        direction=verdict.direction,
        guarantee_centi=guarantee_centi,
        average_centi=round(verdict.average * 100),
        p95_centi=round(verdict.p95 * 100),
        demand_p95_centi=round(verdict.demand_p95 * 100),
        waiting_share=round(verdict.waiting_share, 4),
        suggested_centi=verdict.suggested_centi,
        days=settings.rightsizing_days,
        computed_at=now,
    )


@dataclass(frozen=True)
class OrgSuggestions:
    rows: list[tuple[str, RightsizingSuggestion]]  # (team name, suggestion)

    @property
    def idle_centi(self) -> int:
        """Guaranteed-but-idle GPUs: what lowering every idle team would free."""
        return sum(
            s.guarantee_centi - s.suggested_centi for _, s in self.rows if s.direction == "lower"
        )

    @property
    def wanted_centi(self) -> int:
        return sum(
            s.suggested_centi - s.guarantee_centi for _, s in self.rows if s.direction == "raise"
        )


def for_org(session: Session) -> OrgSuggestions:
    found = repo.get_suggestions(session)
    names = teams.get_team_names(session, [s.team_id for s in found]) if found else {}
    live = [(names[s.team_id], s) for s in found if s.team_id in names]
    live.sort(
        key=lambda pair: (
            pair[1].direction,
            -(abs(pair[1].guarantee_centi - pair[1].suggested_centi)),
            pair[0],
        )
    )
    return OrgSuggestions(live)


def for_team(session: Session, team_id: int, current_centi: int) -> RightsizingSuggestion | None:
    """The team's suggestion, unless its guarantee changed since it was computed."""
    return current(repo.get_suggestion(session, team_id), current_centi)


def current(
    found: RightsizingSuggestion | None, current_centi: int
) -> RightsizingSuggestion | None:
    """``found`` if it was computed for the guarantee the team has now, else None."""
    if found is None or found.guarantee_centi != current_centi:
        return None
    return found


def propose(
    session: Session, *, actor: User, team: Team, pool: str = "", centi: int | None = None
) -> ClusterRequest:
    """Turn the team's suggestion (in the default pool, or in the node pool named
    ``pool``) into a quota-change request (the normal approval, with its impact preview):
    the guarantee suggested (or ``centi``, a raise part of the way to it: what fits the
    pool today), the limit raised to it if below, the numbers as the reason."""
    # Its own quota (a change keeps the grants running apart).
    held = {p.name: q for p, q in grants.base_pools(session, team).items()}
    if pool and pool not in held:
        raise Conflict(f"{team.name} holds no quota in pool {pool}")
    now = held[pool] if pool else team.quota
    found = current(repo.get_suggestion(session, team.id, pool), now.gpu.guarantee or 0)
    if found is None:
        raise Conflict(
            f"{team.name} has no right-sizing suggestion for its current guarantee"
            f"{' in pool ' + pool if pool else ''} "
            "(it fits its usage, or changed since the last computation)"
        )
    asked = found.suggested_centi
    if centi is not None:
        if found.direction != "raise" or not found.guarantee_centi < centi <= asked:
            raise Conflict(
                f"Ask for between {format_hundredths(found.guarantee_centi)} and "
                f"{format_hundredths(asked)} GPU: the part of the suggested raise you want."
            )
        asked = centi
    values = now.replace("gpu", guarantee=asked, limit=max(now.gpu.limit or 0, asked))
    purpose = describe(found)
    if asked != found.suggested_centi:
        purpose += f" Asked for {format_hundredths(asked)} GPU: what the pool can guarantee today."
    if pool:
        return team_service.submit_quota_change(
            session,
            actor=actor,
            team=team,
            values=grants.base(session, team, teams.get_org(session).default_pool),
            pools={**held, pool: values},
            purpose=purpose,
        )
    return team_service.submit_quota_change(
        session, actor=actor, team=team, values=values, purpose=purpose
    )


def describe(s: RightsizingSuggestion) -> str:
    """The numbers behind a suggestion, as one sentence."""
    guarantee = format_hundredths(s.guarantee_centi)
    suggested = format_hundredths(s.suggested_centi)
    where = f" in pool {s.pool}" if s.pool else ""
    if s.direction == "lower":
        return (
            f"Right-sizing{where}: over {s.days} days {format_hundredths(s.average_centi)} GPU "
            f"in use on average, p95 {format_hundredths(s.p95_centi)}, of {guarantee} "
            f"guaranteed: lower the guarantee to {suggested} GPU."
        )
    return (
        f"Right-sizing{where}: over {s.days} days work waited {round(s.waiting_share * 100)} % "
        f"of the time; p95 demand {format_hundredths(s.demand_p95_centi)} GPU above the "
        f"{guarantee} guaranteed: raise the guarantee to {suggested} GPU."
    )
