"""Previews that can happen: a pool below the guarantees is said to be unsaveable, and
lowering a team's quota names the running work KAI may take back."""

from __future__ import annotations

import re

from app.adapters.simulated import SimulatedBackend
from app.runtime import portal_of
from tests.web.conftest import client_for, portal


def test_a_pool_below_the_guarantees_is_flagged_in_its_preview(db_url: str) -> None:
    for app in portal(db_url):
        admin = client_for(app, "admin@example.org", admin=True)
        preview = admin.form("/admin/pool/impact", {"gpus": "0.5"}).text
        assert (
            "A pool of 0.5 GPU is below the 0.99 GPU already guaranteed to teams: it cannot "
            "be saved." in preview
        )
        assert "below-committed" not in admin.form("/admin/pool/impact", {"gpus": "2"}).text


def test_lowering_a_quota_names_what_kai_may_take_back(db_url: str) -> None:
    for app in portal(db_url):
        backend = portal_of(app).backend
        assert isinstance(backend, SimulatedBackend)
        backend.pin_usage("nlp", allocated=0.9, requested=0.9)
        for team in ("vision", "recommender"):
            backend.pin_usage(team, allocated=0.0, requested=0.0)
        lead = client_for(app, "lead-nlp@example.org")
        asked = lead.api(
            "POST", "/api/v1/teams/1/quota-requests", {"gpu_quota": "0.1", "gpu_limit": "0.3"}
        )
        assert asked.status_code == 201, asked.text
        admin = client_for(app, "admin@example.org", admin=True)
        card = admin.get("/admin/requests").text
        found = re.search(r'data-reclaim-team="nlp">([^<]+)<', card)
        assert found is not None
        assert found.group(1) == (
            "nlp uses 0.9 GPU now; after this its fair share is 0.3 (guarantee 0.1), so KAI "
            "may take back 0.6 GPU of its running work when other teams ask for theirs."
        )
        assert 'data-reclaim-team="vision"' not in card
