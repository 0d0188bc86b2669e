"""Bodies over their kind's limit are answered 413 before anything reads or parses them,
before sign-in; page numbers, ids and booleans are read strictly."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import httpx
import pytest
from fastapi import FastAPI
from sqlalchemy import func, select

from app.core.models import KubeconfigGrant
from app.runtime import portal_of
from app.web.limits import MIB
from tests.servers import free_port
from tests.web.conftest import client_for, portal


@pytest.fixture
def app(db_url: str) -> Iterator[FastAPI]:
    yield from portal(db_url)


def _call(
    app: FastAPI, method: str, path: str, headers: list[tuple[bytes, bytes]], body: bytes | None
) -> tuple[int, bytes, int]:
    """Drive the ASGI app directly: (status, body, how many times it read the body)."""
    reads = 0
    sent: list[dict[str, Any]] = []

    async def receive() -> dict[str, Any]:
        nonlocal reads
        reads += 1
        if body is None:
            raise AssertionError("the body was read")
        return {"type": "http.request", "body": body, "more_body": False}

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    scope = {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": method,
        "scheme": "http",
        "path": path,
        "raw_path": path.encode(),
        "query_string": b"",
        "root_path": "",
        "headers": [(b"host", b"testserver"), *headers],
        "client": ("127.0.0.1", 1),
        "server": ("testserver", 80),
        "state": {},
    }
    asyncio.run(app(scope, receive, send))  # type: ignore[arg-type]
    start = next(m for m in sent if m["type"] == "http.response.start")
    content = b"".join(m.get("body", b"") for m in sent if m["type"] == "http.response.body")
    return start["status"], content, reads


def test_a_declared_large_body_is_refused_unread_before_sign_in(app: FastAPI) -> None:
    status, content, reads = _call(
        app,
        "POST",
        "/api/v1/requests",
        [(b"content-type", b"application/json"), (b"content-length", b"104857600")],
        None,
    )
    assert (status, reads) == (413, 0)
    assert json.loads(content)["detail"] == (
        "the body is larger than 1 MiB, the most a JSON API request takes: send less"
    )


def test_a_chunked_body_is_cut_at_the_limit(app: FastAPI) -> None:
    anonymous = client_for(app)

    def chunks() -> Iterator[bytes]:
        for _ in range(3):
            yield b"x" * (MIB // 2 + 1)

    answer = anonymous.post(
        "/api/v1/requests", content=chunks(), headers={"content-type": "application/json"}
    )
    assert answer.status_code == 413
    assert "1 MiB" in answer.json()["detail"]


def test_a_large_form_field_is_named(app: FastAPI) -> None:
    lead = client_for(app, "lead-nlp@example.org")
    answer = lead.form("/teams/1/quota", {"gpu_quota": "0.5", "purpose": "p" * (2 * MIB)})
    assert answer.status_code == 413
    assert answer.text == (
        "The field 'purpose' makes the body larger than 1 MiB, the most a form takes: shorten it"
    )


def test_an_anonymous_what_if_form_gets_the_general_limit(app: FastAPI) -> None:
    """Only a signed-in browser may send the what-if form's 32 MiB: ten anonymous ones
    at once once held 140 MB before their 403."""
    body = b"pool=2&padding=" + b"y" * (2 * MIB)
    status, content, _reads = _call(
        app,
        "POST",
        "/admin/what-if",
        [
            (b"content-type", b"application/x-www-form-urlencoded"),
            (b"content-length", str(len(body)).encode()),
        ],
        body,
    )
    assert status == 413
    assert content == (
        b"The field 'padding' makes the body larger than 1 MiB, the most a form takes: shorten it"
    )


def test_the_413_names_the_field_that_crossed_the_limit_or_none(app: FastAPI) -> None:
    from app.web.limits import _field_being_read

    form = "application/x-www-form-urlencoded"
    assert _field_being_read(b"a=1&team%5B3%5D=" + b"x" * 10, form) == "team[3]"
    # The limit fell inside a name, after a whole field: no one value is to blame.
    assert _field_being_read(b"purpose=" + b"p" * 10 + b"&gpu_quo", form) is None
    lead = client_for(app, "lead-nlp@example.org")
    body = "purpose=" + "p" * (MIB - 20) + "&" + "n" * 40 + "=1"
    answer = lead.post(
        "/teams/1/quota",
        content=body.encode(),
        headers={"content-type": form, "X-CSRF-Token": lead.csrf},
    )
    assert answer.status_code == 413
    assert answer.text == "The body is larger than 1 MiB, the most a form takes: send less"


def test_a_body_under_the_limit_reaches_the_route(app: FastAPI) -> None:
    lead = client_for(app, "lead-nlp@example.org")
    answer = lead.api(
        "POST",
        "/api/v1/requests",
        {"name": "small", "gpu_quota": "0.1", "gpu_limit": "0.1", "purpose": "x" * 100},
    )
    assert answer.status_code == 201, answer.text
    # A what-if form has room for far more than a form.
    admin = client_for(app, "admin@example.org", admin=True)
    page = admin.form("/admin/what-if", {"pool": "2", "padding": "y" * (2 * MIB)})
    assert page.status_code != 413


def test_a_page_number_no_list_reaches_is_the_last_page(app: FastAPI) -> None:
    admin = client_for(app, "admin@example.org", admin=True)
    for page in ("9223372036854775808", "99999999999999999999999", "-5", "0"):
        answer = admin.get(f"/admin?page={page}")
        assert answer.status_code == 200, (page, answer.status_code)
        assert "Team" in answer.text


@pytest.mark.parametrize("written", ["1.0", "%201", "+1", "1_0", "01e0"])
def test_an_id_is_written_in_digits(app: FastAPI, written: str) -> None:
    admin = client_for(app, "admin@example.org", admin=True)
    answer = admin.get(f"/api/v1/teams/{written}")
    assert answer.status_code == 422, written
    assert "digits only" in answer.text
    assert admin.get("/api/v1/teams/1").status_code == 200
    assert admin.get("/audit?team_id=1.0").status_code == 422


def test_a_boolean_is_true_or_false(app: FastAPI) -> None:
    lead = client_for(app, "lead-nlp@example.org")
    for value in (0, 1, "true", "no"):
        answer = lead.api("POST", "/api/v1/teams/1/kubeconfigs/revoke", {"everyone": value})
        assert answer.status_code == 422, value
    assert (
        lead.api("POST", "/api/v1/teams/1/kubeconfigs/revoke", {"everyone": False}).status_code
        == 200
    )
    assert portal_of(app).settings.development


def test_one_person_holds_at_most_the_live_kubeconfigs_allowed(db_url: str) -> None:
    """Six downloads at once with a cap of three: three credentials, three clear 429s."""
    for application in portal(db_url, kubeconfig_max_live=3):
        lead = client_for(application, "lead-nlp@example.org")
        with ThreadPoolExecutor(6) as pool:
            answers = list(
                pool.map(
                    lambda client: client.api("POST", "/api/v1/teams/1/kubeconfig").status_code,
                    [lead] * 6,
                )
            )
        assert sorted(answers) == [200, 200, 200, 429, 429, 429]
        refused = lead.api("POST", "/api/v1/teams/1/kubeconfig")
        assert refused.status_code == 429
        assert refused.json()["detail"].startswith(
            "you hold 3 live kubeconfigs, the most one person may (the first expires at "
        )
        with portal_of(application).session_factory() as session:
            live = session.scalar(
                select(func.count())
                .select_from(KubeconfigGrant)
                .where(KubeconfigGrant.revoked_at.is_(None))
            )
        assert live == 3
        revoked = lead.api("POST", "/api/v1/teams/1/kubeconfigs/revoke", {})
        assert revoked.status_code == 200
        assert lead.api("POST", "/api/v1/teams/1/kubeconfig").status_code == 200


def test_the_metrics_port_listens_where_it_is_told_and_takes_any_case_bearer(
    db_url: str,
) -> None:
    port = free_port()
    for application in portal(db_url, metrics_port=port, metrics_host="127.0.0.1"):
        assert application is not None
        assert httpx.get(f"http://127.0.0.1:{port}/metrics", timeout=5).status_code == 200
        with pytest.raises(httpx.ConnectError):
            httpx.get(f"http://127.0.0.2:{port}/metrics", timeout=5)
    for application in portal(db_url, metrics_token="metrics-token-123456"):
        client = client_for(application)
        for scheme in ("Bearer", "bearer", "BEARER"):
            answer = client.get(
                "/metrics", headers={"Authorization": f"{scheme} metrics-token-123456"}
            )
            assert answer.status_code == 200, scheme
        assert client.get("/metrics", headers={"Authorization": "bearer wrong"}).status_code == 401


@pytest.mark.parametrize("digits", ["²", "①", "\u0663", "\uff13"])
def test_digits_of_other_scripts_are_refused_not_a_server_error(app: FastAPI, digits: str) -> None:
    """``str.isdigit`` says yes to them and ``int`` then raises (or reads them)."""
    lead = client_for(app, "lead-nlp@example.org")
    ttl = lead.api("POST", f"/api/v1/teams/1/kubeconfig?ttl={digits}")
    assert ttl.status_code == 422, ttl.text
    form = lead.form(
        "/teams",
        {"name": "newteam", "gpu_quota": "0", "gpu_limit": "1", "template": digits},
    )
    assert form.status_code == 422, form.text
    assert "choose one of the templates listed" in form.text
    admin = client_for(app, "admin@example.org", admin=True)
    what_if = admin.form(
        "/admin/what-if", {"pool": digits, f"q_{digits}": "1", "explain": digits, "page": digits}
    )
    assert what_if.status_code == 200, what_if.text
    assert "must be a number" in what_if.text


def test_deleting_a_webhook_of_a_kind_that_does_not_exist_is_a_404(app: FastAPI) -> None:
    admin = client_for(app, "admin@example.org", admin=True)
    lead = client_for(app, "lead-nlp@example.org")
    for client, path in (
        (admin, "/admin/webhooks/carrier-pigeon/delete"),
        (lead, "/teams/1/webhooks/carrier-pigeon/delete"),
        (admin, "/admin/webhooks/slack/delete"),  # a kind, but none set
    ):
        answer = client.form(path, {})
        assert answer.status_code == 404, (path, answer.text)
