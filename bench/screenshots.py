"""Refresh the README's screenshots from a seeded portal in headless Chromium.

    .venv/bin/python bench/screenshots.py      (or: make screenshots)

Writes docs/screenshots/*.png: the team page (desktop and a 390 px phone), the admin's
pool overview with one team borrowing, a request under review, the team page in dark
mode, the node pools page, a team's gauges in two pools and a team's workloads card.
Prints each file with its size.
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.browser.conftest import (  # noqa: E402
    CHROMIUM,
    CHROMIUM_ARGS,
    pin_usage,
    seeded_portal,
    sign_in,
    wait_ready,
)

OUT = ROOT / "docs" / "screenshots"
DESKTOP = {"width": 1280, "height": 860}
PHONE = {"width": 390, "height": 844}


def _shoot(page: Any, name: str, *, full: bool = False) -> None:
    path = OUT / name
    page.wait_for_load_state("networkidle")
    page.evaluate("document.querySelectorAll('.toast').forEach(t => t.remove())")
    page.screenshot(path=str(path), full_page=full)
    print(f"{path.relative_to(ROOT)}  {path.stat().st_size // 1024} KiB")


def main() -> None:
    from playwright.sync_api import sync_playwright

    OUT.mkdir(parents=True, exist_ok=True)
    with (
        tempfile.TemporaryDirectory() as folder,
        seeded_portal(
            Path(folder),
            PORTAL_SIMULATED_STEP_SECONDS="0.2",
            PORTAL_WORKER_INTERVAL_SECONDS="0.3",
            PORTAL_SIMULATED_CLUSTER_GPUS="2",  # as `make run`
            PORTAL_SIMULATED_EXAMPLE_WORK="true",
        ) as portal,
        sync_playwright() as p,
    ):
        browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        admin = sign_in(browser, portal, "admin@example.org", admin=True, viewport=DESKTOP)
        wait_ready(admin, portal, seconds=60)
        for team, allocated, requested in (("nlp", "0.6", "0.8"), ("vision", "0.1", "0.1")):
            pin_usage(admin, portal, team, allocated, requested)
        admin.goto(portal + "/admin")
        _shoot(admin, "admin-overview.png")

        lead = sign_in(browser, portal, "lead-recommender@example.org", viewport=DESKTOP)
        lead.goto(portal + "/teams/3/quota")
        lead.fill("#f-gpu_quota", "0.4")
        lead.fill("#f-purpose", "Nightly retraining needs a second GPU slice")
        lead.click("button:has-text('Send change request')")
        admin.goto(portal + "/admin/requests")
        _shoot(admin, "admin-review.png")

        lead.goto(portal + "/teams/3")
        _shoot(lead, "team-page.png")
        phone = sign_in(browser, portal, "lead-nlp@example.org", viewport=PHONE)
        phone.goto(portal + "/teams/1")
        _shoot(phone, "team-page-phone.png")
        dark = sign_in(
            browser, portal, "lead-nlp@example.org", viewport=DESKTOP, color_scheme="dark"
        )
        dark.goto(portal + "/teams/1")
        _shoot(dark, "team-page-dark.png")

        admin.goto(portal + "/admin/pools")
        _shoot(admin, "node-pools.png", full=True)
        vision = sign_in(browser, portal, "lead-vision@example.org", viewport=DESKTOP)
        vision.goto(portal + "/teams/2")
        vision.wait_for_load_state("networkidle")
        path = OUT / "team-pool-gauges.png"
        vision.locator("#share").screenshot(path=str(path))
        print(f"{path.relative_to(ROOT)}  {path.stat().st_size // 1024} KiB")

        # Which world each figure is in: nlp borrowing the cluster's idle GPU.
        pin_usage(admin, portal, "nlp", "1", "1.5")
        lead_nlp = sign_in(browser, portal, "lead-nlp@example.org", viewport=DESKTOP)
        lead_nlp.goto(portal + "/teams/1")
        lead_nlp.wait_for_load_state("networkidle")
        path = OUT / "team-worlds.png"
        lead_nlp.locator("#explain").screenshot(path=str(path))
        print(f"{path.relative_to(ROOT)}  {path.stat().st_size // 1024} KiB")
        admin.goto(portal + "/admin/usage")
        _shoot(admin, "usage.png")

        # nlp's workloads as KAI sees them: its fine-tune waiting above its guarantee.
        pin_usage(admin, portal, "nlp", "0.25", "0.75")
        lead_nlp.goto(portal + "/teams/1")
        card = lead_nlp.locator("#workloads")
        card.locator('[data-why="NonPreemptibleOverQuota"]').wait_for(timeout=60_000)
        path = OUT / "workloads.png"
        card.screenshot(path=str(path))
        print(f"{path.relative_to(ROOT)}  {path.stat().st_size // 1024} KiB")
        browser.close()


if __name__ == "__main__":
    main()
