"""Every screen as people see it: on a phone, to a screen reader, in their time zone.

One seeded portal process (the example org: nlp, vision and recommender at 0.33 GPU each,
ready on the simulated cluster) and headless Chromium. The assertions read what is on the
screen: values in cells, widths in pixels, axe-core's findings.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from tests.browser.conftest import axe_violations, pin_usage, seeded_portal, sign_in, wait_ready

pytestmark = pytest.mark.browser

PHONE = {"width": 390, "height": 844}
DESKTOP = {"width": 1280, "height": 800}
ADMIN_PAGES = (
    "/admin",
    "/admin/requests",
    "/admin/what-if",
    "/admin/rightsizing",
    "/admin/usage",
    "/admin/pools",
    "/admin/templates",
    "/admin/templates/2",
    "/admin/deliveries",
    "/admin/webhooks",
    "/notifications/settings",
    "/teams",
    "/teams/new",
    "/teams/1",
    "/teams/1/quota",
    "/teams/1/usage",
    "/teams/1/why",
    "/notifications",
    "/audit",
    "/tokens",
    "/login",
    "/no-such-page",
)
LEAD_PAGES = (
    "/teams",
    "/teams/1",
    "/teams/1/quota",
    "/teams/1/webhooks",
    "/teams/1/usage?range=30d",
    "/teams/new",
    "/audit",
    "/tokens",
    "/notifications/settings",
)


@pytest.fixture(scope="module")
def portal(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    with seeded_portal(
        tmp_path_factory.mktemp("portal"),
        PORTAL_SIMULATED_STEP_SECONDS="0.3",
        PORTAL_WORKER_INTERVAL_SECONDS="0.3",
    ) as url:
        yield url


def _overflow(page: Any) -> int:
    """How many CSS pixels the page is wider than the viewport (0: it fits)."""
    return int(
        page.evaluate("document.documentElement.scrollWidth - document.documentElement.clientWidth")
    )


def _walk(page: Any, portal: str, paths: tuple[str, ...]) -> dict[str, list[str]]:
    problems: dict[str, list[str]] = {}
    for path in paths:
        page.goto(portal + path)
        page.wait_for_load_state("networkidle")
        found = axe_violations(page)
        wider = _overflow(page)
        if wider > 0:
            found.append(f"{wider} px wider than the screen")
        if found:
            problems[path] = found
    return problems


def test_every_page_fits_a_phone_and_has_no_serious_accessibility_problem(
    portal: str, browser: Any
) -> None:
    from playwright.sync_api import expect

    admin = sign_in(browser, portal, "admin@example.org", admin=True, viewport=PHONE)
    # A team borrowing above its guarantee: the orange tag and hatched gauge are on screen.
    wait_ready(admin, portal)
    pin_usage(admin, portal, "nlp", "0.6", "0.6")
    admin.goto(portal + "/admin")
    expect(admin.locator(".tag-borrow").first).to_contain_text("borrowing 0.27")
    assert _walk(admin, portal, ADMIN_PAGES) == {}

    # The same in dark mode, where every colour is a different one.
    admin.emulate_media(color_scheme="dark")
    assert _walk(admin, portal, ADMIN_PAGES) == {}

    lead = sign_in(browser, portal, "lead-nlp@example.org", viewport=PHONE)
    assert _walk(lead, portal, LEAD_PAGES) == {}

    # And at a laptop's 1280 px, where the wider layouts (split panels, tables) apply.
    admin.emulate_media(color_scheme="light")
    admin.set_viewport_size(DESKTOP)
    assert _walk(admin, portal, ADMIN_PAGES) == {}
    lead.set_viewport_size(DESKTOP)
    assert _walk(lead, portal, LEAD_PAGES) == {}
    lead.set_viewport_size(PHONE)

    # The navigation stays one row on a phone (it scrolls sideways inside itself).
    nav = lead.locator("nav[aria-label=Main] a")
    tops = {round(box["y"]) for box in (nav.nth(i).bounding_box() for i in range(nav.count()))}
    assert len(tops) == 1, tops


def test_api_reference_is_served_by_the_portal_under_its_csp(portal: str, browser: Any) -> None:
    from playwright.sync_api import expect

    page = browser.new_context(viewport=PHONE).new_page()
    page.set_default_timeout(15_000)
    requested: list[str] = []
    blocked: list[str] = []
    page.on("request", lambda r: requested.append(r.url))
    page.on(
        "console",
        lambda m: blocked.append(m.text) if "script-src" in m.text or "eval" in m.text else None,
    )
    page.goto(portal + "/docs")
    expect(page.locator(".opblock-summary-path").first).to_be_visible()
    expect(page.locator("#operations-pool-get_pool_api_v1_pool_get")).to_contain_text(
        "/api/v1/pool"
    )
    assert _overflow(page) == 0
    assert axe_violations(page) == []

    page.goto(portal + "/redoc")
    expect(page.get_by_role("heading", name="GPU cluster portal (0.1.0)")).to_be_visible()
    expect(page.locator("[data-section-id='tag/teams']").first).to_be_attached()
    assert _overflow(page) == 0
    assert axe_violations(page) == []

    scripts = [u for u in requested if u.split("?")[0].endswith(".js")]
    assert scripts
    assert all(u.startswith(portal + "/static/") for u in scripts), scripts
    assert blocked == [], blocked


def test_times_are_shown_in_the_viewers_time_zone_with_utc_on_hover(
    portal: str, browser: Any
) -> None:
    admin = sign_in(browser, portal, "admin@example.org", admin=True, timezone_id="Asia/Tokyo")
    admin.goto(portal + "/audit")
    first = admin.locator("table time").first
    utc_text = first.get_attribute("title")
    assert utc_text
    assert utc_text.endswith(" UTC")
    at = datetime.strptime(utc_text, "%Y-%m-%d %H:%M:%S UTC").replace(tzinfo=UTC)
    tokyo = (at + timedelta(hours=9)).strftime("%Y-%m-%d %H:%M:%S")
    shown = first.inner_text()
    assert shown.startswith(tokyo), (shown, tokyo)
    assert "UTC" not in shown
    # Relative times ("5 min ago") carry both on hover.
    admin.goto(portal + "/teams/1")
    relative = admin.locator("#activity time").first
    assert relative.inner_text().endswith("ago") or relative.inner_text() == "just now"
    assert re.search(r"\(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC\)$", relative.get_attribute("title"))


def test_name_filters_on_the_teams_and_pool_pages(portal: str, browser: Any) -> None:
    from playwright.sync_api import expect

    admin = sign_in(browser, portal, "admin@example.org", admin=True)
    admin.goto(portal + "/teams")
    expect(admin.locator(".team-card")).to_have_count(3)
    admin.fill("#q", "visi")
    expect(admin.locator(".team-card")).to_have_count(1)
    expect(admin.locator(".team-card h2")).to_have_text("vision")
    expect(admin).to_have_url(re.compile(r"/teams\?q=visi$"))
    admin.fill("#q", "nothing-like-this")
    expect(admin.locator("#team-cards")).to_contain_text("No team's name contains")

    admin.goto(portal + "/admin")
    admin.fill("#q", "recom")
    rows = admin.locator("#teams-table tbody tr")
    expect(rows).to_have_count(1)
    expect(rows.first.locator("td").first).to_contain_text("recommender")
    expect(rows.first.locator("td.num").first).to_have_text("0.33")


def test_audit_filter_with_its_defaults_answers_with_the_page(portal: str, browser: Any) -> None:
    from playwright.sync_api import expect

    admin = sign_in(browser, portal, "admin@example.org", admin=True)
    admin.goto(portal + "/audit")
    admin.click("button:has-text('Filter')")
    expect(admin.locator("h1")).to_have_text("Audit trail")
    expect(admin.locator("select[name=team_id]")).to_have_value("")
    assert admin.locator("table tbody tr").count() > 3


def test_member_downloads_and_copies_the_commands_with_the_keyboard(
    portal: str, browser: Any
) -> None:
    from playwright.sync_api import expect

    lead = sign_in(browser, portal, "lead-vision@example.org")
    lead.goto(portal + "/teams/2")
    lead.fill("#m-email", "member-vision@example.org")
    lead.click("#members button:has-text('Add')")
    expect(lead.locator("#members")).to_contain_text("member-vision@example.org")

    member = sign_in(
        browser,
        portal,
        "member-vision@example.org",
        accept_downloads=True,
        permissions=["clipboard-read", "clipboard-write"],
    )
    member.goto(portal + "/teams/2")
    expect(member.locator("text=Change quota")).to_have_count(0)
    member.select_option("#kc-ttl", "1h")
    with member.expect_download() as info:
        member.click("text=Download kubeconfig")
    assert info.value.suggested_filename == "kubeconfig-vision.yaml"
    saved = Path(info.value.path())
    assert "(role inside the vCluster: edit)" in saved.read_text()
    member.reload()
    holder = member.locator("#access .holder-row", has_text="member-vision@example.org")
    expect(holder).to_contain_text("edit · expires")
    expect(member.locator("#access")).to_contain_text("Revoke my kubeconfigs")
    expect(member.locator("#access")).not_to_contain_text("Revoke everyone's")

    copy = member.locator("button[data-copy='#use-commands']")
    copy.click()
    expect(copy).to_have_text("Copied")
    pasted = member.evaluate("navigator.clipboard.readText()")
    assert pasted.splitlines()[0] == 'export KUBECONFIG="$PWD/kubeconfig-vision.yaml"'

    # The first Tab reaches the skip link; following it puts the focus in the content.
    member.goto(portal + "/teams/2")
    member.keyboard.press("Tab")
    expect(member.locator(".skip-link")).to_be_focused()
    member.keyboard.press("Enter")
    assert member.evaluate("document.activeElement.id") == "main"


def test_an_open_team_page_follows_the_admins_decision_without_a_reload(
    portal: str, browser: Any
) -> None:
    from playwright.sync_api import expect

    lead = sign_in(browser, portal, "lead-speech@example.org")
    lead.click("nav >> text=Request a cluster")
    lead.fill("#f-name", "speech")
    lead.fill("#f-gpu_quota", "0")
    lead.fill("#f-gpu_limit", "0.5")
    lead.fill("#f-purpose", "speech recognition")
    lead.click("text=Send request")
    expect(lead.locator("#status")).to_contain_text("Waiting for an admin")
    expect(lead.locator("#team-actions")).not_to_contain_text("Download kubeconfig")
    lead.evaluate("window.__sameDocument = true")

    admin = sign_in(browser, portal, "admin@example.org", admin=True)
    admin.goto(portal + "/admin/requests")
    card = admin.locator("article.request", has_text="speech")
    card.locator("summary:has-text('Approve with changes')").click()
    card.locator("input[name=gpu_limit]").fill("0.4")
    card.locator("button:has-text('Approve with these values')").click()
    expect(admin.locator(".toast")).to_contain_text("speech")

    # The lead's page (not reloaded) shows the decided values, the request's new status,
    # the pod spec and the download once ready: every panel agrees with the header.
    expect(lead.locator("h1 .pill")).to_have_text("ready", timeout=40_000)
    expect(lead.locator("#status .pill")).to_have_text("ready")
    expect(lead.locator("#quota-card")).to_contain_text("GPU limit0.4")
    expect(lead.locator("#team-requests .pill")).to_have_text("applied")
    expect(lead.locator("#team-actions")).to_contain_text("Download kubeconfig")
    expect(lead.locator("#pod-spec")).to_contain_text("kai.scheduler/queue")
    assert lead.evaluate("window.__sameDocument === true"), "the page was reloaded"
