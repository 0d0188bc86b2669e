"""The screens' smaller rough edges, as a person met them in headless Chromium, each
fixed and read off the screen: a bell drawn in the page's colour that counts only what
is new, the fair-share mark on the admin's compact gauges, names instead of e-mail
addresses and fields by their labels in what people are told, a member called a member
by the name typed at sign-in, two kubeconfigs of one person counted, a failure with a
retry coming shown as retrying, what a pending or rejected team asked for with "Request
again", and a restart of the demo that is no drift alarm."""

from __future__ import annotations

import re
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.browser.conftest import seeded_portal, sign_in, wait_ready

pytestmark = pytest.mark.browser


SETTINGS = {
    "PORTAL_SIMULATED_STEP_SECONDS": "0.1",
    "PORTAL_WORKER_INTERVAL_SECONDS": "0.3",
    "PORTAL_RETRY_BASE_SECONDS": "4",
}


@pytest.fixture(scope="module")
def portal(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    with seeded_portal(tmp_path_factory.mktemp("portal-edges"), **SETTINGS) as url:
        yield url


def _request(page: Any, portal: str, name: str, quota: str, limit: str) -> None:
    page.goto(portal + "/teams/new")
    page.fill("#f-name", name)
    page.fill("#f-gpu_quota", quota)
    page.fill("#f-gpu_limit", limit)
    page.click("button[type=submit]:has-text('Send')")
    page.wait_for_url(lambda url: "/teams/" in url and "/new" not in url)


def test_the_bell_counts_what_is_new_and_messages_speak_in_names_and_labels(
    portal: str, browser: Any
) -> None:
    from playwright.sync_api import expect

    admin = sign_in(browser, portal, "admin@example.org", admin=True)
    wait_ready(admin, portal)
    admin.goto(portal + "/admin")
    # Drawn, not an emoji that shows as a box without an emoji font; nothing new.
    icon = admin.locator("#bell svg.bell-icon")
    expect(icon).to_be_visible()
    assert icon.bounding_box()["width"] >= 16
    expect(admin.locator("#bell .badge")).to_have_count(0)
    # Every compact gauge draws the fair-share mark its legend describes.
    rows = admin.locator("#teams-table tbody tr")
    expect(rows).to_have_count(3)
    # (three teams' gauges, and vision's in the L40S pool under its own)
    expect(admin.locator("#teams-table figure.gauge")).to_have_count(4)
    expect(admin.locator("#teams-table .g-fair")).to_have_count(4)
    total = admin.locator("span.small.muted", has_text=re.compile(r"^\d+ teams?"))
    expect(total).to_have_text("3 teams")  # from the ready view and the statement

    lead = sign_in(browser, portal, "lead-speech@example.org")
    _request(lead, portal, "speech", "0.01", "0.5")
    admin.goto(portal + "/admin/requests")
    expect(admin.locator("#bell .badge")).to_have_text("1")
    card = admin.locator("article.request", has_text="speech")
    card.locator("summary:has-text('Approve with changes')").click()
    card.locator("input[name=gpu_limit]").fill("0.4")
    card.get_by_label("Note for the team").fill("a smaller limit to start")
    card.locator("button:has-text('Approve with these values')").click()
    expect(admin.locator(".toast")).to_contain_text("Approved speech with adjusted values.")
    expect(admin.locator("#bell .badge")).to_have_count(0)  # decided: no longer new
    admin.goto(portal + "/admin")
    expect(total).to_have_text("4 teams")  # approved: counted once, now from the view

    lead.goto(portal + "/notifications")
    told = lead.locator(".notification", has_text="approved with changes").first
    expect(told).to_contain_text("GPU limit 0.5 → 0.4")
    expect(lead.locator(".notifications")).not_to_contain_text("gpu_limit")
    lead.goto(portal + "/audit")
    expect(lead.locator("main")).to_contain_text("with changes: GPU limit 0.5 → 0.4")
    expect(lead.locator("main")).not_to_contain_text("gpu_limit")


def test_a_member_is_a_member_by_the_name_typed_and_holders_are_counted(
    portal: str, browser: Any
) -> None:
    from playwright.sync_api import expect

    lead = sign_in(browser, portal, "lead-nlp@example.org", accept_downloads=True)
    wait_ready(lead, portal)
    lead.goto(portal + "/teams/1")
    expect(lead.locator(".who .chip")).to_have_text("Lead Nlp · team lead")
    lead.fill("#m-email", "ada@example.org")
    lead.click("#members button:has-text('Add')")
    expect(lead.locator("#members")).to_contain_text("ada@example.org")

    member = browser.new_context().new_page()
    member.goto(portal + "/login")
    member.fill("#f-email", "ada@example.org")
    member.fill("#f-name", "Ada Lovelace")
    member.click("button:has-text('Sign in')")
    member.wait_for_url(lambda url: "/login" not in url)
    member.goto(portal + "/teams/1")
    expect(member.locator(".who .chip")).to_have_text("Ada Lovelace · member")
    expect(member.locator("#members")).to_contain_text("Ada Lovelace")
    member.goto(portal + "/notifications")
    expect(member.locator(".notification").first).to_contain_text(
        "Lead Nlp made you a member of nlp"
    )

    for ttl in ("8h", "1d"):
        lead.select_option("#kc-ttl", ttl)
        with lead.expect_download():
            lead.click("text=Download kubeconfig")
    lead.reload()
    holder = lead.locator('#access .holder-row[data-holder="lead-nlp@example.org"]')
    expect(holder.locator("b")).to_have_text("Lead Nlp")
    expect(holder).to_contain_text("2 kubeconfigs, the first expires")
    expect(holder).to_contain_text(", the last ")


def test_a_failure_with_a_retry_coming_is_retrying_and_a_rejection_can_be_asked_again(
    portal: str, browser: Any
) -> None:
    from playwright.sync_api import expect

    admin = sign_in(browser, portal, "admin@example.org", admin=True)
    wait_ready(admin, portal)
    admin.goto(portal + "/admin")
    admin.click("summary:has-text('Inject a failure')")
    admin.select_option("#s-step", "namespace")
    admin.fill("#s-team", "audio")
    admin.fill("#s-times", "2")
    admin.click("button:has-text('Inject')")

    lead = sign_in(browser, portal, "lead-audio@example.org")
    _request(lead, portal, "audio", "0", "0.2")
    page = lead.url
    pill = lead.locator("#team-pill .pill")
    expect(pill).to_have_text("submitted")
    card = admin.locator("article.request", has_text="audio")
    admin.goto(portal + "/admin/requests")
    card.locator("button:has-text('Approve as asked')").click()
    # The first attempts fail; the next is seconds away: retrying, never a red FAILED.
    seen: list[str] = []
    deadline = time.monotonic() + 60
    while not seen or seen[-1] != "ready":
        assert time.monotonic() < deadline, seen
        lead.reload()
        seen.append(pill.inner_text().strip().lower())
        time.sleep(0.3)
    assert "retrying" in seen, seen
    assert "failed" not in seen, seen

    _request(lead, portal, "audio2", "0.2", "0.6")
    rejected_page = lead.url
    expect(lead.locator('[data-quota="gpu_quota"]')).to_have_text("0.2")
    expect(lead.locator('[data-quota="gpu_limit"]')).to_have_text("0.6")
    admin.goto(portal + "/admin/requests")
    card = admin.locator("article.request", has_text="audio2")
    card.locator("summary:has-text('Reject')").click()
    card.get_by_label("Reason (the team sees it)").fill("no room this quarter")
    card.locator("button:has-text('Reject request')").click()
    expect(admin.locator(".toast")).to_contain_text("Rejected request")
    lead.goto(rejected_page)
    expect(lead.locator("main")).to_contain_text(
        "The request was rejected; these are the values it asked for."
    )
    expect(lead.locator('[data-quota="gpu_quota"]')).to_have_text("0.2")
    lead.click("[data-action=request-again]")
    expect(lead.locator("#f-name")).to_have_value("audio2")
    expect(lead.locator("#f-gpu_limit")).to_have_value("0.6")
    assert page != rejected_page


def test_a_restart_of_the_demo_is_said_once_and_raises_no_drift_alarm(
    tmp_path: Path, browser: Any
) -> None:
    from playwright.sync_api import expect

    with seeded_portal(tmp_path, **SETTINGS) as first:
        admin = sign_in(browser, first, "admin@example.org", admin=True)
        wait_ready(admin, first)
    with seeded_portal(tmp_path, **SETTINGS) as again:  # the same database, a new process
        admin = sign_in(browser, again, "admin@example.org", admin=True)
        wait_ready(admin, again)
        admin.goto(again + "/admin")
        expect(admin.locator("main")).not_to_contain_text("Repaired in the cluster")
        # The demo's two weeks of history: right-sizing has something to say.
        expect(admin.locator("#rightsizing-summary")).to_contain_text("waiting for more")
        admin.goto(again + "/audit")
        expect(admin.locator("main")).to_contain_text(
            "the simulated cluster started empty in this process"
        )
        expect(admin.locator("main")).not_to_contain_text("does not exist")
