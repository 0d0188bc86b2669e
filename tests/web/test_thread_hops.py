"""Thread hops per request. A sync dependency or handler runs on the thread pool, and each
hop costs CPU and, under load, a wait for the interpreter lock: the team in the path and
its caller are read on one thread, the caller is looked up once per request, and
dependencies that do no I/O are coroutines. The pages kept open and polled (the team page
and its polls, the admins' overview) read their caller on the page's own thread: one hop.
The session's ending is not counted (a read with nothing to write ends without one;
SQLite's reads commit on a thread). An API call
that answers a model takes one more: FastAPI validates a sync handler's answer on the
thread pool."""

from __future__ import annotations

import inspect
from collections.abc import Callable
from functools import partial
from typing import Any

import anyio.to_thread
import pytest
from fastapi import FastAPI
from fastapi.dependencies.models import Dependant
from fastapi.routing import APIRoute

from app.auth import sessions
from app.core import db
from app.main import ROUTERS
from app.web import deps
from tests.web.conftest import Client, client_for


@pytest.fixture
def hops(monkeypatch: pytest.MonkeyPatch) -> list[Callable[..., Any]]:
    """Every function sent to the thread pool, but the session's ending."""
    sent: list[Callable[..., Any]] = []
    real = anyio.to_thread.run_sync

    async def counting(func: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        if not (isinstance(func, partial) and func.func is db.finish):
            sent.append(func)
        return await real(func, *args, **kwargs)

    monkeypatch.setattr(anyio.to_thread, "run_sync", counting)
    return sent


@pytest.fixture
def lookups(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Every look-up of a browser session (its user and memberships), counted where what
    was found is judged (read alone or with the page's reads)."""
    seen: list[str] = []
    real = sessions.still_valid

    def counting(session: Any, found: Any, **kwargs: Any) -> Any:
        seen.append(found[0].token_hash if found is not None else "")
        return real(session, found, **kwargs)

    monkeypatch.setattr(sessions, "still_valid", counting)
    return seen


def _get(client: Client, path: str, hops: list[Callable[..., Any]]) -> int:
    hops.clear()
    response = client.get(path)
    assert response.status_code == 200, response.text
    return len(hops)


def test_the_team_in_the_path_and_its_caller_are_read_on_one_thread(
    app: FastAPI, hops: list[Callable[..., Any]], lookups: list[str]
) -> None:
    lead = client_for(app, "lead-nlp@example.org")
    admin = client_for(app, "admin@example.org", admin=True)
    for client, path, expected in (
        (lead, "/teams/1", 1),  # the team page: its caller, the team and the page at once
        (lead, "/teams/1/status", 1),  # and its polls
        (lead, "/teams/1/share", 1),
        (admin, "/teams/1", 1),
        (lead, "/teams/1/workloads", 2),  # another team page: the team and caller, the page
        (lead, "/teams/1/quota", 2),  # a lead's page
        (lead, "/api/v1/teams/1", 3),  # and the answer's validation
        (lead, "/api/v1/teams/1/members", 3),  # paged: the window read on the event loop
    ):
        lookups.clear()
        assert _get(client, path, hops) == expected, (path, hops)
        assert len(lookups) == 1, f"{path}: the caller is looked up once, not {len(lookups)}"


def test_other_pages_hop_once_for_the_caller_and_once_for_the_handler(
    app: FastAPI, hops: list[Callable[..., Any]], lookups: list[str]
) -> None:
    admin = client_for(app, "admin@example.org", admin=True)
    for path, expected in (
        ("/admin", 1),  # the overview reads its caller on the page's own thread
        ("/admin/requests", 2),
        ("/api/v1/teams", 3),  # paged, and the answer's validation
        ("/api/v1/requests", 3),
        ("/api/v1/me", 1),  # no I/O in the handler: only the caller's lookup
    ):
        lookups.clear()
        assert _get(admin, path, hops) == expected, (path, hops)
        assert len(lookups) == 1, path


def test_handlers_without_io_take_no_thread(
    app: FastAPI, hops: list[Callable[..., Any]], lookups: list[str]
) -> None:
    """The liveness probe takes no thread; the start page only the caller's lookup."""
    admin = client_for(app, "admin@example.org", admin=True)
    lookups.clear()
    assert _get(admin, "/healthz", hops) == 0
    assert lookups == []
    hops.clear()
    start = admin.get("/", follow_redirects=False)
    assert (start.status_code, start.headers["location"]) == (303, "/admin")
    assert len(hops) == 1, hops
    assert len(lookups) == 1


def test_reading_the_caller_with_the_team_still_refuses_who_may_not_see_it(
    app: FastAPI,
) -> None:
    lead = client_for(app, "lead-nlp@example.org")
    anonymous = client_for(app)
    other = client_for(app, "lead-vision@example.org")
    member = client_for(app, "member-nlp@example.org")
    # One after another: nobody is taken for the caller before them.
    assert lead.get("/api/v1/teams/1").status_code == 200
    assert anonymous.get("/api/v1/teams/1").status_code == 401
    assert anonymous.get("/teams/1", follow_redirects=False).status_code == 303
    assert other.get("/api/v1/teams/1").status_code == 404
    assert other.get("/teams/1", follow_redirects=False).status_code == 404
    assert member.get("/api/v1/teams/1").status_code == 200
    assert member.get("/teams/1/quota", follow_redirects=False).status_code == 403


def _flat(dependant: Dependant) -> list[Callable[..., Any]]:
    """Every dependency in the order FastAPI resolves them (sub-dependencies first)."""
    order: list[Callable[..., Any]] = []
    for sub in dependant.dependencies:
        for call in [*_flat(sub), sub.call]:
            if call is not None and call not in order:
                order.append(call)
    return order


# The only dependencies that run on a thread: they read the database.
ON_A_THREAD = {deps.team_for_viewer, deps.team_for_lead}


def test_every_route_reads_its_team_before_its_caller_and_hops_only_for_io() -> None:
    for route in (route for router in ROUTERS for route in router.routes):
        assert isinstance(route, APIRoute)
        calls = _flat(route.dependant)
        name = f"{sorted(route.methods or ())} {route.path}"
        for call in calls:
            coroutine = inspect.iscoroutinefunction(call) or inspect.isasyncgenfunction(call)
            assert coroutine or call in ON_A_THREAD, f"{name}: {call} takes a thread hop"
        teams = [i for i, call in enumerate(calls) if call in ON_A_THREAD]
        if teams and deps.get_principal_optional in calls:
            assert teams[0] < calls.index(deps.get_principal_optional), (
                f"{name}: declare the team before the caller (one thread for both)"
            )
