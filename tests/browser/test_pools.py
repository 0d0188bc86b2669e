"""Node pools as people see them, in headless Chromium against a portal started as
`make run` starts it: the admin reads each pool's budget, what is guaranteed there and
what the cluster's nodes hold; the vision lead reads a gauge for the L40S pool whose
figures are the API's, and a pod spec for that pool."""

from __future__ import annotations

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
