"""The team page's refused-pods panel: read after the page, off its thread."""

from __future__ import annotations

from fastapi import FastAPI

from app.runtime import portal_of
from tests.web.conftest import Client


def test_the_panel_says_it_is_being_read_then_shows_the_reading(app: FastAPI, lead: Client) -> None:
    first = lead.get("/teams/1/workloads").text
    assert "Being read from your vCluster…" in first
    assert 'hx-trigger="every 2s"' in first
    portal_of(app).refused_pods.wait()
    then = lead.get("/teams/1/workloads").text
    assert "None: every pod you created reached the host cluster." in then
    assert 'hx-trigger="every 30s"' in then
