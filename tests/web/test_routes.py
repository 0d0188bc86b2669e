"""The route table's order is only a question of speed: no two routers can match the same
path, so putting the routers asked most often first (app.main.ROUTERS) changes no answer."""

from __future__ import annotations

import itertools

from fastapi.routing import APIRoute

from app.main import ROUTERS
from app.web.pages import teams as team_pages


def segments(path: str) -> list[str]:
    return path.strip("/").split("/") if path.strip("/") else []


def is_param(segment: str) -> bool:
    return segment.startswith("{") and segment.endswith("}")


def takes_the_rest(segment: str) -> bool:
    return is_param(segment) and segment.endswith(":path}")


def can_both_match(one: str, other: str) -> bool:
    """Some request path matches both route paths: each segment is the same word or a
    parameter on either side (a ``:path`` parameter takes whatever is left)."""
    a, b = segments(one), segments(other)
    for x, y in itertools.zip_longest(a, b):
        if (x is not None and takes_the_rest(x)) or (y is not None and takes_the_rest(y)):
            return True
        if x is None or y is None:
            return False
        if x != y and not is_param(x) and not is_param(y):
            return False
    return True


def test_the_overlap_check_sees_an_overlap() -> None:
    assert can_both_match("/teams/new", "/teams/{team_id}")
    assert can_both_match("/static/{path:path}", "/static/css/x.css")
    assert not can_both_match("/teams/{team_id}", "/teams/{team_id}/status")
    assert not can_both_match("/admin", "/audit")
    # The one overlap the portal has is inside one router, whose order is kept.
    paths = [r.path for r in team_pages.router.routes if isinstance(r, APIRoute)]
    assert paths.index("/teams/new") < paths.index("/teams/{team_id}")


def test_no_two_routers_can_match_the_same_path() -> None:
    tables = [
        (index, route.path)
        for index, router in enumerate(ROUTERS)
        for route in router.routes
        if isinstance(route, APIRoute)
    ]
    clashes = [
        (first, second)
        for (i, first), (j, second) in itertools.combinations(tables, 2)
        if i != j and can_both_match(first, second)
    ]
    assert clashes == []


def test_every_router_is_in_the_table_once() -> None:
    assert len({id(router) for router in ROUTERS}) == len(ROUTERS)
