"""The figures a platform engineer reads in the demo's world, in a real browser: the
design source's pool of 1 GPU in a simulated cluster of 2, as `make run` starts it."""

from __future__ import annotations

import re
from collections.abc import Iterator
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
