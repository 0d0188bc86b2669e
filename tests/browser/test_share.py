"""What a person sees about GPU shares, in headless Chromium against a portal process: the
gauge, the explanation and the API agree (for a team above its fair share too), a review
card shows the asked values and their effect, and the what-if page recomputes as one
types."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from tests.browser.conftest import pin_usage, seeded_portal, wait_ready

pytestmark = pytest.mark.browser


@pytest.fixture(scope="module")
def portal(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    with seeded_portal(
        tmp_path_factory.mktemp("portal-share"),
        PORTAL_SIMULATED_STEP_SECONDS="0.1",
        PORTAL_WORKER_INTERVAL_SECONDS="0.3",
        PORTAL_USAGE_CACHE_SECONDS="60",
    ) as url:
        yield url


def _sign_in(browser: object, portal: str, *, admin: bool, email: str = "") -> object:
    from playwright.sync_api import Browser, expect

    assert isinstance(browser, Browser)
    page = browser.new_context().new_page()
    page.set_default_timeout(15_000)
    page.goto(portal + "/login")
    if admin:
        page.click("text=Platform admin")
        expect(page.locator("h1")).to_contain_text("Pool")
    else:
        page.fill("#f-email", email)
        page.click("button:has-text('Sign in')")
    return page


def _api(page: object, portal: str, path: str) -> Any:
    """The same numbers through the API, with the page's own session."""
    from playwright.sync_api import Page

    assert isinstance(page, Page)
    cookies = {c["name"]: c["value"] for c in page.context.cookies()}
    return httpx.get(portal + path, cookies=cookies, timeout=10).json()


def test_gauge_explanation_and_api_agree_above_the_fair_share(portal: str, browser: object) -> None:
    from playwright.sync_api import Page, expect

    admin = _sign_in(browser, portal, admin=True)
    assert isinstance(admin, Page)
    # Wait for the example teams to be ready, then hold their usage where nlp borrowed
    # while vision was idle and vision now asks for its guarantee.
    wait_ready(admin, portal)
    for team, allocated, requested in (
        ("nlp", "0.9", "0.9"),
        ("vision", "0.05", "0.5"),
        ("recommender", "0.05", "0.05"),
    ):
        pin_usage(admin, portal, team, allocated, requested)

    admin.goto(portal + "/teams/1")
    share = admin.locator("#share")
    expect(share.locator('[data-gauge="allocated"]')).to_have_text("0.9")
    expect(share.locator('[data-gauge="fair"]')).to_have_text("0.62")
    expect(share.locator('[data-gauge="guaranteed"]')).to_have_text("0.33")
    above = share.locator('[data-explain="above"]')
    expect(above).to_contain_text("more than KAI's fair share of 0.62")
    expect(above).to_contain_text("KAI may reclaim 0.28 of them")
    expect(share.locator("svg[role=img]").first).to_have_attribute(
        "aria-label",
        "Guaranteed 0.33 GPU, in use 0.9, requested 0.9, fair share now 0.62, "
        "limit 1 of a 1 GPU pool",
    )
    api = _api(admin, portal, "/api/v1/teams/1")["gpu_share"]
    assert (api["allocated"], api["fair_now"], api["guaranteed"]) == (0.9, 0.62, 0.33)
    vision = _api(admin, portal, "/api/v1/teams/2")["gpu_share"]
    admin.goto(portal + "/teams/2")
    expect(admin.locator('#share > figure.gauge:first-of-type [data-gauge="fair"]')).to_have_text(
        str(vision["fair_now"])
    )
    expect(admin.locator('#share [data-explain="why"]')).to_contain_text("0.45 GPU of your work")


def test_a_review_card_shows_the_asked_values_and_their_effect(
    portal: str, browser: object
) -> None:
    from playwright.sync_api import Page, expect

    lead = _sign_in(browser, portal, admin=False, email="lead-vision@example.org")
    assert isinstance(lead, Page)
    wait_ready(lead, portal)  # (the example's L40S queue is made at start)
    lead.goto(portal + "/teams/2/quota")
    lead.fill("#f-gpu_quota", "0.2")
    lead.click("button[type=submit]:has-text('Send')")
    expect(lead.locator(".toast")).to_contain_text("Quota change sent")

    admin = _sign_in(browser, portal, admin=True)
    assert isinstance(admin, Page)
    admin.click("nav >> text=Requests")
    card = admin.locator("article.request", has_text="vision")
    expect(card.locator("dl")).to_contain_text("0.33 → 0.2 GPU")
    expect(card.locator("dl")).to_contain_text("Over-quota weight")
    expect(card.locator('[data-impact-team="vision"] [data-impact="guarantee"]')).to_have_text(
        "0.2"
    )
    card.locator("summary:has-text('Approve with changes')").click()
    expect(card.locator("input[name=gpu_quota]")).to_have_value("0.2")
    expect(card.locator("input[name=gpu_limit]")).to_have_value("1")


def test_the_what_if_page_recomputes_as_one_types(portal: str, browser: object) -> None:
    from playwright.sync_api import Page, expect

    admin = _sign_in(browser, portal, admin=True)
    assert isinstance(admin, Page)
    errors: list[str] = []
    admin.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    admin.click("nav >> summary:has-text('Plan')")
    admin.click("nav >> text=What if")
    # Today's figures on load, every team listed, unchanged ones marked.
    today = admin.locator('[data-whatif-result="vision"]')
    expect(today).to_contain_text("(no change)")
    expect(today.locator('[data-whatif="guarantee"]')).to_have_text("0.33")
    admin.fill('input[aria-label="guarantee of nlp"]', "0.5")
    row = admin.locator('[data-whatif-result="nlp"]')
    expect(row.locator('[data-whatif="guarantee"]')).to_have_text("0.5")
    expect(admin.locator('[data-whatif="summary"]')).to_contain_text("1 team changed")
    admin.fill("#w-pool", "2")
    expect(admin.locator('[data-whatif="summary"]')).to_contain_text("pool 1 → 2 GPU")
    assert errors == [], errors


def test_the_share_is_explained_step_by_step(portal: str, browser: object) -> None:
    """The design source's case, every team busy on the one GPU: 0.34 / 0.33 / 0.33. The
    account, opened on recommender's page, tells why from the calculator's own steps:
    the 0.01 left after the guarantees is offered by weight, a round hands out whole
    GPUs, and the leftover goes to the oldest queue."""
    from playwright.sync_api import Page, expect

    admin = _sign_in(browser, portal, admin=True)
    assert isinstance(admin, Page)
    wait_ready(admin, portal)
    for team in ("nlp", "vision", "recommender"):
        pin_usage(admin, portal, team, "0.33", "1")
    lead = _sign_in(browser, portal, admin=False, email="lead-recommender@example.org")
    assert isinstance(lead, Page)
    lead.goto(portal + "/teams/3")
    fair = lead.locator('#share > figure.gauge:first-of-type [data-gauge="fair"]').inner_text()
    lead.locator("#why-card summary").click()
    steps = lead.locator("#why-card [data-why-step]")
    expect(steps.first).to_be_visible()
    texts = [" ".join(t.split()) for t in steps.all_inner_texts()]
    top = "Guarantees first: ml-org gets 1 (its guarantee is 1) — the only queue here at the top."
    assert texts == [
        top,
        "Nothing is left after the guarantees: no share of idle GPUs to divide.",
        "Guarantees first: recommender gets 0.33 (its guarantee is 0.33); the other 2 queues "
        "0.66 together.",
        "Round 1 of priority 100: by weight (33% of the weights of the queues still asking) "
        "recommender was offered less than 0.01; KAI hands out whole GPUs in a round, so it "
        "took 0 and less than 0.01 was set aside for the leftovers.",
        "Leftovers: what the rounds set aside goes in pieces of at most 1 GPU to the largest "
        "set-aside parts first, ties to the older queue: nlp +0.01. KAI settles this the "
        "same way in every cycle, so it is not a passing figure.",
        "recommender's set-aside part was smaller (or its queue younger) than theirs, so it "
        "got no piece.",
    ]
    results = lead.locator("#why-card [data-why-result]").all_inner_texts()
    assert results == ["1 GPU", f"{fair} GPU"]
    assert fair == "0.33"
