"""The main flow in a real headless Chromium against a real portal process."""

from __future__ import annotations

import re
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.browser.conftest import seeded_portal, wait_ready

pytestmark = pytest.mark.browser


@pytest.fixture(scope="module")
def portal(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    with seeded_portal(
        tmp_path_factory.mktemp("portal"),
        PORTAL_SIMULATED_STEP_SECONDS="0.4",
        PORTAL_WORKER_INTERVAL_SECONDS="0.5",
        # Long enough that the page and the API below read the same cluster sample.
        PORTAL_USAGE_CACHE_SECONDS="60",
    ) as url:
        yield url


def test_request_approve_ready_download(portal: str, browser: object, tmp_path: Path) -> None:
    from playwright.sync_api import Browser, expect

    assert isinstance(browser, Browser)
    lead = browser.new_context(accept_downloads=True).new_page()
    lead.set_default_timeout(15_000)
    errors: list[str] = []
    lead.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)

    # A new team lead signs in and asks for a cluster; inline validation helps on the way.
    lead.goto(portal + "/login")
    lead.fill("#f-email", "lead-speech@example.org")
    lead.fill("#f-name", "Speech lead")
    lead.click("button:has-text('Sign in')")
    lead.click("nav >> text=Request a cluster")
    lead.fill("#f-name", "Speech_Team")
    expect(lead.locator("#err-name")).to_contain_text("use lower-case letters only")
    lead.fill("#f-name", "speech")
    lead.fill("#f-gpu_quota", "0.01")
    lead.fill("#f-gpu_limit", "0.5")
    expect(lead.locator("#err-name")).to_have_text("")
    expect(lead.locator("#feedback")).to_contain_text("Fits")
    lead.fill("#f-purpose", "speech recognition")
    lead.click("text=Send request")
    expect(lead.locator("h1")).to_contain_text("speech")
    expect(lead.locator("#status")).to_contain_text("Waiting for an admin")
    team_url = lead.url

    # An admin approves it.
    admin = browser.new_context().new_page()
    admin.goto(portal + "/login")
    admin.click("text=Platform admin")
    expect(admin.locator("h1")).to_contain_text("Pool")
    admin.click("nav >> text=Requests")
    card = admin.locator("article.request", has_text="speech")
    expect(card).to_contain_text("Fits")
    card.locator("text=Approve as asked").click()
    expect(admin.locator(".toast")).to_contain_text("Approved speech as asked.")

    # The lead's page follows provisioning by itself until the cluster is ready.
    lead.goto(team_url)
    expect(lead.locator("h1 .pill")).to_have_text("ready", timeout=30_000)
    expect(lead.locator(".step-done")).to_have_count(5)
    # Each step by name, done, with when; the timeline's newest item is the cluster ready.
    expect(lead.locator("#status .steps li b")).to_have_text(
        ["KAI queue", "Host namespace", "vCluster", "Queue pinning policy", "Kubeconfig"]
    )
    expect(lead.locator("#status .steps li .muted").first).to_contain_text(
        re.compile(r"^done · (just now|\d+ (s|min) ago)")
    )
    newest = lead.locator("#activity li").first
    expect(newest).to_have_class("tl-team")
    expect(newest).to_contain_text("speech is ready: queue ")
    approved = lead.locator("#activity li.tl-request", has_text="approved request #")
    expect(approved).to_have_count(1)
    expect(approved).to_contain_text("for speech")
    with lead.expect_download() as download_info:
        lead.click("text=Download kubeconfig")
    download = download_info.value
    assert download.suggested_filename == "kubeconfig-speech.yaml"
    saved = tmp_path / "kubeconfig.yaml"
    download.save_as(saved)
    text = saved.read_text()
    assert "current-context: speech/" in text
    assert "SIMULATED" in text
    # The access card lists the lead as holding one, expiring after the default 8 h.
    expect(lead.locator("#kc-ttl")).to_have_value("8h")
    lead.reload()
    expect(lead.locator("#access .holder-row")).to_contain_text("cluster-admin · expires")
    # The bell counts what the lead was told: the approval and the ready cluster.
    expect(lead.locator("#bell .badge")).to_have_text("2")
    lead.click("#bell")
    items = lead.locator("li.notification.unread")
    expect(items).to_have_count(2)
    expect(items.nth(0)).to_contain_text("speech is ready: download your kubeconfig")
    expect(items.nth(1)).to_contain_text("The cluster for speech was approved as asked")
    lead.click("button:has-text('Mark all read')")
    expect(lead.locator(".toast")).to_contain_text("Marked 2 notifications read.")
    expect(lead.locator("#bell .badge")).to_have_count(0)
    lead.screenshot(path=str(tmp_path / "team.png"), full_page=True)
    assert errors == [], errors


def test_gauges_show_the_backends_numbers(portal: str, browser: object) -> None:
    import httpx
    from playwright.sync_api import Browser, expect

    assert isinstance(browser, Browser)
    page = browser.new_page()
    page.set_default_timeout(15_000)
    page.goto(portal + "/login")
    page.click("text=Platform admin")
    expect(page.locator("h1")).to_contain_text("Pool")
    wait_ready(page, portal)
    page.reload()
    # The same numbers through the API, with the same session.
    cookies = {c["name"]: c["value"] for c in page.context.cookies()}
    # Ready teams have a reading once the usage cache (60 s here) reads the cluster again.
    deadline = time.monotonic() + 75
    while True:
        teams = httpx.get(portal + "/api/v1/teams", cookies=cookies, timeout=10).json()
        ready = [
            t for t in teams if t["status"] == "ready" and t["gpu_share"]["allocated"] is not None
        ]
        if ready or time.monotonic() > deadline:
            break
        time.sleep(0.5)
    assert ready, teams
    page.reload()
    for team in ready:
        # The row's gauge of the default pool (a pool's gauge sits under it in its own box).
        row = page.locator("tr", has=page.locator(f'a[href="/teams/{team["id"]}"]')).locator(
            "td.gauge-col > figure.gauge"
        )
        share = team["gpu_share"]
        expect(row.locator('[data-gauge="guaranteed"]')).to_have_text(_num(share["guaranteed"]))
        expect(row.locator('[data-gauge="allocated"]')).to_have_text(_num(share["allocated"]))
        expect(row.locator('[data-gauge="limit"]')).to_have_text(_num(share["limit"]))
    team = ready[0]
    page.goto(f"{portal}/teams/{team['id']}")
    share = team["gpu_share"]
    expect(
        page.locator('#share > figure.gauge:first-of-type [data-gauge="allocated"]')
    ).to_have_text(_num(share["allocated"]))
    expect(
        page.locator('#share > figure.gauge:first-of-type [data-gauge="requested"]')
    ).to_have_text(_num(share["requested"]))
    expect(page.locator('#share > figure.gauge:first-of-type [data-gauge="fair"]')).to_have_text(
        _num(share["fair_now"])
    )
    expect(page.locator("#share svg[role=img]").first).to_have_attribute(
        "aria-label",
        re.compile(f"in use {re.escape(_num(share['allocated']))},"),
    )


def _num(value: float) -> str:
    text = f"{value:.2f}"
    return text.rstrip("0").rstrip(".")
