"""The what-if page: try quotas and a pool, see every team's share, nothing saved until the
changes are sent as quota-change requests."""

from __future__ import annotations

import re

from fastapi import FastAPI

from app.adapters.simulated import SimulatedBackend
from app.runtime import portal_of
from tests.web.conftest import Client


def result(page: str, team: str) -> dict[str, str]:
    row = page.split(f'data-whatif-result="{team}"')[1].split("</tr>")[0]
    return dict(re.findall(r'data-whatif="(\w+)">([^<]+)<', row))


def test_the_page_starts_from_today(admin: Client) -> None:
    page = admin.get("/admin/what-if").text
    assert 'name="pool" value="1"' in page
    assert 'name="q_1" value="0.33"' in page
    # Today's figures, every team listed and marked unchanged.
    for team in ("nlp", "vision", "recommender"):
        assert result(page, team)["guarantee"] == "0.33"
    assert page.count("(no change)") == 3
    assert "3 teams keep their numbers." in page
    assert "0 teams changed" in page


def test_typed_values_recompute_every_team_without_saving(admin: Client) -> None:
    form = {"pool": "1", "q_1": "0.5", "q_2": "0.2", "q_3": "0.2"}
    htmx = admin.post(
        "/admin/what-if", data=form, headers={"HX-Request": "true", "X-CSRF-Token": admin.csrf}
    )
    assert htmx.status_code == 200
    assert htmx.text.lstrip().startswith('<section id="whatif-results"'), "only the results"
    assert result(htmx.text, "nlp")["guarantee"] == "0.5"
    assert result(htmx.text, "nlp")["busy"] == "0.6"
    assert result(htmx.text, "vision")["busy"] == "0.2"
    assert "3 teams changed" in htmx.text
    plain = admin.form("/admin/what-if", form)
    assert 'name="q_1" value="0.5"' in plain.text, "without JavaScript the form keeps its values"
    assert result(plain.text, "nlp")["busy"] == "0.6"
    assert admin.get("/api/v1/teams/1").json()["quota"]["gpu_quota"] == "0.33", "nothing saved"


def test_bad_values_are_named_and_nothing_is_sent(admin: Client) -> None:
    page = admin.form("/admin/what-if/requests", {"q_1": "0.333", "pool": "x"})
    assert page.status_code == 422
    assert "nlp: the GPU guarantee allows at most two decimals" in page.text
    assert "pool: the pool must be a number" in page.text
    assert admin.get("/api/v1/requests", params={"status": "submitted"}).json() == []


def test_changes_become_quota_change_requests(admin: Client) -> None:
    sent = admin.form(
        "/admin/what-if/requests", {"q_1": "0.2", "l_2": "0.5"}, follow_redirects=False
    )
    assert sent.status_code == 303
    assert sent.headers["location"] == "/admin/requests"
    pending = admin.get("/api/v1/requests", params={"status": "submitted"}).json()
    asked = {
        r["team"]: (r["kind"], r["requested"]["gpu_quota"], r["requested"]["gpu_limit"])
        for r in pending
    }
    assert asked == {"nlp": ("quota_change", "0.2", "1"), "vision": ("quota_change", "0.33", "0.5")}


def test_past_use_can_be_tried_and_moves_how_idle_gpus_are_divided(admin: Client) -> None:
    """KAI's time-based fairshare (kValue 1, its default): with no guarantees, the one GPU
    of a busy org goes to the oldest team (nlp) when nobody used any lately; if nlp used
    90 % of the cluster lately its weight drops to 0 and the GPU goes to another team
    (vision and recommender tie; the seed creates them in the same second)."""
    page = admin.get("/admin/what-if").text
    assert 'name="u_1" value="0.00"' in page
    base = {"pool": "1", "q_1": "0", "q_2": "0", "q_3": "0"}
    headers = {"HX-Request": "true", "X-CSRF-Token": admin.csrf}
    plain = admin.post("/admin/what-if", data=base, headers=headers).text
    assert (result(plain, "nlp")["busy"], result(plain, "vision")["busy"]) == ("1", "0")
    tried = admin.post("/admin/what-if", data={**base, "u_1": "0.9"}, headers=headers).text
    assert result(tried, "nlp")["busy"] == "0"
    others = sorted(result(tried, t).get("busy", "0") for t in ("vision", "recommender"))
    assert others == ["0", "1"]
    assert "past use tried for nlp" in tried
    bad = admin.post("/admin/what-if", data={**base, "u_1": "2"}, headers=headers).text
    assert "nlp: past use is a share of the cluster from 0 to 1" in bad
    assert 'class="card stale"' in bad
    assert "Until these are fixed, the figures below keep today&#39;s values" in bad or (
        "Until these are fixed, the figures below keep today's values" in bad
    )
    sent = admin.form("/admin/what-if/requests", {"u_1": "0.5"}, follow_redirects=False)
    assert admin.get("/api/v1/requests", params={"status": "submitted"}).json() == [], sent.text


def test_a_fair_share_above_the_limit_is_marked(admin: Client) -> None:
    """KAI's leftovers are not capped by a limit: the three teams (0.33, limit 1) busy on
    2 GPUs get 1.33 / 0.34 / 0.33, and nlp's limit is 1; the page says it uses at most 1."""
    application = admin.app
    assert isinstance(application, FastAPI)
    backend = portal_of(application).backend
    assert isinstance(backend, SimulatedBackend)
    for team in ("nlp", "vision", "recommender"):
        backend.pin_usage(team, allocated=0.3, requested=1.0)
    headers = {"HX-Request": "true", "X-CSRF-Token": admin.csrf}
    page = admin.post("/admin/what-if", data={"pool": "2"}, headers=headers).text
    rows = {
        t: page.split(f'data-whatif-result="{t}"')[1].split("</tr>")[0]
        for t in ("nlp", "vision", "recommender")
    }
    assert result(page, "nlp")["now"] == "1.33"
    assert "(uses at most 1)" in rows["nlp"]
    assert "(uses at most" not in rows["recommender"]
