"""The JSON API: the same loop as the pages, for CI and scripts."""

from __future__ import annotations

from fastapi import FastAPI

from app.runtime import portal_of
from tests.web.conftest import Client, client_for

NLP, VISION = 1, 2


def test_api_needs_a_session(anonymous: Client) -> None:
    response = anonymous.get("/api/v1/teams")
    assert response.status_code == 401
    assert response.json() == {"detail": "sign in first"}


def test_pool(admin: Client, lead: Client) -> None:
    assert lead.get("/api/v1/pool").json() == {
        "name": "ml-org",
        "parent_queue": "ml-org",
        "gpus": "1",
        "cpu_cores": "40",
        "memory_gb": "160",
        "committed_gpus": "0.99",
        "free_gpus": "0.01",
    }
    assert lead.api("PUT", "/api/v1/pool", {"gpus": 2}).status_code == 403
    refused = admin.api("PUT", "/api/v1/pool", {"gpus": "0.5"})
    assert refused.status_code == 422
    assert "enter at least 0.99" in refused.json()["errors"]["gpus"]
    assert admin.api("PUT", "/api/v1/pool", {"gpus": "2", "cpu_cores": 64}).json()["gpus"] == "2"


def test_whole_loop_through_the_api(app: FastAPI, admin: Client) -> None:
    lead = client_for(app, "lead-speech@example.org")
    created = lead.api(
        "POST",
        "/api/v1/requests",
        {"name": "speech", "gpu_quota": 0.5, "gpu_limit": "1", "purpose": "ASR"},
    )
    assert created.status_code == 201, created.text
    body = created.json()
    assert body["status"] == "submitted"
    assert body["requested"]["gpu_quota"] == "0.5"
    request_id, team_id = body["id"], body["team_id"]

    over = admin.api("POST", f"/api/v1/requests/{request_id}/approve", {})
    assert over.status_code == 409
    assert "0.01 GPU is free" in over.json()["detail"]

    approved = admin.api(
        "POST",
        f"/api/v1/requests/{request_id}/approve",
        {"adjusted": {"gpu_quota": "0.01", "gpu_limit": "1"}, "reason": "tight pool"},
    )
    assert approved.status_code == 200, approved.text
    decision = approved.json()["decision"]
    assert decision["changes"] == {"gpu_quota": ["0.5", "0.01"]}
    assert decision["approved"]["gpu_quota"] == "0.01"
    # The lead's Requests card says it in the forms' words, not the fields' names.
    card = lead.get(f"/teams/{team_id}").text.split('id="team-requests"', 1)[1]
    card = card.split("</section>", 1)[0]
    assert "approved with changes: GPU guarantee 0.5 → 0.01" in card
    assert "gpu_quota" not in card
    # The same quota keyed by node pool and resource (the fields above: the default pool).
    assert decision["approved"]["pools"] == {
        "default": {"gpu": {"guarantee": "0.01", "limit": "1", "weight": "1"}}
    }

    assert lead.api("POST", f"/api/v1/teams/{team_id}/kubeconfig").status_code == 409
    portal_of(app).reconciler.run_once()
    team = lead.get(f"/api/v1/teams/{team_id}").json()
    assert team["status"] == "ready"
    assert [s["status"] for s in team["steps"]] == ["done"] * 5
    assert team["gpu_share"]["guaranteed"] == 0.01
    kubeconfig = lead.api("POST", f"/api/v1/teams/{team_id}/kubeconfig")
    assert kubeconfig.status_code == 200
    assert "current-context: speech/" in kubeconfig.text
    assert kubeconfig.headers["X-Expires-At"]

    change = lead.api(
        "POST", f"/api/v1/teams/{team_id}/quota-requests", {"gpu_quota": "0", "gpu_limit": "0.5"}
    )
    assert change.status_code == 201
    assert change.json()["kind"] == "quota_change"
    rejected = admin.api("POST", f"/api/v1/requests/{change.json()['id']}/reject", {"reason": "no"})
    assert rejected.json()["decision"]["outcome"] == "rejected"

    gone = lead.api("POST", f"/api/v1/teams/{team_id}/decommission")
    assert gone.json()["status"] == "decommissioning"
    portal_of(app).sweeper.run_once()
    assert lead.get(f"/api/v1/teams/{team_id}/kubeconfigs").json() == []
    portal_of(app).reconciler.run_once()
    assert lead.get(f"/api/v1/teams/{team_id}").json()["status"] == "decommissioned"
    actions = [e["action"] for e in lead.get(f"/api/v1/audit?team_id={team_id}").json()]
    assert actions[0] == "team.decommissioned"
    assert "kubeconfig.issued" in actions
    assert "kubeconfig.revoked" in actions  # decommissioning revoked the lead's


def test_bad_bodies_say_what_to_change(lead: Client) -> None:
    response = lead.api("POST", "/api/v1/requests", {"name": "Bad", "gpu_quota": "x"})
    assert response.status_code == 422
    errors = response.json()["errors"]
    assert "gpu_quota" in errors
    assert "gpu_limit" in errors
    rules = lead.api("POST", "/api/v1/requests", {"name": "Bad", "gpu_quota": 0.5, "gpu_limit": 3})
    assert rules.status_code == 422
    assert rules.json()["errors"]["name"] == "use lower-case letters only: 'bad'"
    assert "enter 1 or less" in rules.json()["errors"]["gpu_limit"]
    extra = lead.api(
        "POST", "/api/v1/requests", {"name": "a", "gpu_quota": 0, "gpu_limit": 0, "x": 1}
    )
    assert extra.status_code == 422
    assert "x" in extra.json()["errors"]


def test_leads_see_only_their_teams_requests_and_events(lead: Client, admin: Client) -> None:
    assert [t["name"] for t in lead.get("/api/v1/teams").json()] == ["nlp"]
    assert len(admin.get("/api/v1/teams").json()) == 3
    assert lead.get(f"/api/v1/teams/{VISION}").status_code == 404
    assert lead.api("POST", f"/api/v1/teams/{VISION}/kubeconfig").status_code == 404
    assert lead.get("/api/v1/requests/2").status_code == 404
    assert {r["team"] for r in lead.get("/api/v1/requests").json()} == {"nlp"}
    assert {e["team_id"] for e in lead.get("/api/v1/audit").json()} == {NLP}
    assert lead.get(f"/api/v1/audit?team_id={VISION}").json() == []
    assert lead.api("POST", "/api/v1/requests/1/approve", {}).status_code == 403
    assert lead.api("POST", f"/api/v1/teams/{NLP}/retry").status_code == 403


def test_openapi_document_is_clean(anonymous: Client) -> None:
    doc = anonymous.get("/openapi.json").json()
    paths = doc["paths"]
    assert all(p.startswith("/api/v1/") for p in paths), "pages stay out of the API document"
    operations = [(path, method, op) for path, ops in paths.items() for method, op in ops.items()]
    # The pools: list, add, change, remove; sleep: wake, sleep, the team's choices, the
    # org's policy (read and set); grants: list (team, org), ask, approve, reject, end;
    # budgets: list (team, org), set.
    assert len(operations) == 60
    ids = [op["operationId"] for _, _, op in operations]
    assert len(ids) == len(set(ids))
    for path, method, op in operations:
        assert op.get("tags"), (path, method)
        assert {"200", "201", "204"} & set(op["responses"]), (path, method)
        assert "401" in op["responses"], (path, method)
    schemas = doc["components"]["schemas"]
    assert {
        "TeamOut",
        "RequestOut",
        "PoolOut",
        "NodePoolOut",
        "AuditEventOut",
        "ClusterRequestIn",
    } <= set(schemas)


def test_a_limit_above_the_pool_is_refused_at_creation(lead: Client) -> None:
    """The README's promise: guarantee ≤ limit ≤ pool (the example pool has 1 GPU)."""
    over = lead.api(
        "POST", "/api/v1/requests", {"name": "big", "gpu_quota": "0", "gpu_limit": "1.5"}
    )
    assert over.status_code == 422
    assert over.json()["errors"]["gpu_limit"].startswith(
        "the limit (1.5 GPU) cannot exceed the pool"
    )
    page = lead.form("/teams", {"name": "big", "gpu_quota": "0", "gpu_limit": "1.01"})
    assert page.status_code == 422
    assert "cannot exceed the pool of 1 GPU" in page.text


def test_anonymous_api_writes_are_401_before_any_csrf_check(anonymous: Client) -> None:
    answer = anonymous.post("/api/v1/requests", json={"name": "x"})
    assert answer.status_code == 401
    assert answer.headers["WWW-Authenticate"].startswith("Bearer")


def test_caching_and_transport_headers(app: FastAPI, lead: Client, anonymous: Client) -> None:
    assert lead.get("/teams").headers["Cache-Control"] == "no-store"
    assert lead.get("/api/v1/teams").headers["Cache-Control"] == "no-store"
    assert "Strict-Transport-Security" not in lead.get("/teams").headers
    secure = Client(app, base_url="https://testserver")
    assert secure.get("/login").headers["Strict-Transport-Security"].startswith("max-age=")


def test_the_api_passes_its_validated_body_straight_to_the_service(lead: Client) -> None:
    """The body is parsed once, by its model: hundredths as the forms allow them, a
    guarantee above its limit refused by the service with the form's own words."""
    thirds = lead.api("POST", "/api/v1/requests", {"name": "t", "gpu_quota": 0.333, "gpu_limit": 1})
    assert thirds.status_code == 422
    assert "at most two decimals" in thirds.json()["errors"]["gpu_quota"]
    above = lead.api("POST", "/api/v1/requests", {"name": "t", "gpu_quota": 1, "gpu_limit": 0.5})
    assert above.status_code == 422
    assert "cannot be below the guarantee" in above.json()["errors"]["gpu_limit"]
    made = lead.api(
        "POST",
        "/api/v1/requests",
        {"name": "t", "gpu_quota": "0.25", "gpu_limit": 1, "cpu_quota": 1.5, "memory_quota": 2},
    )
    assert made.status_code == 201, made.text
    requested = made.json()["requested"]
    assert requested == {
        "gpu_quota": "0.25",
        "gpu_limit": "1",
        "over_quota_weight": "1",
        "priority": 100,
        "cpu_quota": "1.5",
        "memory_quota": "2",
        "pools": requested["pools"],
    }
    assert requested["pools"] == {
        "default": {
            "gpu": {"guarantee": "0.25", "limit": "1", "weight": "1"},
            "cpu": {"guarantee": "1.5", "limit": None, "weight": "1"},
            "memory": {"guarantee": "2", "limit": None, "weight": "1"},
        }
    }
