"""KAI's decisions as a lead reads them, in headless Chromium against the portal as
`make run` starts it (the example org's work played on the simulated cluster): nlp's
non-preemptible fine-tune waits above its guarantee with KAI's reason and figures, and
its sweep reclaimed by vision is on the same card with the work it lost; the bell says
it once."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.browser.conftest import pin_usage, seeded_portal, sign_in, wait_ready

pytestmark = pytest.mark.browser


@pytest.fixture(scope="module")
def portal(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    with seeded_portal(
        tmp_path_factory.mktemp("portal-workloads"),
        PORTAL_SIMULATED_STEP_SECONDS="0.2",
        PORTAL_WORKER_INTERVAL_SECONDS="0.3",
        PORTAL_SIMULATED_CLUSTER_GPUS="2",
        PORTAL_SIMULATED_EXAMPLE_WORK="true",
        PORTAL_WORKLOADS_SECONDS="1",
    ) as url:
        yield url


def test_the_lead_reads_why_work_waits_and_who_took_the_gpus(portal: str, browser: object) -> None:
    from playwright.sync_api import expect

    admin = sign_in(browser, portal, "admin@example.org", admin=True)
    wait_ready(admin, portal, awake=False)
    # nlp's queue held at 0.25 GPU in use: the fine-tune (0.5) fits its limit of 1 but
    # not its guarantee of 0.33, and it is non-preemptible.
    pin_usage(admin, portal, "nlp", "0.25", "0.75")

    lead = sign_in(browser, portal, "lead-nlp@example.org")
    teams = lead.request.get(portal + "/api/v1/teams").json()
    nlp = next(t for t in teams if t["name"] == "nlp")
    lead.goto(f"{portal}/teams/{nlp['id']}")
    card = lead.locator("#workloads")
    row = card.locator('[data-workload="default/finetune-13b"]')
    expect(row).to_have_attribute("data-state", "waiting", timeout=30_000)
    expect(row.locator('[data-workload="gpus"]')).to_have_text("0.5")
    expect(row.locator('[data-workload="non-preemptible"]')).to_be_visible()
    why = row.locator('[data-why="NonPreemptibleOverQuota"]')
    expect(why).to_contain_text(
        "Your guarantee is 0.33 GPU and this workload is non-preemptible: it can only start "
        "within the guarantee (0 GPU of it already held by non-preemptible work; it asks 0.5)."
    )
    expect(why).to_contain_text("(KAI: NonPreemptibleOverQuota)")
    expect(row.locator('[data-why="remedy"]')).to_contain_text(
        "ask for a guarantee of at least 0.5 GPU"
    )

    evicted = card.locator('[data-evictions="list"] tr[data-eviction]')
    expect(evicted).to_have_count(1)
    expect(evicted.locator("code")).to_have_text("default/sweep-3")
    expect(evicted.locator('[data-eviction="how"]')).to_contain_text("Reclaimed by team vision")
    expect(evicted.locator('[data-eviction="why"]')).to_contain_text(
        "Your queue used 1 GPU with a guarantee of 0.33 and a fair share of 0.33"
    )
    expect(evicted).to_contain_text("1.68 GPU-h")

    # The bell told it once, with the team it went to.
    lead.goto(portal + "/notifications")
    told = lead.locator("li", has_text="KAI evicted 1 workload of nlp for team vision")
    expect(told).to_have_count(1)
    expect(told).to_contain_text("(0.67 GPU)")

    # Raised above its limit, the same fine-tune waits for KAI's other reason.
    pin_usage(admin, portal, "nlp", "0.75", "1.25")
    lead.goto(f"{portal}/teams/{nlp['id']}")
    over = lead.locator('[data-workload="default/finetune-13b"] [data-why="OverLimit"]')
    expect(over).to_contain_text(
        "Your queue's limit is 1 GPU and your running work uses 0.75: this 0.5-GPU workload "
        "would take it to 1.25.",
        timeout=30_000,
    )
