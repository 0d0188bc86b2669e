"""The review card previews what can happen: the largest guarantee that fits when the
asked one does not, the typed values as the admin types, the refused approval kept with
its values, and KAI's division after the decision step by step."""

from __future__ import annotations

import html
import re

from fastapi import FastAPI

from app.adapters.simulated import SimulatedBackend
from app.runtime import portal_of
from tests.web.conftest import client_for, portal


def words(fragment: str) -> str:
    """What a person reads: tags out, entities decoded, spaces folded."""
    return re.sub(r"\s+", " ", html.unescape(re.sub(r"<[^>]+>", " ", fragment))).strip()


def card_of(page: str, request_id: str) -> str:
    start = page.index(f'id="request-{request_id}"')
    start = page.index(">", start) + 1
    return page[start : page.index("</article>", start)]


def _speech_asks(app: FastAPI, quota: str = "0.5") -> str:
    lead = client_for(app, "lead-speech@example.org")
    made = lead.form("/teams", {"name": "speech", "gpu_quota": quota, "gpu_limit": "1"})
    assert made.status_code == 200, made.text
    admin = client_for(app, "admin@example.org", admin=True)
    page = admin.get("/admin/requests").text
    found: list[str] = re.findall(r'id="request-(\d+)"', page)
    return found[-1]


def test_a_request_that_does_not_fit_previews_the_largest_guarantee_that_does(
    db_url: str,
) -> None:
    for app in portal(db_url):
        rid = _speech_asks(app)
        admin = client_for(app, "admin@example.org", admin=True)
        card = card_of(admin.get("/admin/requests").text, rid)
        said = words(card)
        assert (
            "The asked guarantee of 0.5 GPU does not fit: 0.99 of the pool's 1 GPU are "
            "guaranteed to other teams, so at most 0.01 GPU can be." in said
        )
        assert "If approved with a guarantee of 0.01 GPU" in said
        assert "speech (this request) 0 → 0.01 (+0.01)" in said, said
        # The fit line speaks of the preview above it (the trimmed guarantee), not the ask.
        assert (
            "With 0.01 GPU it fits: the pool would be 1 of 1 GPU guaranteed (1.49 as asked)."
            in (said)
        )
        assert "Does not fit" not in said
        assert re.search(r'name="gpu_quota" value="0.01"', card), "the form starts from it"
        assert re.search(r"<button[^>]*disabled[^>]*>Approve as asked", card)
        why = admin.get(f"/admin/requests/{rid}/why", headers={"HX-Request": "true"}).text
        steps = [words(s) for s in re.findall(r"<li data-why-step>(.*?)</li>", why)]
        assert "Guarantees first: speech gets 0.01 (its guarantee is 0.01); the other 3 " in (
            " ".join(steps)
        )
        assert 'data-account-part="busy"' in why
        assert 'data-account-part="now"' not in why, "a new team runs nothing yet"


def test_the_preview_follows_the_values_as_they_are_typed(db_url: str) -> None:
    for app in portal(db_url):
        rid = _speech_asks(app)
        admin = client_for(app, "admin@example.org", admin=True)
        typed = {
            "csrf_token": admin.csrf,
            "mode": "adjusted",
            "gpu_quota": "0.01",
            "gpu_limit": "0.5",
            "over_quota_weight": "2",
            "priority": "100",
        }
        htmx = {"HX-Request": "true"}
        live = admin.post(f"/admin/requests/{rid}/preview", data=typed, headers=htmx).text
        assert "<html" not in live
        said = words(live)
        assert "If approved with these values (guarantee 0.01, limit 0.5)" in said
        assert "Fits: the pool would be 1 of 1 GPU guaranteed." in said
        assert "does not fit" not in said
        why = re.search(r'hx-get="(/admin/requests/\d+/why\?[^"]+)"', live)
        assert why is not None
        assert "over_quota_weight=2" in html.unescape(why.group(1))
        account = admin.get(html.unescape(why.group(1)), headers=htmx).text
        assert "speech gets 0.01 (its guarantee is 0.01)" in words(account)
        bad = admin.post(
            f"/admin/requests/{rid}/preview", data=typed | {"gpu_limit": "lots"}, headers=htmx
        ).text
        assert 'data-review="errors"' in bad
        assert "stale" in bad
        assert "GPU limit:" in words(bad)
        assert "If approved" not in bad, "no figures for values that do not parse"
        plain = admin.post(f"/admin/requests/{rid}/preview", data=typed)
        assert "<html" in plain.text, "without JavaScript: the whole page"
        card = card_of(plain.text, rid)
        assert "<details open>" in card
        assert 'name="gpu_limit" value="0.5"' in card


def test_a_refused_approval_keeps_the_form_its_values_and_the_note(db_url: str) -> None:
    for app in portal(db_url):
        rid = _speech_asks(app)
        admin = client_for(app, "admin@example.org", admin=True)
        refused = admin.form(
            f"/admin/requests/{rid}/approve",
            {
                "mode": "adjusted",
                "gpu_quota": "0.2",
                "gpu_limit": "0.75",
                "over_quota_weight": "1",
                "priority": "100",
                "reason": "trimmed to fit",
            },
        )
        assert refused.status_code == 409
        card = card_of(refused.text, rid)
        assert "<details open>" in card
        assert 'name="gpu_quota" value="0.2"' in card
        assert 'name="gpu_limit" value="0.75"' in card
        assert 'value="trimmed to fit"' in card
        refusal = re.search(r'data-review="refused">([^<]+)<', card)
        assert refusal is not None
        assert "Not approved:" in refusal.group(1)
        assert "0.01 GPU is free" in refusal.group(1)
        assert admin.get(f"/api/v1/requests/{rid}").json()["status"] == "submitted"


def test_the_what_if_tells_a_teams_division_after_the_changes(db_url: str) -> None:
    """The design source's three teams on a pool of 2, all busy: KAI hands whole GPUs out
    in rounds, and the leftovers go to the oldest queue — the account says so."""
    for app in portal(db_url, simulated_cluster_gpus=2):
        backend = portal_of(app).backend
        assert isinstance(backend, SimulatedBackend)
        for team in ("nlp", "vision", "recommender"):
            backend.pin_usage(team, allocated=0.33, requested=1.0)
        admin = client_for(app, "admin@example.org", admin=True)
        page = admin.form("/admin/what-if", {"pool": "2", "explain_now": "1"}).text
        results = page[page.index('id="whatif-results"') :]
        panel = results[results.index('id="whatif-why"') :]
        panel = panel[panel.index(">") + 1 :]
        said = words(panel)
        assert said.startswith("nlp after these changes, step by step With today's demand")
        assert "Guarantees first: nlp gets 0.33 (its guarantee is 0.33); the other 2 queues " in (
            said
        )
        assert "KAI hands out whole GPUs in a round" in said
        assert "ties to the older queue" in said
        assert "KAI settles this the same way in every cycle" in said
        result = re.findall(r"data-why-result>([^<]+)<", panel)
        figure = re.search(r'data-whatif-result="nlp".*?data-whatif="now">([^<]+)<', results, re.S)
        assert figure is not None
        assert result[1] == figure.group(1) + " GPU"
        assert 'name="explain" value="1"' in page, "kept for the next keystroke"
        again = admin.post(
            "/admin/what-if",
            data={"csrf_token": admin.csrf, "pool": "2", "explain": "1", "q_2": "0.2"},
            headers={"HX-Request": "true"},
        ).text
        assert 'id="whatif-why"' in again
        assert 'id="whatif-why"' not in admin.form("/admin/what-if", {"pool": "2"}).text


def test_the_quota_change_form_shows_current_to_new_the_pool_and_what_kai_may_take_back(
    db_url: str,
) -> None:
    for app in portal(db_url):
        backend = portal_of(app).backend
        assert isinstance(backend, SimulatedBackend)
        backend.pin_usage("nlp", allocated=0.9, requested=0.9)
        for team in ("vision", "recommender"):
            backend.pin_usage(team, allocated=0.0, requested=0.0)
        lead = client_for(app, "lead-nlp@example.org")
        opened = lead.get("/teams/1/quota").text
        assert "GPU guarantee 0.33 (no change)" in words(opened)
        typed = {
            "csrf_token": lead.csrf,
            "gpu_quota": "0.1",
            "gpu_limit": "0.3",
            "over_quota_weight": "1",
            "priority": "100",
            "cpu_quota": "",
            "memory_quota": "",
        }
        live = lead.post("/teams/1/quota/validate", data=typed, headers={"HX-Request": "true"})
        said = words(live.text)
        assert "<html" not in live.text
        assert "GPU guarantee 0.33 → 0.1" in said
        assert "GPU limit 1 → 0.3" in said
        assert "Queue priority 100 (no change)" in said
        assert "Fits: 0.24 GPU stays unguaranteed after approval." in said
        assert (
            "nlp uses 0.9 GPU now: after this change KAI may take back 0.6 GPU of its running "
            "work when other teams ask for their share." in said
        )
        assert "vision" not in said, "a lead sees no other team's figures"
        over = lead.post(
            "/teams/1/quota/validate",
            data=typed | {"gpu_quota": "0.9", "gpu_limit": "1"},
            headers={"HX-Request": "true"},
        )
        assert "Over the pool by 0.56 GPU: an admin can approve at most 0.34 GPU" in words(
            over.text
        )
        bad = lead.post(
            "/teams/1/quota/validate",
            data=typed | {"gpu_limit": "0.05"},
            headers={"HX-Request": "true"},
        ).text
        assert 'id="err-gpu_limit"' in bad
        assert "cannot be below the guarantee" in bad
        assert "Fix the values marked in the form" in words(bad)
