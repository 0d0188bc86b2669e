"""Right-sizing as a person sees it, in headless Chromium against a portal process: the
numbers on the team page, one click to a request, the overview's idle total, the admins'
list and the request waiting for review with the numbers as its reason."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import delete

from app.core.config import Settings
from app.core.db import make_engine, make_session_factory, unit_of_work
from app.core.models import UsageSample, utcnow
from app.usage import rightsizing
from tests.browser.conftest import seeded_portal, sign_in, wait_ready
from tests.factories import write_history

pytestmark = pytest.mark.browser


def generated_history(database: Path) -> None:
    """nlp (0.33 guaranteed) used 0.02 GPU, 0.05 at its busiest; vision waited half the
    time asking 0.8. Written into the portal's database, then judged as the collector's
    hourly pass does."""
    engine = make_engine(f"sqlite:///{database}")
    try:
        factory = make_session_factory(engine)
        with unit_of_work(factory) as session:  # instead of the demo seed's own history
            session.execute(delete(UsageSample))
        # Off the collector's whole minutes, so its own samples never collide with these.
        now = utcnow().replace(second=30, microsecond=0)
        write_history(factory, 1, lambda h: 0.05 if h % 10 == 0 else 0.02, now=now, guarantee=0.33)
        write_history(
            factory, 2, lambda h: 0.33, lambda h: 0.8 if h % 2 else 0.3, now=now, guarantee=0.33
        )
        with unit_of_work(factory) as session:
            assert rightsizing.recompute(session, Settings(development=True)) == 2
    finally:
        engine.dispose()


def test_rightsizing_on_screen(browser: Any, tmp_path: Path) -> None:
    from playwright.sync_api import expect

    with seeded_portal(
        tmp_path, PORTAL_SIMULATED_STEP_SECONDS="0.1", PORTAL_WORKER_INTERVAL_SECONDS="0.3"
    ) as portal:
        admin = sign_in(browser, portal, "admin@example.org", admin=True)
        wait_ready(admin, portal)
        generated_history(tmp_path / "portal.db")

        lead = sign_in(browser, portal, "lead-nlp@example.org")
        lead.goto(portal + "/teams/1")
        expect(lead.locator("#rightsizing h3")).to_have_text("Guarantee mostly idle")
        expect(lead.get_by_test_id("rs-average")).to_have_text("0.02 GPU")
        expect(lead.get_by_test_id("rs-p95")).to_have_text("0.05 GPU")
        expect(lead.get_by_test_id("rs-suggested")).to_have_text("0.05 GPU")
        lead.click("button:has-text('Ask for 0.05 GPU')")
        expect(lead.locator(".toast")).to_contain_text(
            "Asked to change nlp's guarantee to 0.05 GPU"
        )

        admin.goto(portal + "/admin")
        expect(admin.locator("#rightsizing-summary")).to_contain_text(
            "0.28 GPU guaranteed but idle in 1 team"
        )
        expect(admin.locator("#rightsizing-summary")).to_contain_text("1 team waiting for more")
        admin.goto(portal + "/admin/rightsizing")
        expect(admin.get_by_test_id("idle-total")).to_have_text("0.28 GPU")
        vision = admin.locator("#rightsizing-table tr", has_text="vision")
        cells = vision.locator("td")
        expect(cells.nth(6)).to_have_text("0.33")
        expect(cells.nth(7)).to_have_text(re.compile(r"^0\.8\s*0\.34 fits today$"))
        expect(cells.nth(8)).to_contain_text("Propose 0.34 GPU (fits today)")
        expect(cells.nth(8)).to_contain_text("Propose 0.8 GPU anyway")
        nlp = admin.locator("#rightsizing-table tr", has_text="nlp")
        expect(nlp).to_contain_text("request waiting")
        admin.goto(portal + "/admin/requests")
        expect(admin.locator("main")).to_contain_text(
            "p95 0.05, of 0.33 guaranteed: lower the guarantee to 0.05 GPU."
        )
