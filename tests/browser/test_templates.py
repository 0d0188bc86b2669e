"""A cluster template in a real browser: a lead chooses one and its parameter, the admin
reads both on the review card, the team page shows them installed."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest

from tests.browser.conftest import axe_violations, seeded_portal

pytestmark = pytest.mark.browser


@pytest.fixture(scope="module")
def portal(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    with seeded_portal(
        tmp_path_factory.mktemp("portal"),
        PORTAL_SIMULATED_STEP_SECONDS="0.3",
        PORTAL_WORKER_INTERVAL_SECONDS="0.5",
    ) as url:
        yield url


def test_a_lead_requests_a_kind_of_cluster_with_a_parameter(portal: str, browser: object) -> None:
    from playwright.sync_api import Browser, expect

    assert isinstance(browser, Browser)
    lead = browser.new_context().new_page()
    lead.set_default_timeout(15_000)
    lead.goto(portal + "/login")
    lead.fill("#f-email", "lead-asr@example.org")
    lead.fill("#f-name", "ASR lead")
    lead.click("button:has-text('Sign in')")
    lead.click("nav >> text=Request a cluster")
    choice = lead.locator("fieldset.template-choice")
    # The default kind is preselected; another kind's parameters show once it is chosen.
    expect(choice.locator("input[data-template-name=bare]")).to_be_checked()
    version = choice.locator("select[name$='-version']")
    expect(version).to_be_hidden()
    # A guarantee typed first is kept when a kind suggesting another is chosen, and said.
    lead.fill("#f-gpu_quota", "0.2")
    choice.locator("label", has_text="kubeflow-training").click()
    expect(version).to_be_visible()
    expect(version).to_have_value("v1.8.1")
    expect(lead.locator("#f-gpu_quota")).to_have_value("0.2")
    expect(lead.locator("#template-suggests")).to_have_text(
        "Kept what you typed: GPU guarantee 0.2 (it suggests 0.33)."
    )
    # The quota it suggests fills the fields not typed in yet.
    expect(lead.locator("#f-gpu_limit")).to_have_value("1")
    # And what it suggests in the L40S pool, its fields unfolded.
    expect(lead.locator('[name="pools.l40s.gpu_quota"]')).to_be_visible()
    expect(lead.locator('[name="pools.l40s.gpu_quota"]')).to_have_value("0.25")
    version.select_option("v1.7.0")
    assert axe_violations(lead) == []
    lead.fill("#f-name", "asr")
    lead.fill("#f-gpu_quota", "0")
    lead.fill("#f-gpu_limit", "0.5")
    lead.click("text=Send request")
    expect(lead.locator("h1")).to_contain_text("asr")
    asked = lead.locator('[data-quota="template"]')
    expect(asked).to_contain_text("kubeflow-training")
    expect(asked.locator("[data-template-version]")).to_have_text("v1")
    expect(asked.locator('[data-param="version"]')).to_have_text("version=v1.7.0")
    team_url = lead.url

    admin = browser.new_context().new_page()
    admin.set_default_timeout(15_000)
    admin.goto(portal + "/login")
    admin.click("text=Platform admin")
    admin.click("nav >> text=Requests")
    card = admin.locator("article.request", has_text="asr")
    shown = card.locator('[data-asked="template"]')
    expect(shown).to_contain_text("kubeflow-training")
    expect(shown.locator(".tag-version")).to_have_text("v1")
    expect(shown.locator('[data-param="version"]')).to_have_text("version=v1.7.0")
    expect(card.locator('[data-asked="gpu_limit"]')).to_contain_text("0.5")
    card.locator("text=Approve as asked").click()
    expect(admin.locator(".toast")).to_contain_text("Approved asr as asked.")

    lead.goto(team_url)
    expect(lead.locator("h1 .pill")).to_have_text("ready", timeout=30_000)
    installed = lead.locator('[data-quota="template"]')
    # Checked inside by a pass a few seconds after ready; until then it says so.
    deadline = time.monotonic() + 40
    while (
        time.monotonic() < deadline
        and not installed.locator("[data-template-state=installed]").count()
    ):
        expect(installed.locator("[data-template-state]")).to_contain_text("installed")
        time.sleep(1)
        lead.reload()
    expect(installed.locator("[data-template-state=installed]")).to_contain_text(
        "installed, all in place (checked"
    )
    expect(installed).to_contain_text("CustomResourceDefinition pytorchjobs.kubeflow.org")
    expect(installed.locator('[data-param="version"]')).to_have_text("version=v1.7.0")


def test_an_admin_reads_what_a_new_version_changes_in_both_themes(
    portal: str, browser: object
) -> None:
    """The template page's versions, readable in light and dark: the admin publishes a
    version with one more namespace and reads it as the added lines of the diff."""
    from playwright.sync_api import Browser, expect

    from tests.browser.conftest import sign_in

    assert isinstance(browser, Browser)
    admin = sign_in(browser, portal, "admin@example.org", admin=True)
    admin.goto(portal + "/admin/templates/2")  # crd-playground
    spec = admin.locator("textarea[name=spec]")
    text = spec.input_value()
    scratch = "  ---\n  apiVersion: v1\n  kind: Namespace\n  metadata:\n    name: scratch\n"
    spec.fill(text.replace("repair_drift: true", scratch + "repair_drift: true"))
    admin.fill("input[name=note]", "a scratch namespace")
    admin.click("button:has-text('Publish')")
    changes = admin.locator("[data-version-changes='2']")
    expect(changes.locator("summary")).to_have_text("What changed from v1")
    added = changes.locator(".diff-add")
    expect(added.last).to_contain_text("name: scratch")
    expect(changes.locator(".diff-del")).to_have_count(0)
    admin.locator("[data-version='2'] summary:has-text('Spec')").click()
    for scheme in ("light", "dark"):
        admin.emulate_media(color_scheme=scheme)
        assert axe_violations(admin) == [], scheme
        colour = added.last.evaluate("e => getComputedStyle(e).color")
        background = added.last.evaluate("e => getComputedStyle(e).backgroundColor")
        assert colour != background
