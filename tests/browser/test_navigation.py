"""The navigation as a person uses it in Chromium: one row at 1280 px and on a phone,
its groups opened by a click (no script needed), never clipped, closed by Escape."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from tests.browser.conftest import seeded_portal, sign_in

pytestmark = pytest.mark.browser

DESKTOP = {"width": 1280, "height": 900}
PHONE = {"width": 390, "height": 844}
TOP = "nav[aria-label='Main'] > a, nav[aria-label='Main'] > details > summary"


@pytest.fixture(scope="module")
def portal(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    with seeded_portal(tmp_path_factory.mktemp("portal-nav")) as url:
        yield url


def rows(page: Any) -> list[tuple[str, int]]:
    """Each top item of the navigation with the y of its box, as drawn."""
    return [
        (str(item.inner_text()).strip(), round(item.bounding_box()["y"]))
        for item in page.locator(TOP).all()
    ]


def uncovered(page: Any, selector: str) -> bool:
    """The element is what a click at its centre reaches (on screen, not clipped)."""
    return bool(
        page.eval_on_selector(
            selector,
            """el => { const r = el.getBoundingClientRect();
                 const hit = document.elementFromPoint(r.x + r.width / 2, r.y + r.height / 2);
                 return r.width > 0 && (hit === el || el.contains(hit)); }""",
        )
    )


@pytest.mark.parametrize("viewport", [DESKTOP, PHONE], ids=["1280px", "phone"])
def test_the_admins_navigation_is_one_row_and_its_groups_open_unclipped(
    browser: Any, portal: str, viewport: dict[str, int]
) -> None:
    page = sign_in(browser, portal, "admin@example.org", admin=True, viewport=viewport)
    page.goto(portal + "/admin")
    items = rows(page)
    assert [name for name, _ in items] == [
        "Teams",
        "Request a cluster",
        "Requests",
        "Pool",
        "Plan",
        "More",
    ]
    assert len({y for _, y in items}) == 1, f"the navigation wraps: {items}"
    width = page.evaluate("document.documentElement.scrollWidth")
    assert width <= viewport["width"], f"the page is {width} px wide"
    # A group opens under its name, on screen, and its pages are one click away.
    page.locator("summary:has-text('More')").click()
    for name in ("Templates", "Deliveries", "Audit", "API tokens"):
        assert uncovered(page, f".nav-menu a:has-text('{name}')"), name
    page.keyboard.press("Escape")
    assert not page.locator(".nav-menu a:has-text('Templates')").is_visible()
    page.locator("summary:has-text('Plan')").click()
    page.locator(".nav-menu a:has-text('What if')").click()
    page.wait_for_url(portal + "/admin/what-if")
    # The group of the page shown is marked, and so is the page inside it.
    assert page.locator("summary:has-text('Plan')").get_attribute("aria-current") == "true"
    assert page.locator("summary:has-text('More')").get_attribute("aria-current") is None
    page.locator("summary:has-text('Plan')").click()
    current = page.locator(".nav-menu a[aria-current='page']")
    assert current.inner_text().strip() == "What if"
    # A click elsewhere (the page's bottom corner) closes it.
    page.mouse.click(4, viewport["height"] - 4)
    assert not current.is_visible()
    page.context.close()


def test_a_leads_navigation_has_no_groups(browser: Any, portal: str) -> None:
    page = sign_in(browser, portal, "lead-nlp@example.org", viewport=DESKTOP)
    page.goto(portal + "/teams")
    assert [name for name, _ in rows(page)] == ["Teams", "Request a cluster", "Audit", "API tokens"]
    page.context.close()
