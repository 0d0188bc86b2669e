"""Every list in the API is paged the same way: `limit` (default 100, at most 1000) and
`offset` in a stable order, the whole list's length in `X-Total-Count` and the next
window in a `Link` header; the audit trail pages by `before_id`. The OpenAPI document
says so for every list."""

from __future__ import annotations

import re

import pytest

from tests.web.conftest import Client

LISTS = (
    "/api/v1/teams",
    "/api/v1/requests",
    "/api/v1/teams/1/members",
    "/api/v1/teams/1/kubeconfigs",
    "/api/v1/teams/1/history",
    "/api/v1/tokens",
    "/api/v1/showback",
    "/api/v1/templates",
    "/api/v1/pools",
    "/api/v1/grants",
    "/api/v1/teams/1/grants",
    "/api/v1/budgets",
    "/api/v1/teams/1/budgets",
    "/api/v1/teams/1/workloads",
    "/api/v1/teams/1/workload-events",
    "/api/v1/evictions",
)


def _next(response: object) -> str | None:
    link = response.headers.get("link")  # type: ignore[attr-defined]
    if link is None:
        return None
    found = re.fullmatch(r'<(http://testserver)?([^>]+)>; rel="next"', link)
    assert found is not None, link
    return found.group(2)


def test_teams_come_in_windows_that_add_up_to_the_whole_list(admin: Client) -> None:
    whole = [t["name"] for t in admin.get("/api/v1/teams").json()]
    assert whole == ["nlp", "recommender", "vision"]
    first = admin.get("/api/v1/teams?limit=2")
    assert first.headers["x-total-count"] == "3"
    assert [t["name"] for t in first.json()] == ["nlp", "recommender"]
    following = _next(first)
    assert following is not None
    assert "offset=2" in following
    assert "limit=2" in following
    second = admin.get(following)
    assert [t["name"] for t in second.json()] == ["vision"]
    assert _next(second) is None, "the last window links nowhere"
    assert admin.get("/api/v1/teams?offset=3").json() == []


def test_a_lead_pages_through_their_own_teams_only(lead: Client) -> None:
    mine = lead.get("/api/v1/teams?limit=1")
    assert mine.headers["x-total-count"] == "1"
    assert [t["name"] for t in mine.json()] == ["nlp"]
    assert _next(mine) is None


@pytest.mark.parametrize("path", LISTS)
def test_every_list_takes_a_window_and_says_how_long_it_is(admin: Client, path: str) -> None:
    whole = admin.get(path)
    assert whole.status_code == 200, whole.text
    total = int(whole.headers["x-total-count"])
    assert total == len(whole.json()), "under the default limit: all of it"
    one = admin.get(path, params={"limit": 1})
    assert len(one.json()) == min(1, total)
    assert (_next(one) is not None) == (total > 1)
    for bad in ("0", "1001", "x"):
        refused = admin.get(path, params={"limit": bad})
        assert refused.status_code == 422, (path, bad)
        assert "limit" in refused.text
    assert admin.get(path, params={"offset": "-1"}).status_code == 422


def test_requests_page_oldest_first_past_the_old_silent_cap(admin: Client) -> None:
    first = admin.get("/api/v1/requests?limit=2")
    assert first.headers["x-total-count"] == "3"
    following = _next(first)
    assert following is not None
    ids = [r["id"] for r in first.json()] + [r["id"] for r in admin.get(following).json()]
    assert ids == sorted(ids)
    assert len(set(ids)) == 3


def test_the_audit_trail_pages_by_before_id(admin: Client) -> None:
    first = admin.get("/api/v1/audit?limit=2")
    events = first.json()
    assert len(events) == 2
    following = _next(first)
    assert following is not None
    assert f"before_id={events[-1]['id']}" in following
    older = admin.get(following).json()
    assert older
    assert all(e["id"] < events[-1]["id"] for e in older)
    everything = admin.get("/api/v1/audit?limit=1000")
    assert _next(everything) is None, "fewer than asked: nothing follows"


def test_the_openapi_document_says_how_every_list_is_paged(admin: Client) -> None:
    spec = admin.get("/openapi.json").json()
    lists = [
        (path, op)
        for path, item in spec["paths"].items()
        for method, op in item.items()
        if method == "get"
        and op["responses"]["200"]["content"]["application/json"]["schema"].get("type") == "array"
    ]
    assert len(lists) == len(LISTS) + 1, [p for p, _ in lists]
    for path, op in lists:
        names = {p["name"] for p in op.get("parameters", [])}
        assert "limit" in names, path
        assert names & {"offset", "before_id"}, path
        assert "Link" in op["responses"]["200"].get("headers", {}), path
        limit = next(p for p in op["parameters"] if p["name"] == "limit")
        assert limit["schema"]["maximum"] == 1000, path
        assert limit["schema"]["default"] == 100, path


def test_the_next_link_never_takes_the_callers_host(admin: Client) -> None:
    """A Host header a caller sends (or a poisoned proxy cache) must not end up as the
    next page's address: the link is relative, or on PORTAL_PUBLIC_URL when set."""
    from app.runtime import portal_of

    answer = admin.get("/api/v1/teams?limit=1", headers={"Host": "evil.example"})
    assert answer.headers["link"] == '</api/v1/teams?limit=1&offset=1>; rel="next"'
    settings = portal_of(admin.app).settings  # type: ignore[arg-type]
    object.__setattr__(settings, "public_url", "https://gpu.example.org")
    try:
        answer = admin.get("/api/v1/teams?limit=1", headers={"Host": "evil.example"})
    finally:
        object.__setattr__(settings, "public_url", None)
    assert answer.headers["link"] == (
        '<https://gpu.example.org/api/v1/teams?limit=1&offset=1>; rel="next"'
    )
