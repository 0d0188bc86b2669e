"""Who may do what: a matrix over the app's own route table, and CSRF on every unsafe route.

A route added without a row here fails `test_every_route_has_a_rule`. The roles: nobody
signed in, a member of team nlp, a lead of nlp, the lead of another team, an admin.
"""

from __future__ import annotations

from typing import Any

import httpx
import pytest
from fastapi import FastAPI
from fastapi.routing import APIRoute

from app.adapters.simulated import SimulatedBackend
from app.main import ROUTERS
from app.runtime import portal_of
from tests.web.conftest import Client, client_for

ROLES = ("anonymous", "member", "lead", "other", "admin")
QUOTA = {"gpu_quota": "0.2", "gpu_limit": "1"}

# "METHOD path": (body, {role: expected status}); team 1 is nlp (lead's), request 1 is nlp's.
RULES: dict[str, tuple[Any, tuple[int, int, int, int, int]]] = {
    "GET /": (None, (303, 303, 303, 303, 303)),
    "GET /login": (None, (200, 200, 200, 200, 200)),
    "GET /docs": (None, (200, 200, 200, 200, 200)),
    "GET /redoc": (None, (200, 200, 200, 200, 200)),
    # Operations: probes open; metrics open only in development (these tests run there).
    "GET /healthz": (None, (200, 200, 200, 200, 200)),
    "GET /readyz": (None, (200, 200, 200, 200, 200)),
    "GET /metrics": (None, (200, 200, 200, 200, 200)),
    "POST /login/dev": ({}, (422, 422, 422, 422, 422)),
    "POST /logout": ({}, (303, 303, 303, 303, 303)),
    "GET /auth/start": (None, (403, 403, 403, 403, 403)),
    "GET /auth/callback": (None, (403, 403, 403, 403, 403)),
    "GET /tokens": (None, (303, 200, 200, 200, 200)),
    "POST /tokens": ({}, (303, 422, 422, 422, 422)),
    "POST /tokens/{token_id}/revoke": ({}, (303, 404, 303, 404, 404)),
    "GET /notifications": (None, (303, 200, 200, 200, 200)),
    "GET /notifications/bell": (None, (303, 200, 200, 200, 200)),
    "POST /notifications/read": ({}, (303, 303, 303, 303, 303)),
    "GET /api/v1/notifications": (None, (401, 200, 200, 200, 200)),
    "POST /api/v1/notifications/read": ({}, (401, 200, 200, 200, 200)),
    "GET /teams": (None, (303, 200, 200, 200, 200)),
    "GET /teams/new": (None, (303, 200, 200, 200, 200)),
    "POST /teams/new/validate": ({}, (303, 200, 200, 200, 200)),
    "POST /teams": ({}, (303, 422, 422, 422, 422)),
    "GET /teams/{team_id}": (None, (303, 200, 200, 404, 200)),
    "GET /teams/{team_id}/status": (None, (303, 200, 200, 404, 200)),
    "POST /teams/{team_id}/kubeconfig": ({}, (303, 200, 200, 404, 200)),
    "POST /teams/{team_id}/kubeconfig/revoke": ({}, (303, 303, 303, 404, 303)),
    "GET /teams/{team_id}/share": (None, (303, 200, 200, 404, 200)),
    "GET /teams/{team_id}/workloads": (None, (303, 200, 200, 404, 200)),
    "GET /teams/{team_id}/why": (None, (303, 200, 200, 404, 200)),
    "GET /teams/{team_id}/usage": (None, (303, 200, 200, 404, 200)),
    # An empty form: the refusal is a flash on the team page.
    "POST /teams/{team_id}/grants": ({}, (303, 403, 303, 404, 303)),
    "POST /teams/{team_id}/grants/{grant_id}/end": ({}, (303, 403, 404, 404, 404)),
    # No grant 999: the admin is told so on the Requests page.
    "POST /admin/grants/{grant_id}/approve": ({}, (303, 403, 403, 403, 303)),
    "POST /admin/grants/{grant_id}/reject": ({"reason": "no"}, (303, 403, 403, 403, 303)),
    "GET /api/v1/teams/{team_id}/grants": (None, (401, 200, 200, 404, 200)),
    "POST /api/v1/teams/{team_id}/grants": (
        {"gpus": "0", "ends_at": "", "reason": ""},
        (401, 403, 422, 404, 422),
    ),
    "GET /api/v1/grants": (None, (401, 403, 403, 403, 200)),
    "POST /teams/{team_id}/budget": ({"gpu_hours": "0"}, (303, 403, 403, 404, 303)),
    "GET /api/v1/teams/{team_id}/budgets": (None, (401, 200, 200, 404, 200)),
    "PUT /api/v1/teams/{team_id}/budget": ({"gpu_hours": "0"}, (401, 403, 403, 404, 422)),
    "GET /api/v1/budgets": (None, (401, 403, 403, 403, 200)),
    "GET /api/v1/teams/{team_id}/workloads": (None, (401, 200, 200, 404, 200)),
    "GET /api/v1/teams/{team_id}/workload-events": (None, (401, 200, 200, 404, 200)),
    "GET /api/v1/evictions": (None, (401, 403, 403, 403, 200)),
    "POST /api/v1/grants/{grant_id}/approve": (None, (401, 403, 403, 403, 404)),
    "POST /api/v1/grants/{grant_id}/reject": ({"reason": "no"}, (401, 403, 403, 403, 404)),
    "POST /api/v1/grants/{grant_id}/end": (None, (401, 404, 404, 404, 404)),
    "GET /teams/{team_id}/quota": (None, (303, 403, 200, 404, 200)),
    "POST /teams/{team_id}/quota": ({}, (303, 403, 422, 404, 422)),
    "POST /teams/{team_id}/quota/validate": ({}, (303, 403, 200, 404, 200)),
    # No suggestion for nlp here: told so on the team page (303), not an error page.
    "POST /teams/{team_id}/rightsizing": ({}, (303, 403, 303, 404, 303)),
    # nlp has no template: told so on its page (303).
    "POST /teams/{team_id}/template/accept": ({}, (303, 403, 303, 404, 303)),
    "POST /teams/{team_id}/decommission": ({"confirm": "nlp"}, (303, 403, 303, 404, 303)),
    "POST /teams/{team_id}/retry": ({}, (303, 403, 403, 404, 409)),
    # Sleep: anyone of the team wakes (nlp is awake: told so, 303); leads put to sleep
    # and keep awake; the org's policy is the admins'.
    "POST /teams/{team_id}/wake": ({}, (303, 303, 303, 404, 303)),
    "POST /teams/{team_id}/sleep": ({}, (303, 403, 303, 404, 303)),
    "POST /teams/{team_id}/keep-awake": ({"hours": "8"}, (303, 403, 303, 404, 303)),
    "POST /teams/{team_id}/sleep-hours": ({"sleep_after_hours": ""}, (303, 403, 303, 404, 303)),
    "POST /admin/pools/sleep-policy": ({"sleep_max_hours": "24"}, (303, 403, 403, 403, 303)),
    "POST /teams/{team_id}/members": ({"email": "x@example.org"}, (303, 403, 303, 404, 303)),
    "POST /teams/{team_id}/members/{user_id}/remove": ({}, (303, 403, 303, 404, 303)),
    "GET /admin": (None, (303, 403, 403, 403, 200)),
    "POST /admin/pool": ({}, (303, 403, 403, 403, 303)),
    "POST /admin/repairs/acknowledge": ({"upto": "1"}, (303, 403, 403, 403, 303)),
    "POST /admin/rollout/resume": ({}, (303, 403, 403, 403, 303)),
    "POST /admin/rollout/pause": ({}, (303, 403, 403, 403, 303)),
    "POST /admin/pool/impact": ({"gpus": "2"}, (303, 403, 403, 403, 200)),
    "GET /admin/what-if": (None, (303, 403, 403, 403, 200)),
    "GET /admin/rightsizing": (None, (303, 403, 403, 403, 200)),
    "GET /admin/pools": (None, (303, 403, 403, 403, 200)),
    "POST /admin/pools": ({}, (303, 403, 403, 403, 422)),
    "POST /admin/pools/{pool_id}": ({"price": "1"}, (303, 403, 403, 403, 303)),
    "POST /admin/pools/{pool_id}/remove": ({}, (303, 403, 403, 403, 303)),
    "GET /admin/templates": (None, (303, 403, 403, 403, 200)),
    "POST /admin/templates": ({}, (303, 403, 403, 403, 422)),
    "POST /admin/templates/required": ({}, (303, 403, 403, 403, 303)),
    "GET /admin/templates/{template_id}": (None, (303, 403, 403, 403, 404)),
    "POST /admin/templates/{template_id}/versions": ({}, (303, 403, 403, 403, 404)),
    "POST /admin/templates/{template_id}/settings": ({}, (303, 403, 403, 403, 404)),
    "GET /admin/deliveries": (None, (303, 403, 403, 403, 200)),
    "POST /admin/deliveries/{delivery_id}/retry": ({}, (303, 403, 403, 403, 404)),
    "GET /admin/webhooks": (None, (303, 403, 403, 403, 200)),
    "POST /admin/webhooks": ({"kind": "slack", "url": "ftp://x"}, (303, 403, 403, 403, 422)),
    "POST /admin/webhooks/{kind}/delete": ({}, (303, 403, 403, 403, 404)),
    "POST /admin/webhooks/{kind}/test": ({}, (303, 403, 403, 403, 404)),
    "GET /teams/{team_id}/webhooks": (None, (303, 403, 200, 404, 200)),
    "POST /teams/{team_id}/webhooks": ({"kind": "json", "url": "nope"}, (303, 403, 422, 404, 422)),
    "POST /teams/{team_id}/webhooks/{kind}/delete": ({}, (303, 403, 404, 404, 404)),
    "POST /teams/{team_id}/webhooks/{kind}/test": ({}, (303, 403, 404, 404, 404)),
    "GET /notifications/settings": (None, (303, 200, 200, 200, 200)),
    "POST /notifications/settings": ({}, (303, 303, 303, 303, 303)),
    "POST /admin/what-if": ({"pool": "2"}, (303, 403, 403, 403, 200)),
    "POST /admin/what-if/requests": ({"q_1": "0.2"}, (303, 403, 403, 403, 303)),
    "GET /admin/requests": (None, (303, 403, 403, 403, 200)),
    "GET /admin/showback.csv": (None, (303, 403, 403, 403, 200)),
    "GET /admin/usage": (None, (303, 403, 403, 403, 200)),
    "POST /admin/requests/{request_id}/approve": ({}, (303, 403, 403, 403, 303)),
    "POST /admin/requests/{request_id}/reject": ({}, (303, 403, 403, 403, 303)),
    # Request 1 is decided: no preview of a decision already made.
    "POST /admin/requests/{request_id}/preview": ({}, (303, 403, 403, 403, 409)),
    "GET /admin/requests/{request_id}/why": (None, (303, 403, 403, 403, 409)),
    "POST /admin/simulate/failure": ({}, (303, 403, 403, 403, 303)),
    "POST /admin/simulate/usage": (
        {"team": "nlp", "allocated": "0.5", "requested": "1"},
        (303, 403, 403, 403, 303),
    ),
    "GET /audit": (None, (303, 200, 200, 200, 200)),
    "GET /api/v1/me": (None, (401, 200, 200, 200, 200)),
    "GET /api/v1/pool": (None, (401, 200, 200, 200, 200)),
    "GET /api/v1/sleep-policy": (None, (401, 200, 200, 200, 200)),
    "PUT /api/v1/sleep-policy": ({"sleep_after_hours": 8}, (401, 403, 403, 403, 200)),
    "POST /api/v1/teams/{team_id}/wake": (None, (401, 200, 200, 404, 200)),
    "POST /api/v1/teams/{team_id}/sleep": (None, (401, 403, 200, 404, 200)),
    "PUT /api/v1/teams/{team_id}/sleep": ({}, (401, 403, 200, 404, 200)),
    "GET /api/v1/pools": (None, (401, 200, 200, 200, 200)),
    "POST /api/v1/pools": ({"label_value": "a100", "gpus": "1"}, (401, 403, 403, 403, 201)),
    "PATCH /api/v1/pools/{pool_id}": ({"price": "1"}, (401, 403, 403, 403, 200)),
    "DELETE /api/v1/pools/{pool_id}": (None, (401, 403, 403, 403, 204)),
    "PUT /api/v1/pool": ({"gpus": "2"}, (401, 403, 403, 403, 200)),
    "GET /api/v1/pool/impact": (None, (401, 403, 403, 403, 422)),
    "GET /api/v1/teams": (None, (401, 200, 200, 200, 200)),
    "GET /api/v1/teams/{team_id}": (None, (401, 200, 200, 404, 200)),
    "POST /api/v1/teams/{team_id}/kubeconfig": ({}, (401, 200, 200, 404, 200)),
    "GET /api/v1/teams/{team_id}/kubeconfigs": (None, (401, 200, 200, 404, 200)),
    "POST /api/v1/teams/{team_id}/kubeconfigs/revoke": ({}, (401, 200, 200, 404, 200)),
    "GET /api/v1/teams/{team_id}/members": (None, (401, 200, 200, 404, 200)),
    "GET /api/v1/teams/{team_id}/history": (None, (401, 200, 200, 404, 200)),
    "GET /api/v1/showback": (None, (401, 403, 403, 403, 200)),
    "POST /api/v1/teams/{team_id}/members": (
        {"email": "x@example.org"},
        (401, 403, 201, 404, 201),
    ),
    "DELETE /api/v1/teams/{team_id}/members/{user_id}": (None, (401, 403, 204, 404, 204)),
    "POST /api/v1/teams/{team_id}/quota-requests": (QUOTA, (401, 403, 201, 404, 201)),
    "POST /api/v1/teams/{team_id}/rightsizing": (None, (401, 403, 409, 404, 409)),
    "GET /api/v1/rightsizing": (None, (401, 403, 403, 403, 200)),
    "GET /api/v1/templates": (None, (401, 200, 200, 200, 200)),
    "GET /api/v1/templates/{template_id}": (None, (401, 404, 404, 404, 404)),
    "POST /api/v1/templates": ({"name": "x", "spec": {}}, (401, 403, 403, 403, 201)),
    "POST /api/v1/templates/{template_id}/versions": ({"spec": {}}, (401, 403, 403, 403, 404)),
    "PATCH /api/v1/templates/{template_id}": ({}, (401, 403, 403, 403, 404)),
    "PUT /api/v1/templates-required": ({"required": False}, (401, 403, 403, 403, 200)),
    "POST /api/v1/teams/{team_id}/template/accept": (None, (401, 403, 409, 404, 409)),
    "POST /api/v1/teams/{team_id}/decommission": ({}, (401, 403, 200, 404, 200)),
    "POST /api/v1/teams/{team_id}/retry": ({}, (401, 403, 403, 403, 409)),
    "POST /api/v1/requests": ({"name": "fresh", **QUOTA}, (401, 201, 201, 201, 201)),
    "GET /api/v1/requests": (None, (401, 200, 200, 200, 200)),
    "GET /api/v1/requests/{request_id}": (None, (401, 200, 200, 404, 200)),
    "GET /api/v1/requests/{request_id}/impact": (None, (401, 403, 403, 403, 200)),
    "POST /api/v1/requests/{request_id}/approve": ({}, (401, 403, 403, 403, 409)),
    "POST /api/v1/requests/{request_id}/reject": ({"reason": "x"}, (401, 403, 403, 403, 409)),
    "GET /api/v1/audit": (None, (401, 200, 200, 200, 200)),
    "GET /api/v1/audit/{event_id}": (None, (401, 200, 200, 404, 200)),
    "GET /api/v1/tokens": (None, (401, 200, 200, 200, 200)),
    "POST /api/v1/tokens": ({"name": "ci"}, (401, 201, 201, 201, 201)),
    "DELETE /api/v1/tokens/{token_id}": (None, (401, 404, 200, 404, 404)),
}
USERS = {
    "anonymous": None,
    "member": ("member-nlp@example.org", False),
    "lead": ("lead-nlp@example.org", False),
    "other": ("lead-vision@example.org", False),
    "admin": ("admin@example.org", True),
}


def app_routes() -> set[str]:
    found: set[str] = set()
    for router in ROUTERS:
        for route in router.routes:
            assert isinstance(route, APIRoute)
            for method in (route.methods or set()) - {"HEAD"}:
                found.add(f"{method} {route.path}")
    return found


def client_as(app: FastAPI, role: str) -> Client:
    user = USERS[role]
    client = client_for(app, user[0] if user else None, admin=bool(user and user[1]))
    client.refresh_csrf()
    return client


def call(client: Client, rule: str, body: Any, *, csrf: str | None) -> int:
    method, path = rule.split(" ", 1)
    # Team 1 is nlp; request 1 and audit event 2 are nlp's; user 5 is nlp's member;
    # token 1 is the nlp lead's.
    url = (
        path.replace("{team_id}", "1")
        .replace("{request_id}", "1")
        .replace("{event_id}", "5")  # nlp's request (after the pool and 3 templates)
        .replace("{user_id}", "5")
        .replace("{token_id}", "1")
        .replace("{delivery_id}", "999")
        .replace("{grant_id}", "999")
        .replace("{kind}", "slack")
        .replace("{template_id}", "999")
        .replace("{pool_id}", "2")  # the example org's L40S pool
    )
    headers = {} if csrf is None else {"X-CSRF-Token": csrf}
    if path.startswith("/api/"):
        kwargs: dict[str, Any] = {"json": body} if body is not None else {}
    else:
        kwargs = {"data": body} if body is not None else {}
    response: httpx.Response = client.request(
        method, url, headers=headers, follow_redirects=False, **kwargs
    )
    return response.status_code


def test_every_route_has_a_rule() -> None:
    assert app_routes() == set(RULES)


@pytest.mark.parametrize("db_url", ["sqlite"], indirect=True)
@pytest.mark.parametrize("role", ROLES)
@pytest.mark.parametrize("rule", sorted(RULES))
def test_access_matrix(app: FastAPI, rule: str, role: str) -> None:
    body, expected = RULES[rule]
    if "sleep" in rule:  # nlp idle: no pod of it runs (the simulated demand would vary)
        backend = portal_of(app).backend
        assert isinstance(backend, SimulatedBackend)
        backend.pin_usage("nlp", allocated=0, requested=0)
    client = client_as(app, role)
    status = call(client, rule, body, csrf=client.csrf)
    assert status == expected[ROLES.index(role)], f"{role}: {rule} -> {status}"


UNSAFE = sorted(r for r in RULES if not r.startswith("GET "))


@pytest.mark.parametrize("db_url", ["sqlite"], indirect=True)
@pytest.mark.parametrize("rule", UNSAFE)
def test_unsafe_routes_refuse_a_missing_or_wrong_csrf_token(app: FastAPI, rule: str) -> None:
    admin = client_as(app, "admin")
    body = RULES[rule][0]
    assert call(admin, rule, body, csrf=None) == 403
    assert call(admin, rule, body, csrf="forged-" + admin.csrf[:10]) == 403
    other_session = client_as(app, "lead")
    assert call(admin, rule, body, csrf=other_session.csrf) == 403, "tokens are per session"


@pytest.mark.parametrize("db_url", ["sqlite"], indirect=True)
def test_csrf_refusal_says_what_to_do(app: FastAPI) -> None:
    admin = client_as(app, "admin")
    response = admin.post("/admin/pool", data={"gpus": "2"})
    assert response.status_code == 403
    assert "reload the page and try again" in response.text
