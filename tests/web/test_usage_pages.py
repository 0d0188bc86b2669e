"""Usage over time on pages: a team's chart (24 hours, 7 days, 30 days; each pool), the
org's, and showback by month — the figures a person reads, from samples the test wrote."""

from __future__ import annotations

import html
import re
from datetime import UTC, datetime, timedelta

import pytest
from fastapi import FastAPI

from app.core.db import unit_of_work
from app.runtime import portal_of
from app.usage import repository as repo
from app.usage.chart import RANGES, chart, nice_top
from tests.web.conftest import Client

NLP, VISION = 1, 2


def _hour(hours_ago: int) -> datetime:
    now = datetime.now(UTC).replace(minute=0, second=0, microsecond=0)
    return now - timedelta(hours=hours_ago)


def _sample(
    team: int, at: datetime, used: float, asked: float, quota: float, **kw: object
) -> dict[str, object]:
    seconds = int(kw.get("seconds", 3600))  # type: ignore[call-overload]
    inside = min(used, quota)
    return {
        "team_id": team,
        "pool": kw.get("pool", ""),
        "resolution": kw.get("resolution", "hour"),
        "at": at,
        "seconds": seconds,
        "allocated_gpu": used,
        "requested_gpu": asked,
        "quota_gpu": quota,
        "guaranteed_gpu_s": inside * seconds,
        "borrowed_gpu_s": (used - inside) * seconds,
    }


def _write(app: FastAPI, rows: list[dict[str, object]]) -> None:
    with unit_of_work(portal_of(app).session_factory) as session:
        repo.add_samples(session, rows)


def _text(page: str) -> str:
    return " ".join(html.unescape(re.sub(r"<[^>]+>", " ", page)).split())


def _hovers(page: str) -> list[str]:
    return re.findall(r'<rect class="ch-hover"[^>]*><title>([^<]+)</title>', page)


def test_a_team_reads_its_use_over_each_period(app: FastAPI, lead: Client) -> None:
    _write(
        app,
        [
            _sample(NLP, _hour(3), 0.5, 1.0, 0.33),
            _sample(NLP, _hour(2), 0.25, 0.25, 0.33),
            _sample(NLP, _hour(30), 0.75, 0.75, 0.33),  # a day and a bit ago
            _sample(VISION, _hour(2), 0.9, 0.9, 0.33),  # another team's: never on nlp's
        ],
    )
    day = lead.get(f"/teams/{NLP}/usage?range=24h")
    assert day.status_code == 200
    page = day.text
    assert 'data-chart="24h"' in page
    assert re.findall(r"data-y-tick>([^<]+)<", page) == ["0", "0.25", "0.5", "0.75", "1"]
    assert re.findall(r"data-x-tick>([^<]+)<", page)[0].endswith(":00")
    hovers = _hovers(page)
    stamp = _hour(3).strftime("%a %d %b %H:00 UTC")
    assert f"{stamp}: 0.5 GPU in use, 1 asked for, guarantee 0.33" in hovers
    assert len(hovers) == 2, "the sample 30 hours ago is outside the last 24 hours"
    assert 'data-chart-figure="peak">0.5<' in page
    assert 'data-chart-figure="average">0.38<' in page  # (0.5 + 0.25) / 2
    assert "(since" in page, "nlp's first sample is within the period: said"
    week = lead.get(f"/teams/{NLP}/usage?range=7d").text
    assert len(_hovers(week)) == 3
    assert 'data-chart-figure="peak">0.75<' in week
    assert "0.9" not in _text(week.split('data-chart="7d"')[1])
    month = lead.get(f"/teams/{NLP}/usage?range=30d").text
    days = _hovers(month)
    assert len(days) == 2, "today's two hours and yesterday's one, by day"
    assert all("(UTC)" in d for d in days)
    # The team page links it, beside its seven-day line.
    assert f'href="/teams/{NLP}/usage"' in lead.get(f"/teams/{NLP}").text


def test_another_pools_use_is_its_own_chart(app: FastAPI, admin: Client) -> None:
    _write(app, [_sample(VISION, _hour(2), 0.8, 1.0, 1.0, pool="l40s")])
    default = admin.get(f"/teams/{VISION}/usage").text
    assert "No use recorded for vision over the last 7 days" in _text(default)
    l40s = admin.get(f"/teams/{VISION}/usage?pool=l40s").text
    assert 'data-chart-figure="peak">0.8<' in l40s
    assert "vision's queue in pool l40s" in _text(l40s)
    refused = admin.get(f"/teams/{VISION}/usage?pool=a100")
    assert refused.status_code == 422
    assert "Node pool : no node pool 'a100' here; the others are: l40s" in _text(refused.text)


def test_the_org_reads_its_teams_together_and_showback_by_month(
    app: FastAPI, admin: Client
) -> None:
    at = _hour(2)
    _write(
        app,
        [
            _sample(NLP, at, 0.5, 0.5, 0.33),
            _sample(VISION, at, 0.25, 0.5, 0.33),
            _sample(VISION, _hour(1), 1.0, 1.0, 0.33, pool="l40s"),
        ],
    )
    page = admin.get("/admin/usage?range=24h").text
    hovers = _hovers(page)
    assert hovers == [
        f"{at.strftime('%a %d %b %H:00 UTC')}: 0.75 GPU in use, 1 asked for, guarantee 0.66"
    ]
    month = at.strftime("%Y-%m")
    shown = admin.get(f"/admin/usage?month={month}").text
    rows = dict(
        re.findall(r'data-showback-row="([^"]+)".*?data-showback="hours">([^<]+)<', shown, re.S)
    )
    assert rows == {"nlp/default": "0.5", "vision/default": "0.2", "vision/l40s": "1.0"}
    cost = re.search(
        r'data-showback-row="vision/l40s".*?data-showback="cost">([^<]+)<', shown, re.S
    )
    assert cost is not None
    assert cost.group(1) == "1.20", "1 GPU-hour at the example l40s price of 1.20"
    assert 'data-showback-total="hours">1.8<' in shown  # 0.5 + 0.25 + 1.0, to a tenth
    csv = admin.get(f"/admin/showback.csv?month={month}").text
    assert f"vision,{month},0.250,0.000,0.250,default,NVIDIA H100,," in csv
    bad = admin.get("/admin/usage?range=1y")
    assert bad.status_code == 422
    assert "Period : choose one of 24h, 7d, 30d" in _text(bad.text)


@pytest.mark.parametrize(
    ("value", "top", "step"),
    [(0.0, 0.01, 0.0025), (0.33, 0.4, 0.1), (1.0, 1.0, 0.25), (1.41, 1.5, 0.5), (7.3, 8.0, 2.0)],
)
def test_the_axis_ends_at_a_round_figure_above_the_values(
    value: float, top: float, step: float
) -> None:
    assert nice_top(value) == (top, step)


def test_a_chart_puts_each_hour_where_its_time_is() -> None:
    now = datetime(2026, 12, 7, 12, 0, tzinfo=UTC)
    points = [
        (now - timedelta(hours=12), 0.5, 0.5, 0.33),
        (now - timedelta(hours=1), 1.0, 1.0, 0.33),
    ]
    drawn = chart(points, RANGES["24h"], limit=1.0, now=now)
    assert drawn is not None
    # The plot spans x 44..632 over 24 hours (an hour's middle 12.5 hours in), y 194..24.
    first = drawn.allocated.split()[0]
    assert first == f"{round(44 + 12.5 / 24 * 588, 1)},{round(194 - 0.5 / 1.0 * 170, 1)}"
    # Labels every six hours, none at an edge (it would be cut off).
    assert [t.label for t in drawn.x_ticks] == ["18:00", "00:00", "06:00"]
    assert drawn.peak == 1.0
    assert chart([], RANGES["7d"]) is None


def test_a_teams_history_counts_the_work_kai_evicted_in_the_period(
    app: FastAPI, lead: Client, admin: Client
) -> None:
    from app.core.models import WorkloadEvent, WorkloadEventKind

    now = datetime.now(UTC)

    def evicted(key: str, days: float, pool: str = "", by: int | None = VISION) -> WorkloadEvent:
        return WorkloadEvent(
            team_id=NLP,
            kind=WorkloadEventKind.EVICTED,
            key=key,
            pool=pool,
            workload=f"default/{key}",
            at=now - timedelta(days=days),
            action="reclaim",
            gpu_centi=50,
            ran_seconds=3 * 3600,  # 0.5 GPU for 3 hours: 1.5 GPU-hours lost
            by_team_id=by,
        )

    with unit_of_work(portal_of(app).session_factory) as session:
        for row in (
            evicted("a", 0.5),
            evicted("b", 3),
            evicted("c", 10),  # outside the week, inside the month
            evicted("d", 1, pool="l40s"),  # another pool's
        ):
            session.add(row)
    day = _text(lead.get(f"/teams/{NLP}/usage?range=24h").text)
    assert (
        "KAI evicted nlp's work 1 time over the last 24 hours, for team vision: 1.5 "
        "GPU-hours of work lost."
    ) in day
    week = _text(lead.get(f"/teams/{NLP}/usage?range=7d").text)
    assert "KAI evicted nlp's work 2 times over the last 7 days, for team vision: 3 " in week
    month = _text(lead.get(f"/teams/{NLP}/usage?range=30d").text)
    assert "3 times over the last 30 days" in month
    other = _text(admin.get(f"/teams/{VISION}/usage?range=7d").text)
    assert "KAI evicted none of vision's work over the last 7 days." in other


def test_the_weekly_digest_names_a_team_that_reclaimed_and_is_gone_since(app: FastAPI) -> None:
    from sqlalchemy import update

    from app.core.models import Team, TeamStatus, WorkloadEvent, WorkloadEventKind
    from app.usage.digest import evictions_by_team

    now = datetime.now(UTC)
    with unit_of_work(portal_of(app).session_factory) as session:
        session.add(
            WorkloadEvent(
                team_id=NLP,
                kind=WorkloadEventKind.EVICTED,
                key="gone-by",
                pool="",
                workload="default/sweep",
                at=now - timedelta(days=1),
                action="reclaim",
                gpu_centi=100,
                ran_seconds=1800,
                by_team_id=VISION,
            )
        )
        session.execute(
            update(Team).where(Team.id == VISION).values(status=TeamStatus.DECOMMISSIONED)
        )
    with portal_of(app).session_factory() as session:
        told = evictions_by_team(session, now - timedelta(days=7))
    assert told[NLP]["evicted"] == 1
    assert told[NLP]["lost"] == "0.5"
    assert told[NLP]["evicted_by"] == ["vision"]
