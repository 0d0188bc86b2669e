"""Previews that can happen, as an admin and a lead see them in headless Chromium: a
review card that previews the largest guarantee that fits and follows what is typed, a
refused approval kept open with its values, KAI's division after a decision step by
step, the pool's preview readable at 1280 px and on a phone with a confirmation for a
pool below the guarantees, the what-if's account of one team, and the quota-change
form's current → new. axe-core finds nothing serious on any of them at either width."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import pytest

from tests.browser.conftest import axe_violations, pin_usage, seeded_portal, sign_in, wait_ready

pytestmark = pytest.mark.browser

DESKTOP = {"width": 1280, "height": 900}
PHONE = {"width": 390, "height": 844}


@pytest.fixture(scope="module")
def portal(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    with seeded_portal(
        tmp_path_factory.mktemp("portal-previews"),
        PORTAL_SIMULATED_STEP_SECONDS="0.1",
        PORTAL_WORKER_INTERVAL_SECONDS="0.3",
        # The org's queue capped at its pool on a larger cluster: a pool tried is that many
        # GPUs for its teams.
        PORTAL_ORG_QUEUE_GPU_LIMIT="pool",
        PORTAL_SIMULATED_CLUSTER_GPUS="4",
    ) as url:
        yield url


def _fits(page: Any, selector: str) -> None:
    """Nothing of ``selector`` is cut off: no sideways scroll inside it, none on the page."""
    inner = page.evaluate(
        "s => { const e = document.querySelector(s); return e.scrollWidth - e.clientWidth; }",
        selector,
    )
    page_wider = page.evaluate(
        "document.documentElement.scrollWidth - document.documentElement.clientWidth"
    )
    # 1 px is the rounding of fractional widths (seen once under load), not a cut-off.
    assert inner <= 1, f"{selector}: {inner} px wider than its box"
    assert page_wider <= 1, f"the page is {page_wider} px wider than the screen"


def _checked_at_both_widths(page: Any, selector: str) -> None:
    for size in (DESKTOP, PHONE):
        page.set_viewport_size(size)
        _fits(page, selector)
        assert axe_violations(page) == [], size
    page.set_viewport_size(DESKTOP)


def test_a_review_card_previews_what_can_happen_as_the_admin_types(
    portal: str, browser: Any
) -> None:
    from playwright.sync_api import expect

    admin = sign_in(browser, portal, "admin@example.org", admin=True, viewport=DESKTOP)
    wait_ready(admin, portal)
    lead = sign_in(browser, portal, "lead-speech@example.org", viewport=DESKTOP)
    lead.goto(portal + "/teams/new")
    lead.fill("#f-name", "speech")
    lead.fill("#f-gpu_quota", "0.5")
    lead.fill("#f-gpu_limit", "1")
    lead.click("button[type=submit]:has-text('Send')")
    lead.wait_for_url(lambda url: "/teams/" in url and "/new" not in url)

    admin.goto(portal + "/admin/requests")
    card = admin.locator("article.request", has_text="speech")
    trimmed = card.locator('[data-review="trimmed"]')
    expect(trimmed).to_contain_text("The asked guarantee of 0.5 GPU does not fit")
    expect(trimmed).to_contain_text("at most 0.01 GPU can be")
    expect(card.locator(".impact h3")).to_have_text("If approved with a guarantee of 0.01 GPU")
    subject = card.locator('[data-impact-team="speech"]')
    expect(subject.locator('[data-impact="guarantee"]')).to_have_text("0.01")
    expect(card.locator("button:has-text('Approve as asked')")).to_be_disabled()

    # The step-by-step account of the division after it, opened on the card.
    card.locator("summary:has-text('Why speech would get this')").click()
    steps = card.locator("[data-why-step]")
    expect(steps.first).to_be_visible()
    expect(card.locator('[data-account-part="busy"]')).to_have_text(
        "If every team were busy (and the rest of the cluster idle)"
    )
    expect(card.locator("[data-why-step]", has_text="speech gets 0.01")).to_have_count(1)

    # "Approve with changes" starts from the largest guarantee and follows the typing.
    card.locator("summary:has-text('Approve with changes')").click()
    quota = card.locator("input[name=gpu_quota]")
    expect(quota).to_have_value("0.01")
    card.locator("input[name=gpu_limit]").fill("0.5")
    expect(card.locator(".impact h3")).to_have_text(
        "If approved with these values (guarantee 0.01, limit 0.5)"
    )
    expect(card.locator('[data-review="fit"]')).to_contain_text("Fits: the pool would be 1 of 1")
    quota.fill("0.2")
    expect(card.locator('[data-review="fit"]')).to_contain_text(
        "Does not fit: 1.19 of 1 GPU. At most 0.01 GPU can be guaranteed."
    )
    expect(subject.locator('[data-impact="guarantee"]')).to_have_text("0.2")
    card.locator("input[name=over_quota_weight]").fill("lots")
    expect(card.locator('[data-review="errors"]')).to_contain_text("Over-quota weight:")
    expect(card.locator(".impact")).to_have_count(0)
    card.locator("input[name=over_quota_weight]").fill("1")
    expect(card.locator(".impact h3")).to_contain_text("guarantee 0.2")
    _checked_at_both_widths(admin, "#" + (card.get_attribute("id") or ""))

    # Refused: the card stays open with the values, the note and the reason.
    card.get_by_label("Note for the team").fill("trimmed to what fits")
    card.locator("button:has-text('Approve with these values')").click()
    card = admin.locator("article.request", has_text="speech")
    refusal = card.locator('[data-review="refused"]')
    expect(refusal).to_contain_text("Not approved:")
    expect(refusal).to_contain_text("0.01 GPU is free")
    expect(card.locator("input[name=gpu_quota]")).to_have_value("0.2")
    expect(card.locator("input[name=gpu_limit]")).to_have_value("0.5")
    expect(card.get_by_label("Note for the team")).to_have_value("trimmed to what fits")
    expect(card.locator("input[name=gpu_quota]")).to_be_visible()  # the form is open
    _checked_at_both_widths(admin, "#" + (card.get_attribute("id") or ""))

    # Sent within what fits: approved.
    card.locator("input[name=gpu_quota]").fill("0.01")
    card.locator("button:has-text('Approve with these values')").click()
    expect(admin.locator(".toast")).to_contain_text("Approved speech with adjusted values.")


def test_the_pool_preview_is_readable_and_a_pool_below_the_guarantees_needs_a_yes(
    portal: str, browser: Any
) -> None:
    from playwright.sync_api import expect

    admin = sign_in(browser, portal, "admin@example.org", admin=True, viewport=DESKTOP)
    wait_ready(admin, portal)
    for team in ("nlp", "vision", "recommender"):  # every team busy: a pool moves them all
        pin_usage(admin, portal, team, "0.33", "1")
    admin.goto(portal + "/admin")
    admin.click("summary:has-text('Change the pool')")
    admin.fill("#p-gpus", "2")
    preview = admin.locator("#pool-impact")
    expect(preview.locator("h3")).to_have_text("With this pool (pool 1 → 2 GPU)")
    # KAI's whole-GPU rounds move the oldest team most (past 1 GPU; others by leftovers,
    # if at all): every figure of every row on screen, none scrolled away.
    rows = preview.locator("[data-impact-team]")
    expect(rows.first).to_be_visible()
    assert rows.count() >= 1
    oldest = preview.locator('[data-impact-team="nlp"] [data-impact="now"]')
    expect(oldest).to_be_visible()
    assert float(oldest.inner_text()) > 1, "the oldest team takes the whole GPUs"
    for i in range(rows.count()):
        row = rows.nth(i)
        expect(row.locator('[data-impact="guarantee"]')).to_be_in_viewport()
        expect(row.locator('[data-impact="busy"]')).to_be_in_viewport()
        expect(row.locator('[data-impact="now"]')).to_be_in_viewport()
    _checked_at_both_widths(admin, "#pool-impact .table-scroll")

    admin.fill("#p-gpus", "0.5")
    expect(preview.locator('[data-impact="below-committed"]')).to_contain_text(
        "A pool of 0.5 GPU is below the"
    )
    expect(preview.locator('input[name="below_committed"]')).not_to_be_checked()
    _checked_at_both_widths(admin, "#pool-impact")

    admin.click("button:has-text('Save pool')")
    refused = admin.locator('[data-pool="error"]')
    expect(refused).to_contain_text("Pool not changed:")
    expect(refused).to_contain_text("or confirm a pool below the guarantees")
    expect(admin.locator("#p-gpus")).to_have_value("0.5")
    admin.check('input[name="below_committed"]')
    admin.click("button:has-text('Save pool')")
    expect(admin.locator(".toast")).to_contain_text("Pool is now 0.5 GPU.")
    expect(admin.locator('[data-testid="pool-overcommitted"]')).to_contain_text(
        "GPU more than the pool"
    )
    # Back to the seed's pool for the other tests.
    admin.click("summary:has-text('Change the pool')")
    admin.fill("#p-gpus", "1")
    admin.click("button:has-text('Save pool')")
    expect(admin.locator(".toast")).to_contain_text("Pool is now 1 GPU.")
    expect(admin.locator('[data-testid="pool-overcommitted"]')).to_have_count(0)


def test_the_what_if_tells_one_teams_division_and_keeps_telling_it(
    portal: str, browser: Any
) -> None:
    from playwright.sync_api import expect

    admin = sign_in(browser, portal, "admin@example.org", admin=True, viewport=DESKTOP)
    wait_ready(admin, portal)
    for team in ("nlp", "vision", "recommender"):
        pin_usage(admin, portal, team, "0.33", "1")
    admin.goto(portal + "/admin/what-if")
    admin.fill("#w-pool", "2")
    row = admin.locator('[data-whatif-result="nlp"]')
    expect(admin.locator('[data-whatif="summary"]')).to_contain_text("pool 1 → 2 GPU")
    row.locator("button:has-text('why?')").click()
    panel = admin.locator("#whatif-why")
    expect(panel.locator("h3").first).to_have_text("nlp after these changes, step by step")
    expect(
        panel.locator("[data-why-step]", has_text="KAI settles this the same way")
    ).not_to_have_count(0)
    figure = admin.locator('[data-whatif-result="nlp"] [data-whatif="now"]').inner_text()
    expect(panel.locator("[data-why-result]").nth(1)).to_have_text(figure + " GPU")
    # KAI's fair share above the limit is marked with what the team can use.
    expect(row.locator('[data-whatif="capped"]')).to_contain_text("(uses at most 1)")
    # An invalid input marks the figures stale until it is fixed.
    admin.fill('input[aria-label="limit of recommender"]', "lots")
    expect(admin.locator('[data-whatif="stale"]')).to_be_visible()
    expect(admin.locator("#whatif-results")).to_have_class(re.compile(r"\bstale\b"))
    admin.fill('input[aria-label="limit of recommender"]', "1")
    expect(admin.locator('[data-whatif="stale"]')).to_have_count(0)
    # The next keystroke recomputes; the account stays and follows it.
    admin.fill('input[aria-label="weight of vision"]', "3")
    expect(admin.locator('[data-whatif="summary"]')).to_contain_text("1 team changed")
    expect(panel.locator("h3").first).to_have_text("nlp after these changes, step by step")
    _checked_at_both_widths(admin, "#whatif-why")


def test_the_quota_change_form_shows_current_to_new_and_what_kai_may_take_back(
    portal: str, browser: Any
) -> None:
    from playwright.sync_api import expect

    admin = sign_in(browser, portal, "admin@example.org", admin=True, viewport=DESKTOP)
    wait_ready(admin, portal)
    pin_usage(admin, portal, "nlp", "0.9", "0.9")
    for team in ("vision", "recommender"):
        pin_usage(admin, portal, team, "0", "0")
    lead = sign_in(browser, portal, "lead-nlp@example.org", viewport=DESKTOP)
    lead.goto(portal + "/teams/1/quota")
    feedback = lead.locator("#feedback")
    expect(feedback.locator('[data-change="gpu_quota"]')).to_contain_text("(no change)")
    lead.fill("#f-gpu_quota", "0.1")
    lead.fill("#f-gpu_limit", "0.3")
    expect(feedback.locator('[data-change="gpu_quota"]')).to_contain_text("0.33 → 0.1")
    expect(feedback.locator('[data-change="gpu_limit"]')).to_contain_text("1 → 0.3")
    pool = lead.request.get(portal + "/api/v1/pool").json()
    left = float(pool["gpus"]) - float(pool["committed_gpus"]) + 0.33 - 0.1
    expect(feedback.locator('[data-fit="yes"]')).to_contain_text(f"Fits: {left:.2f} GPU stays")
    expect(feedback.locator('[data-own="reclaim"]')).to_have_text(
        "nlp uses 0.9 GPU now: after this change KAI may take back 0.6 GPU of its running "
        "work when other teams ask for their share."
    )
    lead.fill("#f-gpu_limit", "0.05")
    expect(lead.locator("#err-gpu_limit")).to_contain_text("cannot be below the guarantee")
    expect(feedback.locator('[data-fit="unknown"]')).to_be_visible()
    lead.fill("#f-gpu_limit", "0.3")
    expect(feedback.locator('[data-own="reclaim"]')).to_be_visible()
    _checked_at_both_widths(lead, "#feedback")
