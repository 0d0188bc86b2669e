"""The figures a platform engineer reads in the demo's world, in a real browser: the
design source's pool of 1 GPU in a simulated cluster of 2, as `make run` starts it."""

from __future__ import annotations

import re
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from tests.browser.conftest import pin_usage, seeded_portal, sign_in, wait_ready

pytestmark = pytest.mark.browser


@pytest.fixture(scope="module")
def portal(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    with seeded_portal(
        tmp_path_factory.mktemp("portal"),
        PORTAL_SIMULATED_CLUSTER_GPUS="2",
        PORTAL_SIMULATED_STEP_SECONDS="0.3",
        PORTAL_WORKER_INTERVAL_SECONDS="0.3",
    ) as url:
        yield url


def test_a_lead_reads_which_world_each_figure_is_in(portal: str, browser: Any) -> None:
    """nlp runs 1 GPU and asks for 1.5 while vision and recommender are idle: its page
    says what the pool guarantees (0.34: the pool's GPU divided), what the idle GPU
    beyond the pool adds (1: its limit), and that only a higher limit lets more run."""
    from playwright.sync_api import expect

    admin = sign_in(browser, portal, "admin@example.org", admin=True)
    wait_ready(admin, portal)
    for team, used, asked in (("nlp", "1", "1.5"), ("vision", "0", "0"), ("recommender", "0", "0")):
        pin_usage(admin, portal, team, used, asked)
    lead = sign_in(browser, portal, "lead-nlp@example.org")
    lead.goto(portal + "/teams/1")
    expect(lead.locator("[data-explain=within]")).to_have_text("0.34 GPU")
    expect(lead.locator("[data-explain=busy]")).to_have_text("1 GPU")
    expect(lead.locator("dt", has_text="Guaranteed by the pool")).to_be_visible()
    why = lead.locator("[data-explain=why]")
    expect(why).to_contain_text("0.5 GPU of your work is waiting because your team's limit is 1")
    expect(why).to_contain_text("only a higher limit lets more run at once")

    # The Pool page counts the GPUs idle in the pool and in the cluster apart.
    admin.goto(portal + "/admin")
    expect(admin.get_by_test_id("pool-idle")).to_have_text("0")
    expect(admin.get_by_test_id("cluster-idle")).to_have_text("1")


def test_a_person_reads_use_over_time_with_its_axes(portal: str, browser: Any) -> None:
    """The demo's two weeks of history on the org's chart: the period links switch it,
    the axes are labelled, an hour says its figures under the pointer, and showback
    lists each team's GPU-hours for the month."""
    from playwright.sync_api import expect

    admin = sign_in(browser, portal, "admin@example.org", admin=True)
    admin.goto(portal + "/admin")
    admin.click("summary:has-text('Plan')")
    admin.click("a:has-text('Usage and showback')")
    chart = admin.locator("figure.usage-chart")
    expect(chart).to_have_attribute("data-chart", "7d")
    expect(chart.locator("[data-y-unit]")).to_have_text("GPU")
    assert chart.locator("[data-x-tick]").count() >= 5
    admin.click("nav.chart-ranges >> text=24h")
    expect(chart).to_have_attribute("data-chart", "24h")
    expect(admin.locator("nav.chart-ranges a[aria-current=page]")).to_have_text("24h")
    column = chart.locator("rect.ch-hover").first
    said = column.locator("title").text_content() or ""
    assert re.fullmatch(
        r"\w{3} \d{2} \w{3} \d{2}:00 UTC: [\d.]+ GPU in use, [\d.]+ asked for, guarantee 0\.99",
        said,
    ), said
    column.hover()  # the hovered column is marked
    assert column.evaluate("e => getComputedStyle(e).fill") != "rgba(0, 0, 0, 0)"
    rows = admin.locator("[data-showback-row]")
    expect(rows.first).to_be_visible()
    teams = {r.split("/")[0] for r in rows.evaluate_all("rs => rs.map(r => r.dataset.showbackRow)")}
    assert {"nlp", "vision", "recommender"} <= teams


def test_quota_over_time_on_screen(portal: str, browser: Any) -> None:
    """The demo's running grant on the pool's timeline and its time left on vision's
    gauge; nlp's budget half spent on its page; a grant asked on the team page and
    approved on the Requests page shows on the timeline, to come."""
    from playwright.sync_api import expect

    admin = sign_in(browser, portal, "admin@example.org", admin=True)
    wait_ready(admin, portal)
    admin.goto(portal + "/admin")
    bar = admin.locator('[data-grant-bar="1"]')
    expect(bar).to_have_attribute("data-grant-state", "running")
    expect(bar).to_contain_text("vision +0.5 pool l40s")
    admin.goto(portal + "/teams/1")
    budget = admin.locator("#budget")
    expect(budget.locator("[data-budget-percent]")).to_have_text("50 %")
    expect(budget).to_contain_text("At this month's rate so far")

    # vision's lead asks for more in the L40S pool from next week; the admin approves it.
    lead = sign_in(browser, portal, "lead-vision@example.org")
    lead.goto(portal + "/teams/2")
    expect(lead.locator('[data-grant-on-gauge="1"]')).to_contain_text("left")
    form = lead.locator("details.grant-ask")
    form.locator("summary").click()
    form.locator("#g-gpus").fill("0.25")
    form.locator("#g-pool").select_option("l40s")
    start = datetime.now(UTC).replace(minute=0, second=0, microsecond=0) + timedelta(days=4)
    form.locator("#g-start").fill(start.strftime("%Y-%m-%dT%H:%M"))
    form.locator("#g-end").fill((start + timedelta(days=2)).strftime("%Y-%m-%dT%H:%M"))
    form.locator("#g-reason").fill("a demo to a customer")
    form.locator("button:has-text('Ask for it')").click()
    expect(lead.locator(".toast")).to_contain_text("Asked for grant #2: +0.25 GPU in pool l40s")
    admin.goto(portal + "/admin/requests")
    card = admin.locator('[data-grant-review="2"]')
    expect(card.locator("[data-grant-fit]")).to_have_attribute("data-grant-fit", "yes")
    card.locator("button:has-text('Approve grant #2')").click()
    expect(admin.locator(".toast")).to_contain_text("Approved grant #2")
    admin.goto(portal + "/admin")
    expect(admin.locator('[data-grant-bar="2"]')).to_have_attribute("data-grant-state", "approved")
