"""Node pools as people see them, in headless Chromium against a portal started as
`make run` starts it: the admin reads each pool's budget, what is guaranteed there and
what the cluster's nodes hold; the vision lead reads a gauge for the L40S pool whose
figures are the API's, and a pod spec for that pool."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest

from tests.browser.conftest import seeded_portal, wait_ready
from tests.browser.test_share import _api, _sign_in

pytestmark = pytest.mark.browser


@pytest.fixture(scope="module")
def portal(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    with seeded_portal(
        tmp_path_factory.mktemp("portal-pools"),
        PORTAL_SIMULATED_STEP_SECONDS="0.1",
        PORTAL_WORKER_INTERVAL_SECONDS="0.3",
        PORTAL_SIMULATED_CLUSTER_GPUS="8",
    ) as url:
        yield url


@pytest.fixture(scope="module", autouse=True)
def _no_demo_grant(portal: str, browser: object) -> None:
    """The demo's temporary grant (vision's +0.5 GPU in the L40S pool) ended by its lead
    from the team page, so the figures below are the pool's own: the grant's part comes
    back out of the queue at once."""
    from playwright.sync_api import Page, expect

    lead = _sign_in(browser, portal, admin=False, email="lead-vision@example.org")
    assert isinstance(lead, Page)
    wait_ready(lead, portal)
    lead.goto(portal + "/teams/2")
    grant = lead.locator('[data-grant="1"]')
    expect(grant).to_have_attribute("data-grant-state", "running")
    expect(lead.locator('[data-grant-on-gauge="1"]')).to_contain_text(
        "includes a temporary +0.5 GPU in pool l40s"
    )
    grant.locator("button:has-text('End now')").click()
    expect(lead.locator(".toast")).to_contain_text("Grant #1 ended")
    expect(lead.locator('[data-grant="1"]')).to_have_attribute("data-grant-state", "ended")
    # The gauges read the org's view, refreshed every few seconds.
    second = lead.locator("#share figure.gauge").nth(1).locator('[data-gauge="guaranteed"]')
    deadline = time.monotonic() + 30
    while lead.goto(portal + "/teams/2") and second.text_content() != "1":
        assert time.monotonic() < deadline, "the gauge never followed the grant's end"
        time.sleep(0.5)


def test_an_admin_reads_each_pool_and_a_lead_its_l40s_gauge(portal: str, browser: object) -> None:
    from playwright.sync_api import Page, expect

    admin = _sign_in(browser, portal, admin=True)
    assert isinstance(admin, Page)
    wait_ready(admin, portal)
    admin.click("text=Node pools")
    expect(admin.locator("h1")).to_have_text("Node pools")
    default = admin.locator('tr[data-pool="default"]')
    expect(default.locator('[data-cell="budget"]')).to_have_text("1 GPU")
    expect(default.locator('[data-cell="guaranteed"]')).to_have_text("0.99 GPU")
    expect(default.locator('[data-cell="cluster"]')).to_contain_text("8 on 1 node")
    l40s = admin.locator('tr[data-pool="l40s"]')
    expect(l40s.locator('[data-cell="budget"]')).to_have_text("2 GPU")
    expect(l40s.locator('[data-cell="guaranteed"]')).to_have_text("1 GPU")  # vision's
    expect(l40s.locator('[data-cell="cluster"]')).to_contain_text("4 on 1 node")
    expect(l40s).to_contain_text("NVIDIA L40S")
    expect(admin.locator("[data-flag]")).to_have_count(0)

    lead = _sign_in(browser, portal, admin=False, email="lead-vision@example.org")
    assert isinstance(lead, Page)
    team = next(t for t in _api(lead, portal, "/api/v1/teams") if t["name"] == "vision")
    lead.goto(f"{portal}/teams/{team['id']}")
    expect(lead.locator('[data-key="GPU in pool l40s"]')).to_have_text("GPU share in pool l40s")
    gauges = lead.locator("#share figure.gauge")
    expect(gauges).to_have_count(2)
    second = gauges.nth(1)
    expect(second.locator('[data-gauge="guaranteed"]')).to_have_text("1")
    expect(second.locator('[data-gauge="limit"]')).to_have_text("2")
    expect(second).to_contain_text("of 2 GPU pool")
    expect(lead.locator("#share")).to_contain_text("GPU share")
    pods = lead.locator("text=kai.scheduler/node-pool: l40s")
    expect(pods.first).to_be_attached()

    # The overview: the L40S pool's figures, and vision's gauge there under its own.
    admin.goto(portal + "/admin")
    block = admin.locator('[data-node-pool="l40s"]')
    expect(block.locator('[data-pool-cell="budget"]')).to_have_text("2")
    expect(block.locator('[data-pool-cell="guaranteed"]')).to_have_text("1")
    expect(block).to_contain_text("Guaranteed to 1 team")
    in_row = admin.locator('#teams-table [data-pool-gauge="l40s"]')
    expect(in_row).to_have_count(1)
    expect(in_row.locator('[data-gauge="guaranteed"]')).to_have_text("1")


def test_a_review_card_shows_each_pool_and_the_admin_adjusts_it(
    portal: str, browser: object
) -> None:
    """nlp's lead asks for 0.5 GPU in the L40S pool on the quota form; the admin's card
    shows that pool's before → after, who would get less there (nobody: the pool's nodes
    hold 4 GPUs, vision's limit is 2) and its fit, and the admin approves 0.25 there
    instead."""
    from playwright.sync_api import Page, expect

    lead = _sign_in(browser, portal, admin=False, email="lead-nlp@example.org")
    assert isinstance(lead, Page)
    wait_ready(lead, portal)
    lead.goto(portal + "/teams/1/quota")
    lead.click("summary:has-text('Other node pools')")
    lead.fill('[name="pools.l40s.gpu_quota"]', "0.5")
    lead.fill('[name="pools.l40s.gpu_limit"]', "2")
    lead.click("button[type=submit]:has-text('Send')")
    expect(lead.locator(".toast")).to_contain_text("Quota change sent")

    admin = _sign_in(browser, portal, admin=True)
    assert isinstance(admin, Page)
    # The L40S pool's shard (its 4 GPUs) is read once a page has asked for the pool.
    nodes = admin.locator('[data-node-pool="l40s"] [data-pool-cell="nodes"]')
    deadline = time.monotonic() + 30
    while admin.goto(portal + "/admin") and nodes.count() == 0:
        assert time.monotonic() < deadline, "the L40S pool's nodes were never read"
        time.sleep(0.5)
    expect(nodes).to_have_text("4")
    admin.click("nav >> text=Requests")
    card = admin.locator("article.request", has_text="nlp")
    expect(card.locator('[data-asked="pool-l40s"]')).to_contain_text("none → 0.5 GPU guaranteed")
    pool = card.locator('[data-pool-review="l40s"]')
    expect(pool.locator("h3")).to_have_text("In pool l40s (NVIDIA L40S): 0.5 GPU guaranteed")
    expect(pool.locator('[data-impact-team="nlp"] [data-impact="guarantee"]')).to_have_text("0.5")
    # The pool's 4 GPUs leave vision its limit of 2 while they are idle; of the pool's
    # budget of 2 (every team busy, the rest of its nodes too) it keeps 1 once nlp holds
    # 0.5: both worlds shown, the loss named with the world it is in.
    expect(pool.locator('[data-impact-team="vision"] [data-impact="busy"]')).to_have_text("2")
    expect(pool.locator('[data-impact-team="vision"] [data-impact="within"]')).to_have_text("1")
    expect(pool.locator('[data-impact="summary"]')).to_have_text(
        "1 team would get less if every team were busy (of the pool, or of the cluster while "
        "the rest is idle); the most: vision (-1.00 GPU)."
    )
    expect(pool.locator('[data-review="fit-l40s"]')).to_contain_text(
        "Fits: pool l40s would be 1.5 of its 2 GPU guaranteed."
    )
    card.locator("summary:has-text('Approve with changes')").click()
    field = card.locator('[name="pools.l40s.gpu_quota"]')
    expect(field).to_have_value("0.5")
    field.fill("0.25")
    expect(pool.locator('[data-impact-team="nlp"] [data-impact="guarantee"]')).to_have_text("0.25")
    card.locator("button:has-text('Approve with these values')").click()
    expect(admin.locator(".toast")).to_contain_text("Approved nlp with adjusted values.")
    team = next(t for t in _api(admin, portal, "/api/v1/teams") if t["name"] == "nlp")
    assert team["quota"]["pools"]["l40s"]["gpu"]["guarantee"] == "0.25"
