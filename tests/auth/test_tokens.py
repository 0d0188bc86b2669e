"""Bearer access: personal API tokens and the provider's access tokens."""

from __future__ import annotations

import base64
import re
from datetime import timedelta

import httpx
from fastapi import FastAPI
from sqlalchemy import select, text, update

from app.core.models import ApiToken, AuditEvent, utcnow
from app.runtime import portal_of
from tests.auth.conftest import CLIENT_ID, browser, provider_tokens, set_user, sign_in
from tests.web.conftest import Client


def bearer(app: FastAPI, token: str) -> Client:
    client = Client(app, base_url="https://portal.test")
    client.headers["Authorization"] = f"Bearer {token}"
    return client


def test_personal_token_lifecycle(oidc_app: FastAPI, provider: str) -> None:
    set_user(provider, "u-lead", email="ana@example.org", groups=["gpu-team-nlp"])
    web = browser(oidc_app)
    sign_in(web, "u-lead")
    web.refresh_csrf()
    page = web.form("/tokens", {"name": "ci-pipeline", "days": "7"})
    assert page.status_code == 200
    assert page.headers["cache-control"] == "no-store"
    raw = re.search(r'<pre id="new-token"[^>]*><code>(gpp_[^<]+)</code>', page.text).group(1)  # type: ignore[union-attr]
    assert raw not in web.get("/tokens").text, "shown once"

    with portal_of(oidc_app).session_factory() as session:
        stored = session.scalars(select(ApiToken)).one()
        assert stored.token_hash != raw
        assert raw not in stored.token_hash
        dump = " ".join(str(r) for r in session.execute(text("SELECT * FROM api_tokens")).all())
        assert raw not in dump, "never stored in clear"

    api = bearer(oidc_app, raw)
    assert api.get("/api/v1/me").json()["lead_of"] == [1]
    # Unsafe calls with a bearer token need no CSRF token: no browser sends it by itself.
    change = api.post("/api/v1/teams/1/quota-requests", json={"gpu_quota": "0.2", "gpu_limit": "1"})
    assert change.status_code == 201, change.text
    assert api.get("/api/v1/teams/2").status_code == 404, "acts with the owner's rights"

    listed = api.get("/api/v1/tokens").json()
    assert [t["name"] for t in listed] == ["ci-pipeline"]
    assert "token" not in listed[0]
    assert api.delete(f"/api/v1/tokens/{listed[0]['id']}").json()["revoked"] is True
    refused = api.get("/api/v1/me")
    assert refused.status_code == 401
    assert refused.json()["detail"] == "the API token is unknown, revoked or expired"
    assert refused.headers["www-authenticate"].startswith("Bearer")

    with portal_of(oidc_app).session_factory() as session:
        actions = set(session.scalars(select(AuditEvent.action)))
    assert {"token.created", "token.used", "token.revoked"} <= actions


def test_expired_and_unknown_tokens_are_refused(oidc_app: FastAPI, provider: str) -> None:
    web = browser(oidc_app)
    sign_in(web, "u-someone")
    web.refresh_csrf()
    created = web.api("POST", "/api/v1/tokens", {"name": "short", "days": 1}).json()
    assert bearer(oidc_app, created["token"]).get("/api/v1/me").status_code == 200
    with portal_of(oidc_app).session_factory() as session, session.begin():
        session.execute(update(ApiToken).values(expires_at=utcnow() - timedelta(seconds=1)))
    assert bearer(oidc_app, created["token"]).get("/api/v1/me").status_code == 401
    assert bearer(oidc_app, "gpp_made-up").get("/api/v1/me").status_code == 401
    too_long = web.api("POST", "/api/v1/tokens", {"name": "long", "days": 400})
    assert too_long.status_code == 422
    assert "from 1 to 90 days" in too_long.json()["errors"]["days"]


def test_opaque_tokens_are_refused_where_the_provider_cannot_introspect(
    oidc_app: FastAPI, provider: str
) -> None:
    """This provider's userinfo answers for a token issued to any application: it cannot
    vouch that a token was issued to the portal, so none of its opaque tokens is taken
    (tests/auth/test_introspection.py has a provider that can)."""
    set_user(provider, "u-bot", email="bot@example.org", groups=["gpu-portal-admins"])
    for client_id in (CLIENT_ID, "another-application"):
        token = str(provider_tokens(provider, client_id=client_id, sub="u-bot")["access_token"])
        userinfo = httpx.get(
            f"{provider}/userinfo", headers={"Authorization": f"Bearer {token}"}, timeout=10
        )
        assert userinfo.json()["groups"] == ["gpu-portal-admins"], "userinfo answers for it"
        refused = bearer(oidc_app, token).get("/api/v1/me")
        assert refused.status_code == 401
        assert refused.json()["detail"] == (
            "the access token was refused: the identity provider offers no token "
            "introspection, so an opaque access token cannot be checked as issued to the "
            "portal: use a portal API token (gpp_…) or have the provider issue JWT access "
            "tokens"
        )
        assert bearer(oidc_app, token).get("/api/v1/teams").status_code == 401


def test_the_portals_own_id_token_is_not_a_bearer(oidc_app: FastAPI, provider: str) -> None:
    set_user(provider, "u-bot", email="bot@example.org", groups=["gpu-portal-admins"])
    id_token = str(provider_tokens(provider, sub="u-bot")["id_token"])
    refused = bearer(oidc_app, id_token).get("/api/v1/me")
    assert refused.status_code == 401
    assert "it is an ID token" in refused.json()["detail"]


def test_cookie_requests_still_need_csrf(oidc_app: FastAPI, provider: str) -> None:
    web = browser(oidc_app)
    sign_in(web, "u-someone")
    response = web.post("/api/v1/tokens", json={"name": "x"})
    assert response.status_code == 403


def test_last_use_is_written_at_most_once_a_minute(oidc_app: FastAPI, provider: str) -> None:
    """Calls with one token do not queue on its row: a minute passes between writes."""
    set_user(provider, "u-lead", email="ana@example.org", groups=["gpu-team-nlp"])
    web = browser(oidc_app)
    sign_in(web, "u-lead")
    web.refresh_csrf()
    created = web.api("POST", "/api/v1/tokens", {"name": "ci", "days": 1}).json()
    api = bearer(oidc_app, created["token"])

    def last_used() -> object:
        with portal_of(oidc_app).session_factory() as session:
            return session.scalars(select(ApiToken.last_used_at)).one()

    assert api.get("/api/v1/me").status_code == 200
    first = last_used()
    assert first is not None
    for _ in range(5):
        assert api.get("/api/v1/me").status_code == 200
    assert last_used() == first
    with portal_of(oidc_app).session_factory() as session, session.begin():
        session.execute(update(ApiToken).values(last_used_at=utcnow() - timedelta(seconds=61)))
    assert api.get("/api/v1/me").status_code == 200
    assert last_used() != first


def test_reloading_the_new_token_page_creates_nothing_more(
    oidc_app: FastAPI, provider: str
) -> None:
    """Post/redirect/get: the secret is shown once, on the page the form redirects to."""
    set_user(provider, "u-lead", email="ana@example.org", groups=["gpu-team-nlp"])
    web = browser(oidc_app)
    sign_in(web, "u-lead")
    web.refresh_csrf()
    posted = web.form("/tokens", {"name": "ci", "days": "7"}, follow_redirects=False)
    assert posted.status_code == 303
    assert posted.headers["location"] == "/tokens"
    assert "gpp_" not in posted.text
    # The session cookie is signed, not encrypted: what it carries until the next page is
    # the encrypted secret, never the token itself.
    payload = str(web.cookies.get("portal_session")).split(".")[0]
    carried = base64.b64decode(payload + "=" * (-len(payload) % 4)).decode()
    assert "reveal:api-token" in carried
    assert "gpp_" not in carried
    shown = web.get("/tokens")
    raw = re.search(r'<pre id="new-token"[^>]*><code>(gpp_[^<]+)</code>', shown.text)
    assert raw is not None
    assert shown.headers["cache-control"] == "no-store"
    again = web.get("/tokens")
    assert raw.group(1) not in again.text
    with portal_of(oidc_app).session_factory() as session:
        assert len(session.scalars(select(ApiToken)).all()) == 1


def test_a_bearer_token_cannot_make_another(oidc_app: FastAPI, provider: str) -> None:
    """A token minted with a token would outlive its parent's revocation."""
    set_user(provider, "u-lead", email="ana@example.org", groups=["gpu-team-nlp"])
    web = browser(oidc_app)
    sign_in(web, "u-lead")
    web.refresh_csrf()
    parent = web.api("POST", "/api/v1/tokens", {"name": "parent", "days": 1}).json()
    api = bearer(oidc_app, parent["token"])
    child = api.post("/api/v1/tokens", json={"name": "child", "days": 90})
    assert child.status_code == 403
    assert "made from a signed-in session" in child.json()["detail"]
    names = [t["name"] for t in web.api("GET", "/api/v1/tokens").json()]
    assert names == ["parent"]


def test_a_bearer_header_does_not_skip_the_csrf_check_of_a_page(oidc_app: FastAPI) -> None:
    """Signing out (and the development sign-in) act on the browser's cookie, not on the
    bearer: a made-up Authorization header must not excuse a missing CSRF token."""
    web = browser(oidc_app)
    for path in ("/logout", "/login/dev"):
        answer = web.post(path, headers={"Authorization": "Bearer made-up"}, data={})
        assert answer.status_code == 403, (path, answer.text)
        assert "security token is missing" in answer.text
