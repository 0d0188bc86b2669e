"""Health, readiness, metrics and request ids, as an operator's tools see them."""

from __future__ import annotations

import re
from pathlib import Path

import httpx
import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient

from app.cli import migrate
from app.main import create_app
from app.runtime import portal_of
from tests.conftest import settings_for
from tests.servers import free_port
from tests.web.conftest import Client


def _sample(text: str, name: str, **labels: str) -> float:
    """The value of one series in Prometheus' text format (labels in any order)."""
    for line in text.splitlines():
        if not line.startswith(name + "{") and not line.startswith(name + " "):
            continue
        found = dict(re.findall(r'(\w+)="([^"]*)"', line.split(" ")[0]))
        if all(found.get(k) == v for k, v in labels.items()):
            return float(line.rsplit(" ", 1)[1])
    raise AssertionError(f"no {name} {labels} in the metrics")


def test_healthz_and_readyz_answer_without_signing_in(anonymous: Client) -> None:
    assert anonymous.get("/healthz").json() == {"status": "ok"}
    ready = anonymous.get("/readyz")
    assert ready.status_code == 200
    assert ready.json() == {"status": "ready", "failed": {}}


def test_readyz_fails_while_migrations_are_behind(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'old.db'}"
    settings = settings_for(url)
    migrate(settings, "0004")
    with TestClient(create_app(settings)) as client:
        ready = client.get("/readyz")
        assert ready.status_code == 503
        assert "code expects" in ready.json()["failed"]["migrations"]
        migrate(settings)
        assert client.get("/readyz").status_code == 200


def test_readyz_fails_when_a_worker_thread_died(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'p.db'}"
    settings = settings_for(url, worker_enabled=True, usage_collector_enabled=True)
    migrate(settings)
    app = create_app(settings)
    with TestClient(app) as client:
        assert client.get("/readyz").status_code == 200
        portal_of(app).loops["usage_collector"].stop()
        ready = client.get("/readyz")
        assert ready.status_code == 503
        assert ready.json()["failed"] == {"usage_collector": "not running"}


def test_metrics_count_requests_by_route_template(app: FastAPI, lead: Client) -> None:
    before = lead.get("/metrics").text
    base = _sample_or_zero(before, route="/teams/{team_id}", status="200")
    for _ in range(3):
        assert lead.get("/teams/1").status_code == 200
    assert lead.get("/teams/999").status_code == 404
    text = lead.get("/metrics").text
    assert _sample(text, "portal_http_requests_total", route="/teams/{team_id}", status="200") == (
        base + 3
    )
    assert _sample(text, "portal_http_requests_total", route="/teams/{team_id}", status="404") >= 1
    assert (
        _sample(text, "portal_http_request_duration_seconds_count", route="/teams/{team_id}")
        >= base + 4
    )
    assert 'route="/teams/1"' not in text, "paths are grouped by their template"
    # Figures of the database and the workers.
    assert _sample(text, "portal_teams", status="ready") == 3
    assert _sample(text, "portal_teams", status="submitted") == 0
    assert _sample(text, "portal_cluster_read_cache_total", result="miss") >= 1
    assert "portal_reconcile_pass_duration_seconds_count" in text


def _sample_or_zero(text: str, **labels: str) -> float:
    try:
        return _sample(text, "portal_http_requests_total", **labels)
    except AssertionError:
        return 0.0


def test_metrics_need_the_token_outside_development(db_url: str) -> None:
    closed = create_app(settings_for(db_url, development=False, secret_key="k" * 40))
    with TestClient(closed, base_url="https://portal.example") as client:
        refused = client.get("/metrics")
        assert refused.status_code == 403
        assert "PORTAL_METRICS_TOKEN" in refused.json()["detail"]
    guarded = create_app(
        settings_for(db_url, development=False, secret_key="k" * 40, metrics_token="s3cret-scrape")
    )
    with TestClient(guarded, base_url="https://portal.example") as client:
        assert client.get("/metrics").status_code == 401
        wrong = client.get("/metrics", headers={"Authorization": "Bearer nope"})
        assert wrong.status_code == 401
        right = client.get("/metrics", headers={"Authorization": "Bearer s3cret-scrape"})
        assert right.status_code == 200
        assert "portal_http_requests_total" in right.text


def test_metrics_on_a_separate_port(db_url: str) -> None:
    port = free_port()
    app = create_app(settings_for(db_url, metrics_port=port))
    with TestClient(app) as client:
        assert client.get("/metrics").status_code == 404
        client.get("/healthz")
        scraped = httpx.get(f"http://127.0.0.1:{port}/metrics", timeout=5)
        assert scraped.status_code == 200
        assert _sample(scraped.text, "portal_http_requests_total", route="/healthz") >= 1
        assert "portal_teams" in scraped.text


def test_request_ids_are_accepted_returned_or_made(anonymous: Client) -> None:
    given = anonymous.get("/healthz", headers={"X-Request-ID": "trace-42.a_b"})
    assert given.headers["X-Request-ID"] == "trace-42.a_b"
    made = anonymous.get("/healthz")
    assert re.fullmatch(r"[0-9a-f]{32}", made.headers["X-Request-ID"])
    for unsafe in ("two words", "x" * 129, "a\\nb"):
        answer = anonymous.get("/healthz", headers={"X-Request-ID": unsafe})
        assert answer.headers["X-Request-ID"] != unsafe


@pytest.mark.parametrize("fmt", ["json"])
def test_json_logs_carry_the_request_id(fmt: str, capsys: pytest.CaptureFixture[str]) -> None:
    import json
    import logging
    import logging.config

    from app.core import logs

    logging.config.dictConfig(logs.dict_config(fmt))
    try:
        token = logs.REQUEST_ID.set("req-7")
        logging.getLogger("gpu_portal.test").info("callback with code=abc123&state=xyz")
        logs.REQUEST_ID.reset(token)
        line = capsys.readouterr().err.strip().splitlines()[-1]
    finally:
        logging.config.dictConfig({"version": 1, "disable_existing_loggers": False})
    entry = json.loads(line)
    assert entry["request_id"] == "req-7"
    assert entry["level"] == "info"
    assert entry["logger"] == "gpu_portal.test"
    assert "abc123" not in line
    assert "code=[redacted]" in entry["message"]


def test_request_metrics_can_be_switched_off(db_url: str) -> None:
    app = create_app(settings_for(db_url, metrics_enabled=False))
    with TestClient(app) as client:
        before = _sample_or_zero(client.get("/metrics").text, route="/login", status="200")
        client.get("/login")
        text = client.get("/metrics").text
    # The counters are the process's: other apps of this test run may have added to them.
    assert _sample_or_zero(text, route="/login", status="200") == before
    assert "portal_teams" in text, "the database's figures stay"
