"""An error as a browser sees it: a page with the navigation of whoever is signed in and
fields by their labels; the API and anything that does not ask for HTML get JSON."""

from __future__ import annotations

import html
import re

from tests.web.conftest import Client

HTML = {"Accept": "text/html,application/xhtml+xml,*/*;q=0.8"}


def text_of(page: str) -> str:
    return html.unescape(re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", page)))


def nav_of(page: str) -> list[str]:
    found = re.search(r'<nav aria-label="Main">(.*?)</nav>', page, re.S)
    assert found, "the page has the navigation"
    return [text_of(a).strip() for a in re.findall(r"<a [^>]*>(.*?)</a>", found.group(1), re.S)]


def test_a_page_that_does_not_exist_is_a_page_with_the_navigation(
    admin: Client, lead: Client, anonymous: Client
) -> None:
    missing = admin.get("/no-such-page", headers=HTML)
    assert missing.status_code == 404
    assert missing.headers["content-type"].startswith("text/html")
    assert "There is no page at /no-such-page: it may have moved, or the link is wrong." in (
        text_of(missing.text)
    )
    assert {"Teams", "Pool", "Requests", "Audit"} <= set(nav_of(missing.text))
    # A lead's navigation is a lead's: no admin pages.
    assert "Pool" not in nav_of(lead.get("/teams/1/nothing", headers=HTML).text)
    # Signed out: the page, without anyone's navigation.
    gone = anonymous.get("/no-such-page", headers=HTML)
    assert gone.status_code == 404
    assert '<nav aria-label="Main">' not in gone.text
    # The API, and a client that does not ask for HTML, get the API's JSON.
    assert admin.get("/api/v1/no-such-thing", headers=HTML).json() == {"detail": "Not Found"}
    assert admin.get("/no-such-page").json() == {"detail": "Not Found"}


def test_a_refusal_page_keeps_the_navigation_and_names_fields_by_their_labels(
    admin: Client, lead: Client
) -> None:
    unknown = lead.get("/teams/99999", headers=HTML)
    assert unknown.status_code == 404
    assert "Teams" in nav_of(unknown.text)
    bad = lead.get("/teams/abc", headers=HTML)
    assert bad.status_code == 422
    shown = text_of(bad.text)
    assert "Some of what was sent needs a change:" in shown
    assert "The team's number in the address : write the id in digits only, e.g. 12" in shown
    assert "team_id" not in shown
    assert "Teams" in nav_of(bad.text)
