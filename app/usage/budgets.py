"""GPU-hour budgets: "this team may use 500 GPU-hours of H100 this month". The burn is
what KAI allocated to the team's queue in that pool, summed from the usage history (the
same GPU-seconds showback reports); the projection is the month's burn at its average
rate so far. Alerts go out once per threshold crossed (settings: 50, 80, 100 %); at
100 % an admin's choice applies: the alert only, or no more borrowing until the month
ends — the team's limit there lowered to its guarantee, put back on the 1st (each
audited like a quota change)."""

from __future__ import annotations

import calendar
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from sqlalchemy.orm import Session

from app.core.errors import InvalidInput
from app.core.events import Event
from app.core.models import GpuBudget, Pool, Team, TeamStatus, User, utcnow
from app.core.quantities import format_hundredths, parse_hundredths
from app.core.together import Read
from app.notifications import events
from app.teams import repository as teams
from app.usage import repository as repo

MONTH = re.compile(r"[0-9]{4}-(?:0[1-9]|1[0-2])", re.ASCII)


def month_of(at: datetime) -> str:
    return at.astimezone(UTC).strftime("%Y-%m")


def month_bounds(month: str) -> tuple[datetime, datetime]:
    """The month's first moment and the next month's, in UTC."""
    year, number = int(month[:4]), int(month[5:])
    start = datetime(year, number, 1, tzinfo=UTC)
    days = calendar.monthrange(year, number)[1]
    return start, start + timedelta(days=days)


@dataclass(frozen=True)
class BudgetAsk:
    pool: str
    month: str
    gpu_hours_centi: int
    stop_borrowing: bool


def parse_budget(data: Mapping[str, object], *, now: datetime) -> BudgetAsk:
    """A budget's fields checked together, every problem named by its field."""
    errors: dict[str, str] = {}
    month = str(data.get("month", "") or "").strip() or month_of(now)
    if not MONTH.fullmatch(month):
        errors["month"] = "use the form YYYY-MM with a month from 01 to 12, e.g. 2026-12"
    elif month < month_of(now):
        errors["month"] = "that month is over: set this month's or a later one"
    hours = 0
    try:
        hours = parse_hundredths(str(data.get("gpu_hours", "") or ""), what="the GPU-hours")
        if hours <= 0:
            errors["gpu_hours"] = "set at least 0.01 GPU-hours (to stop a team, lower its quota)"
    except ValueError as exc:
        errors["gpu_hours"] = str(exc)
    action = str(data.get("at_limit", "alert") or "alert")
    if action not in ("alert", "stop_borrowing"):
        errors["at_limit"] = "choose alert or stop_borrowing"
    if errors:
        raise InvalidInput(errors)
    return BudgetAsk(str(data.get("pool", "") or ""), month, hours, action == "stop_borrowing")


def set_budget(
    session: Session, *, actor: User, team: Team, asked: BudgetAsk, now: datetime
) -> GpuBudget:
    """Set (or change) the team's budget for the month in a pool (an admin)."""
    org = teams.get_org(session)
    pool = org.default_pool
    if asked.pool:
        held = {p.name: p for p in team.quota_by_pool()}
        if asked.pool not in held:
            raise InvalidInput({"pool": f"{team.name} holds no quota in pool {asked.pool!r}"})
        pool = held[asked.pool]
    budget = repo.find_budget(session, team.id, pool.id, asked.month)
    if budget is None:
        budget = GpuBudget(team_id=team.id, pool_id=pool.id, month=asked.month, alerted=0)
        session.add(budget)
    budget.gpu_hours_centi = asked.gpu_hours_centi
    budget.stop_borrowing = asked.stop_borrowing
    budget.set_by_id, budget.set_at = actor.id, now
    session.flush()
    events.record(
        session,
        Event.BUDGET_SET,
        actor=actor,
        team=team,
        summary=f"set {team.name}'s GPU-hour budget for {asked.month}{_in(pool)} to "
        f"{format_hundredths(asked.gpu_hours_centi)} GPU-hours"
        + ("; no borrowing once spent" if asked.stop_borrowing else "; an alert once spent"),
        facts={"month": asked.month, "gpu_hours": format_hundredths(asked.gpu_hours_centi)},
    )
    return budget


def _in(pool: Pool) -> str:
    return "" if pool.is_default else f" in pool {pool.name}"


@dataclass(frozen=True)
class Burn:
    """A budget's month so far: the GPU-hours used, the share of the budget, and when
    the month's average rate would reach it (None: not this month)."""

    budget: GpuBudget
    used_hours: float
    now: datetime

    @property
    def hours(self) -> float:
        return self.budget.gpu_hours_centi / 100

    @property
    def percent(self) -> float:
        return 100 * self.used_hours / self.hours if self.hours else 0.0

    @property
    def reaches_at(self) -> datetime | None:
        start, end = month_bounds(self.budget.month)
        if self.used_hours >= self.hours:
            return None
        elapsed = (min(self.now, end) - start).total_seconds()
        if elapsed <= 0 or self.used_hours <= 0:
            return None
        rate = self.used_hours / elapsed  # GPU-hours a second, the month's average so far
        at = self.now + timedelta(seconds=(self.hours - self.used_hours) / rate)
        return at if at < end else None


def burns(session: Session, budgets: Sequence[GpuBudget], now: datetime) -> list[Burn]:
    """Each budget's burn, read from the usage history once per month asked."""
    used: dict[tuple[str, int, str], float] = {}
    for month in {b.month for b in budgets}:
        for _name, team_id, m, pool, guaranteed, borrowed in repo.gpu_seconds_by_team_month(
            session, month=month
        ):
            used[(m, team_id, pool)] = (guaranteed + borrowed) / 3600
    found = []
    for b in budgets:
        pool = "" if b.pool.is_default else b.pool.name
        found.append(Burn(b, round(used.get((b.month, b.team_id, pool), 0.0), 3), now))
    return found


def thresholds(raw: str) -> list[int]:
    """PORTAL_BUDGET_ALERTS as percents, ascending ("50,80,100")."""
    return sorted({int(part) for part in raw.split(",") if part.strip()})


def check(session: Session, now: datetime, *, alerts: Sequence[int]) -> int:
    """Tell each team (leads and admins) once per threshold its budget crossed this
    month, stop borrowing at 100 % where chosen, and put limits back once the month of a
    stop is over. Returns how many things it did."""
    done = _restore(session, now)
    for burn in burns(session, repo.budgets_of_month(session, month_of(now)), now):
        budget = burn.budget
        crossed = [t for t in alerts if budget.alerted < t <= burn.percent]
        if not crossed:
            continue
        team = teams.get_team(session, budget.team_id)
        budget.alerted = crossed[-1]
        done += 1
        events.record(
            session,
            Event.BUDGET_ALERT,
            actor=None,
            team=team,
            summary=f"{team.name} used {burn.percent:.0f} % of its {budget.month} GPU-hour "
            f"budget{_in(budget.pool)} ({burn.used_hours:.1f} of {burn.hours:g})",
            facts={
                "percent": f"{burn.percent:.0f}",
                "used": f"{burn.used_hours:.1f}",
                "hours": f"{burn.hours:g}",
                "month": budget.month,
                "stops": bool(budget.stop_borrowing and burn.percent >= 100),
            },
        )
        if budget.stop_borrowing and burn.percent >= 100 and budget.limited_at is None:
            _stop_borrowing(session, team, budget, now)
    return done


def _stop_borrowing(session: Session, team: Team, budget: GpuBudget, now: datetime) -> None:
    if team.status != TeamStatus.READY:
        return
    held = team.quota_in(budget.pool)
    budget.limit_before = held.gpu.limit
    budget.limited_at = now
    team.set_quota(budget.pool, held.replace("gpu", limit=held.gpu.guarantee or 0))
    team.desired_generation += 1
    team.next_attempt_at = min(now, utcnow())
    events.record(
        session,
        Event.BUDGET_LIMITED,
        actor=None,
        team=team,
        summary=f"{team.name}'s {budget.month} GPU-hour budget{_in(budget.pool)} is spent: "
        f"its limit is lowered to its guarantee of "
        f"{format_hundredths(held.gpu.guarantee or 0)} GPU until the month ends",
        facts={"month": budget.month},
    )


def _restore(session: Session, now: datetime) -> int:
    """Put back each limit a spent budget lowered, once its month is over (unless the
    team's quota changed meanwhile: the newer decision stands)."""
    restored = 0
    for budget in repo.limited_budgets(session):
        if month_bounds(budget.month)[1] > now:
            continue
        team = teams.get_team(session, budget.team_id)
        held = team.quota_in(budget.pool)
        budget.restored_at = now
        restored += 1
        if held.gpu.limit != (held.gpu.guarantee or 0) or team.status != TeamStatus.READY:
            continue  # changed since: kept
        team.set_quota(budget.pool, held.replace("gpu", limit=budget.limit_before))
        team.desired_generation += 1
        team.next_attempt_at = min(now, utcnow())
        back = (
            "unlimited" if budget.limit_before is None else format_hundredths(budget.limit_before)
        )
        events.record(
            session,
            Event.BUDGET_RESTORED,
            actor=None,
            team=team,
            summary=f"{budget.month} is over: {team.name}'s limit{_in(budget.pool)} is "
            f"back to {back} GPU",
            facts={"month": budget.month},
        )
    return restored


def team_budgets(team_id: int, now: datetime) -> Read[list[GpuBudget]]:
    """The team's budgets of this month, as a read to run with a page's others."""
    return repo.team_budgets_of(team_id, month_of(now))


def of_team(
    session: Session, team_id: int, now: datetime, budgets: Sequence[GpuBudget] | None = None
) -> list[Burn]:
    """The team's budgets of this month and their burn (``budgets``: ``team_budgets``'
    value, when read already)."""
    found = repo.team_budgets(session, team_id, month_of(now)) if budgets is None else budgets
    return burns(session, found, now)


def of_org(session: Session, now: datetime) -> list[Burn]:
    return burns(session, repo.budgets_of_month(session, month_of(now)), now)


def of_team_used(session: Session, team_id: int, now: datetime) -> float:
    """GPU-hours the team's queue in the default pool was allocated this month."""
    month = month_of(now)
    return sum(
        (g + b) / 3600
        for _name, tid, _m, pool, g, b in repo.gpu_seconds_by_team_month(session, month=month)
        if tid == team_id and pool == ""
    )
