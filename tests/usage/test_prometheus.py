"""The optional Prometheus source, against a real Prometheus scraping KAI-style metrics.

KAI's scheduler cannot run here (no cluster, no GPUs); a small HTTP endpoint serves the
same metric families it exports, and a real Prometheus scrapes it.
"""

from __future__ import annotations

import re
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import httpx
import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient

from app.adapters.prometheus import PrometheusError, PrometheusSource
from app.main import create_app
from app.runtime import portal_of
from tests.conftest import settings_for
from tests.servers import free_port, prometheus_server
from tests.web.conftest import client_for

# As KAI labels them: `queue_name` is the queue's displayName (the team's name).
METRICS = (
    "# TYPE kai_queue_allocated_gpus gauge\n"
    'kai_queue_allocated_gpus{queue_name="nlp"} 0.7\n'
    'kai_queue_allocated_gpus{queue_name="vision"} 0.2\n'
    "# TYPE kai_queue_fair_share_gpu gauge\n"
    'kai_queue_fair_share_gpu{queue_name="nlp"} 0.61\n'
    'kai_queue_fair_share_gpu{queue_name="vision"} 0.39\n'
    "# TYPE runai_queue_fair_share_gpu gauge\n"
    'runai_queue_fair_share_gpu{queue_name="nlp"} 0.5\n'
    "# TYPE runai_queue_allocated_gpus gauge\n"
    'runai_queue_allocated_gpus{queue_name="nlp"} 0.25\n'
    # KAI 0.15+ as it labels them: the queue controller's queue_name is metadata.name,
    # the scheduler's the displayName; queue_metadata_name is the same on both. Teams
    # `a` (queue team-a) and `team-a` (queue team-team-a), names the portal accepts.
    "# TYPE newkai_queue_allocated_gpus gauge\n"
    'newkai_queue_allocated_gpus{queue_name="team-a",queue_metadata_name="team-a",'
    'queue_display_name="a"} 1\n'
    'newkai_queue_allocated_gpus{queue_name="team-team-a",queue_metadata_name="team-team-a",'
    'queue_display_name="team-a"} 3\n'
    "# TYPE newkai_queue_fair_share_gpu gauge\n"
    'newkai_queue_fair_share_gpu{queue_name="a",queue_metadata_name="team-a",'
    'queue_display_name="a"} 0.5\n'
    'newkai_queue_fair_share_gpu{queue_name="team-a",queue_metadata_name="team-team-a",'
    'queue_display_name="team-a"} 2.5\n'
    # Time-based fairshare's input, as the scheduler exports it.
    "# TYPE newkai_queue_gpu_usage gauge\n"
    'newkai_queue_gpu_usage{queue_name="a",queue_metadata_name="team-a",'
    'queue_display_name="a"} 0.25\n'
    'newkai_queue_gpu_usage{queue_name="team-a",queue_metadata_name="team-team-a",'
    'queue_display_name="team-a"} 0\n'
    'newkai_queue_gpu_usage{queue_name="org-acme",queue_metadata_name="org-acme",'
    'queue_display_name="org-acme"} 0.25\n'
    "# TYPE kai_queue_gpu_usage gauge\n"
    'kai_queue_gpu_usage{queue_name="nlp"} 0.6\n'
    'kai_queue_gpu_usage{queue_name="vision"} 0\n'
)


class Exporter(BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        body = METRICS.encode()
        self.send_response(200)
        self.send_header("Content-Type", "text/plain; version=0.0.4")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: object) -> None:
        return


@pytest.fixture(scope="module")
def prometheus() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", free_port()), Exporter)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        with prometheus_server(f"127.0.0.1:{server.server_port}") as url:
            deadline = time.monotonic() + 30
            while time.monotonic() < deadline:
                body = httpx.get(
                    url + "/api/v1/query", params={"query": "kai_queue_fair_share_gpu"}
                ).json()
                if body["data"]["result"]:
                    break
                time.sleep(0.5)
            yield url
    finally:
        server.shutdown()


def test_reads_kai_numbers_from_prometheus(prometheus: str) -> None:
    queues = PrometheusSource(prometheus).read()
    assert queues.allocated == {"nlp": 0.7, "vision": 0.2}
    assert queues.fair_share == {"nlp": 0.61, "vision": 0.39}


def test_the_metric_prefix_is_a_setting(prometheus: str) -> None:
    """The first KAI release exported its metrics as runai_*."""
    queues = PrometheusSource(prometheus, prefix="runai").read()
    assert queues.fair_share == {"nlp": 0.5}
    assert queues.allocated == {"nlp": 0.25}


def test_series_are_matched_on_the_queues_metadata_name(prometheus: str) -> None:
    """A team named `a` and one named `team-a`: on queue_name, one team's display name
    is the other's queue name, and each would get the other's numbers."""
    queues = PrometheusSource(prometheus, prefix="newkai").read()
    assert queues.by_metadata_name
    assert queues.allocated == {"team-a": 1.0, "team-team-a": 3.0}
    assert queues.fair_share == {"team-a": 0.5, "team-team-a": 2.5}
    assert queues.usage == {"team-a": 0.25, "team-team-a": 0.0, "org-acme": 0.25}
    old = PrometheusSource(prometheus).read()
    assert not old.by_metadata_name
    assert old.usage == {"nlp": 0.6, "vision": 0.0}


@pytest.mark.parametrize("db_url", ["sqlite"], indirect=True)
def test_pages_show_prometheus_figures_instead_of_computed_ones(
    prometheus: str, db_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    from app.adapters import simulated
    from app.core.db import unit_of_work
    from app.teams.seed import seed_example

    # Every simulated queue asks for 1.2 x its limit, whatever the time: the simulated
    # demand follows a slow wave, and where it brought the division without past usage
    # within 0.005 GPU of KAI's 0.61 the portal rightly had no "would be" to show, and
    # this test failed at those times of day.
    monkeypatch.setattr(simulated._QueueColumns, "demand", lambda self, now: self.scale)

    app: FastAPI = create_app(settings_for(db_url, prometheus_url=prometheus))
    with TestClient(app):
        with unit_of_work(portal_of(app).session_factory) as session:
            seed_example(session)
        portal_of(app).reconciler.run_once()
        lead = client_for(app, "lead-nlp@example.org")
        page = lead.get("/teams/1").text
        assert 'data-gauge="allocated">0.7<' in page
        assert 'data-gauge="fair">0.61<' in page
        share = lead.get("/api/v1/teams/1").json()["gpu_share"]
        assert share["fair_now"] == 0.61
        assert share["allocated"] == 0.7
        # nlp used 0.6 of the cluster lately, vision nothing: KAI weighs it (kValue 1,
        # its default), and the page says what the share would be without it.
        assert portal_of(app).usage_cache.model.usage == {"team-nlp": 0.6, "team-vision": 0.0}
        assert share["fair_without_history"] is not None
        # The page says the same as the API: what the share would be without past usage.
        found = re.search(
            r"lately (raises|lowers) your fair share from ([0-9.]+) to 0\.61 GPU", page
        )
        assert found is not None
        assert float(found.group(2)) != 0.61
        assert float(found.group(2)) == share["fair_without_history"]


def test_prometheus_down_is_reported() -> None:
    with pytest.raises(PrometheusError, match="could not be queried"):
        PrometheusSource(f"http://127.0.0.1:{free_port()}", timeout=2).read()
