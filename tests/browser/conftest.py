"""Headless Chromium and a portal process for the browser tests."""

from __future__ import annotations

import contextlib
import shutil
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from tests.servers import cache_dir, free_port, portal_process

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-dev-shm-usage",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]


@contextlib.contextmanager
def seeded_portal(folder: Path, **env: str) -> Iterator[str]:
    """The portal as `make run` starts it: its own process, SQLite, seeded, worker on."""
    port = free_port()
    settings = {
        "PORTAL_DEVELOPMENT": "true",
        "PORTAL_DATABASE_URL": f"sqlite:///{folder / 'portal.db'}",
        # The weekly digest lands on its weekday: never today, so what the walks count in
        # the bell does not depend on the day the tests run.
        "PORTAL_DIGEST_WEEKDAY": str((datetime.now(UTC).weekday() + 3) % 7),
        **env,
    }
    with portal_process(folder, port, settings):
        yield f"http://127.0.0.1:{port}"


@pytest.fixture(scope="module")
def browser() -> Iterator[object]:
    if not Path(CHROMIUM).exists():
        pytest.fail("Chromium is not installed: run `make setup-test`")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        instance = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        yield instance
        instance.close()


AXE_VERSION = "4.14.1"  # the version scripts/fetch-assets.sh installs


def axe_source() -> str:
    """axe-core from npm (scripts/fetch-assets.sh puts it in the cache, never in git)."""
    path = cache_dir() / "npm" / f"axe-core-{AXE_VERSION}" / "node_modules/axe-core/axe.min.js"
    if not path.exists():
        pytest.fail(f"axe-core is not in the cache ({path.name}): run `make setup`")
    return path.read_text()


def axe_violations(page: Any, *, impacts: tuple[str, ...] = ("critical", "serious")) -> list[str]:
    """Run axe-core in the page; the violations of the given impacts, one line per node.

    Evaluated through the browser's debugging protocol, so the page's CSP (which refuses
    any script the portal does not serve) does not apply to the checker itself.
    """
    if not page.evaluate("typeof window.axe !== 'undefined'"):
        page.evaluate(axe_source())
    found = page.evaluate(
        """async () => {
          const r = await window.axe.run(document, {resultTypes: ['violations']});
          return r.violations.flatMap(v => v.nodes.map(n =>
            [v.impact, v.id + ' ' + n.target.join(' ') + ': ' + (n.failureSummary || '')]));
        }"""
    )
    return [text for impact, text in found if impact in impacts]


def sign_in(browser: Any, portal: str, email: str, *, admin: bool = False, **context: Any) -> Any:
    """A new browser context signed in through the development sign-in form."""
    page = browser.new_context(**context).new_page()
    page.set_default_timeout(15_000)
    page.goto(portal + "/login")
    page.fill("#f-email", email)
    page.fill("#f-name", email.split("@")[0].replace("-", " ").title())
    if admin:
        page.check("input[type=radio][name=role][value=admin]")
    page.click("button:has-text('Sign in')")
    page.wait_for_url(lambda url: "/login" not in url)
    return page


def wait_ready(page: Any, portal: str, seconds: float = 30, *, awake: bool = True) -> None:
    """Until the worker has made every team ready (asked through the page's session);
    with ``awake``, every team's cluster awake too: the demo's recommender team sleeps
    (`make run` shows one asleep), and the design source's case, every team busy on the
    one GPU, needs it woken (by the API, as its page's button does)."""
    deadline = time.monotonic() + seconds

    def teams() -> list[dict[str, Any]]:
        found: list[dict[str, Any]] = page.request.get(portal + "/api/v1/teams").json()
        return found

    while any(t["status"] != "ready" or t["sleep"]["state"] == "falling_asleep" for t in teams()):
        assert time.monotonic() < deadline, "the teams never became ready"
        time.sleep(0.3)
    if not awake:
        return
    token = page.locator('meta[name="csrf-token"]').get_attribute("content")
    woken = set()
    for team in teams():
        if team["sleep"]["state"] == "asleep":
            answer = page.request.post(
                f"{portal}/api/v1/teams/{team['id']}/wake", headers={"X-CSRF-Token": token}
            )
            if answer.ok:  # (a lead may wake only their own team's)
                woken.add(team["id"])
    while any(t["sleep"]["state"] != "awake" for t in teams() if t["id"] in woken):
        assert time.monotonic() < deadline, "the teams never woke"
        time.sleep(0.3)


def pin_usage(admin: Any, portal: str, team: str, allocated: str, requested: str) -> None:
    """Hold a team's usage with the pool page's simulated-backend form, as an admin."""
    admin.goto(portal + "/admin")
    admin.click("summary:has-text('Pin a team')")
    admin.fill("#u-team", team)
    admin.fill("#u-allocated", allocated)
    admin.fill("#u-requested", requested)
    admin.click("button:has-text('Pin')")
    admin.locator(".toast", has_text=f"{team} now shows").wait_for()
