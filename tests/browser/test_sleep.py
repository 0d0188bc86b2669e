"""Sleep and wake as people see it, in headless Chromium against a portal started as
`make run` starts it (the recommender team asleep): the admin reads how many clusters
sleep and what that saves; the recommender lead wakes it and the page follows the wake
live, without a reload."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.browser.conftest import seeded_portal, wait_ready
from tests.browser.test_share import _api, _sign_in

pytestmark = pytest.mark.browser


@pytest.fixture(scope="module")
def portal(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    with seeded_portal(
        tmp_path_factory.mktemp("portal-sleep"),
        # A vCluster takes 4 s to start: long enough to see it waking.
        PORTAL_SIMULATED_STEP_SECONDS="2",
        PORTAL_WORKER_INTERVAL_SECONDS="0.3",
        PORTAL_SIMULATED_CLUSTER_GPUS="8",
    ) as url:
        yield url


def test_a_lead_wakes_the_sleeping_cluster_and_watches_it_wake(
    portal: str, browser: object
) -> None:
    from playwright.sync_api import Page, expect

    admin = _sign_in(browser, portal, admin=True)
    assert isinstance(admin, Page)
    wait_ready(admin, portal, awake=False)  # recommender's vCluster installed, then paused
    admin.goto(portal + "/admin")
    expect(admin.locator('[data-testid="asleep"]')).to_have_text("1")
    expect(admin.locator('[data-testid="sleep-saves"]')).to_contain_text(
        "1 cluster asleep saves 0.6 GiB of host memory now"
    )

    lead = _sign_in(browser, portal, admin=False, email="lead-recommender@example.org")
    assert isinstance(lead, Page)
    team = next(t for t in _api(lead, portal, "/api/v1/teams") if t["name"] == "recommender")
    assert team["sleep"]["state"] == "asleep"
    lead.goto(f"{portal}/teams/{team['id']}")
    sleep = lead.locator("#sleep")
    expect(sleep).to_contain_text("Asleep since")
    expect(sleep).to_contain_text("nothing ran in it and nobody used it for 8 hours")
    lead.click("#sleep button:has-text('Wake now')")
    expect(lead.locator(".toast").first).to_contain_text(
        "Waking recommender: it answers again in about 30 s."
    )
    expect(sleep).to_contain_text("Waking since")
    # The status poll follows the wake: awake without a reload.
    expect(sleep).to_contain_text("Awake.", timeout=30_000)
    expect(sleep).to_contain_text("it sleeps in 7 h (8 idle hours)")
    expect(lead.locator("#activity")).to_contain_text("is awake")
    admin.goto(portal + "/admin")
    expect(admin.locator('[data-testid="asleep"]')).to_have_text("0")
