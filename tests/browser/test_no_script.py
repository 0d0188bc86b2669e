"""The whole loop with JavaScript switched off: every step is a plain form or link.

Request, validation errors, approval with changes, provisioning to ready, download, a
quota change, decommission with the typed name, and the audit trail: in Chromium with
JavaScript disabled, asserting what each page shows.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.browser.conftest import seeded_portal, sign_in

pytestmark = pytest.mark.browser


@pytest.fixture(scope="module")
def portal(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    with seeded_portal(
        tmp_path_factory.mktemp("portal-noscript"),
        PORTAL_SIMULATED_STEP_SECONDS="0.2",
        PORTAL_WORKER_INTERVAL_SECONDS="0.3",
    ) as url:
        yield url


def _reload_until(page: Any, selector: str, text: str, seconds: float = 30) -> None:
    deadline = time.monotonic() + seconds
    while text not in (seen := page.locator(selector).text_content() or ""):
        status = " ".join((page.locator("#status").text_content() or "").split())
        assert time.monotonic() < deadline, f"{selector} never showed {text!r}: {seen!r}, {status}"
        time.sleep(0.5)
        page.reload()


def test_the_whole_loop_without_javascript(portal: str, browser: Any, tmp_path: Path) -> None:
    from playwright.sync_api import expect

    lead = sign_in(
        browser, portal, "lead-audio@example.org", java_script_enabled=False, accept_downloads=True
    )
    lead.click("nav >> text=Request a cluster")
    lead.fill("#f-name", "Audio Team")
    lead.fill("#f-gpu_quota", "0.3")
    lead.fill("#f-gpu_limit", "0.2")
    lead.fill("#f-purpose", "speech synthesis")
    lead.click("text=Send request")
    # The server answers with the form again: errors on the right fields, input kept.
    expect(lead.locator("#err-name")).to_contain_text("lower-case")
    expect(lead.locator("#err-gpu_limit")).to_contain_text("guarantee")
    expect(lead.locator("#f-purpose")).to_have_value("speech synthesis")
    lead.fill("#f-name", "audio")
    lead.fill("#f-gpu_quota", "0")
    lead.fill("#f-gpu_limit", "0.5")
    lead.click("text=Send request")
    expect(lead.locator("h1")).to_contain_text("audio")
    expect(lead.locator("#status")).to_contain_text("Waiting for an admin")
    team_url = lead.url

    admin = sign_in(browser, portal, "admin@example.org", admin=True, java_script_enabled=False)
    admin.goto(portal + "/admin/requests")
    card = admin.locator("article.request", has_text="audio")
    expect(card.locator("dl")).to_contain_text("0.5")
    card.locator("summary:has-text('Approve with changes')").click()
    expect(card.locator("input[name=gpu_limit]")).to_have_value("0.5")
    card.locator("input[name=gpu_limit]").fill("0.4")
    card.locator("button:has-text('Approve with these values')").click()
    expect(admin.locator(".toast")).to_contain_text("audio")

    lead.goto(team_url)
    _reload_until(lead, "h1 .pill", "ready")
    expect(lead.locator("#quota-card")).to_contain_text("GPU limit0.4")
    expect(lead.locator("#team-requests .pill")).to_have_text("applied")
    with lead.expect_download() as info:
        lead.click("text=Download kubeconfig")
    saved = tmp_path / "kubeconfig.yaml"
    info.value.save_as(saved)
    assert "current-context: audio/" in saved.read_text()

    # A quota change, approved as asked.
    lead.click("text=Change quota")
    lead.fill("#f-gpu_quota", "0.01")
    lead.click("button:has-text('Send change request')")
    expect(lead.locator(".toast")).to_contain_text("Quota change sent")
    admin.goto(portal + "/admin/requests")
    card = admin.locator("article.request", has_text="audio")
    card.locator("button:has-text('Approve as asked')").click()
    expect(admin.locator(".toast")).to_contain_text("audio")
    lead.goto(team_url)
    _reload_until(lead, "#quota-card", "GPU guarantee0.01")

    # Decommission asks for the team's name, also without the browser's checks.
    lead.goto(team_url)
    lead.evaluate("document.getElementById('f-confirm').removeAttribute('pattern')")
    lead.fill("#f-confirm", "audi")
    lead.click("button:has-text('Decommission audio')")
    expect(lead.locator(".toast-error")).to_have_text("Not decommissioned: type audio to confirm.")
    expect(lead.locator("h1 .pill")).to_have_text("ready")
    lead.fill("#f-confirm", "audio")
    lead.click("button:has-text('Decommission audio')")
    expect(lead.locator(".toast")).to_have_text("Decommissioning audio.")
    _reload_until(lead, "h1 .pill", "decommissioned")
    expect(lead.locator("#status")).to_contain_text("Everything in the cluster was deleted")

    # The audit trail, filtered with its defaults and by team.
    lead.click("nav >> text=Audit")
    lead.click("button:has-text('Filter')")
    expect(lead.locator("table")).to_contain_text("decommission")
    lead.select_option("select[name=team_id]", label="audio (#4)")
    lead.click("button:has-text('Filter')")
    rows = lead.locator("table tbody tr")
    assert rows.count() >= 5
    for i in range(rows.count()):
        expect(rows.nth(i).locator("td").nth(3)).to_have_text("audio")


def test_the_bell_counts_and_the_copy_buttons_show_only_where_they_work(
    portal: str, browser: Any
) -> None:
    """Without script: the bell's count is on the page as served, and no Copy button that
    could not copy (a click on the text selects all of it instead); with script, the
    buttons are there."""
    lead = sign_in(browser, portal, "lead-speech@example.org", java_script_enabled=False)
    lead.goto(portal + "/teams/new")
    lead.fill("#f-name", "speech")
    lead.fill("#f-gpu_quota", "0")
    lead.fill("#f-gpu_limit", "0.5")
    lead.click("text=Send request")
    lead.context.close()
    admin = sign_in(browser, portal, "admin@example.org", admin=True, java_script_enabled=False)
    admin.goto(portal + "/admin")
    # The request is news to the admins: counted on the page as served.
    assert admin.locator("#bell .badge").count() == 1
    assert int(admin.locator("#bell .badge").inner_text()) >= 1
    assert "unread" in (admin.locator("#bell").get_attribute("aria-label") or "")
    admin.goto(portal + "/teams/1")
    copies = admin.locator("button[data-copy]")
    assert copies.count() >= 2
    assert all(not b.is_visible() for b in copies.all())
    spec = admin.locator("pre[id^='pod-spec-']").first
    assert spec.evaluate("el => getComputedStyle(el).userSelect") == "all"
    admin.context.close()
    scripted = sign_in(browser, portal, "admin@example.org", admin=True)
    scripted.goto(portal + "/teams/1")
    assert all(b.is_visible() for b in scripted.locator("button[data-copy]").all())
    scripted.context.close()
