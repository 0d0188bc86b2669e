"""Single sign-on against a real OpenID provider process over HTTP."""

from __future__ import annotations

import base64
import json
import threading
from datetime import timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import urlencode, urlsplit

import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient
from sqlalchemy import select, update

from app.adapters.oidc import OidcClient, OidcError
from app.core.models import AuditEvent, WebSession, utcnow
from app.main import create_app
from app.runtime import portal_of
from tests.auth.conftest import (
    CLIENT_ID,
    PORTAL,
    authorize,
    browser,
    oidc_settings,
    provider_tokens,
    set_user,
    sign_in,
    start,
)
from tests.parts import oidc_client
from tests.servers import free_port, oidc_provider


def audit_actions(app: FastAPI) -> list[str]:
    with portal_of(app).session_factory() as session:
        return list(session.scalars(select(AuditEvent.action).order_by(AuditEvent.id)))


def test_the_request_carries_pkce_state_and_nonce(oidc_app: FastAPI, provider: str) -> None:
    url, query = start(browser(oidc_app))
    assert url.startswith(provider + "/oauth2/authorize?")
    assert query["client_id"] == CLIENT_ID
    assert query["response_type"] == "code"
    assert query["redirect_uri"] == PORTAL + "/auth/callback"
    assert query["code_challenge_method"] == "S256"
    assert len(query["code_challenge"]) == 43
    assert len(query["state"]) >= 32
    assert len(query["nonce"]) >= 32
    assert set(query["scope"].split()) == {"openid", "email", "profile"}


def test_admin_signs_in_through_the_provider(oidc_app: FastAPI, provider: str) -> None:
    set_user(provider, "u-admin", email="ops@example.org", name="Ops", groups=["gpu-portal-admins"])
    client = browser(oidc_app)
    response = sign_in(client, "u-admin", next_path="/admin")
    assert response.status_code == 303
    assert response.headers["location"] == "/admin"
    assert "secure" in response.headers["set-cookie"].lower()
    page = client.get("/admin")
    assert page.status_code == 200
    assert "Ops · admin" in page.text
    assert "Development mode" not in page.text
    assert "auth.signed_in" in audit_actions(oidc_app)


def test_team_membership_follows_the_groups(oidc_app: FastAPI, provider: str) -> None:
    set_user(provider, "u-lead", email="ana@example.org", name="Ana", groups=["gpu-team-nlp"])
    client = browser(oidc_app)
    sign_in(client, "u-lead")
    assert client.get("/teams/1").status_code == 200
    assert client.get("/teams/2").status_code == 404
    assert client.get("/admin").status_code == 403
    assert client.get("/api/v1/me").json()["lead_of"] == [1]

    # The provider moves Ana to vision: the next sign-in follows.
    set_user(provider, "u-lead", email="ana@example.org", name="Ana", groups=["/gpu-team-vision"])
    again = browser(oidc_app)
    sign_in(again, "u-lead")
    assert again.get("/api/v1/me").json()["lead_of"] == [2]
    assert again.get("/teams/1").status_code == 404


def test_people_added_by_email_are_linked_at_first_sign_in(
    oidc_app: FastAPI, provider: str
) -> None:
    lead = browser(oidc_app)
    set_user(provider, "u-lead", email="ana@example.org", groups=["gpu-team-nlp"])
    sign_in(lead, "u-lead")
    lead.refresh_csrf()
    added = lead.api("POST", "/api/v1/teams/1/members", {"email": "Bo@Example.org"})
    assert added.status_code == 201, added.text
    set_user(provider, "u-bo", email="bo@example.org", name="Bo", groups=[])
    bo = browser(oidc_app)
    sign_in(bo, "u-bo")
    assert bo.get("/api/v1/me").json()["member_of"] == [1]
    bo.refresh_csrf()
    assert bo.api("POST", "/api/v1/teams/1/kubeconfig").status_code == 200


@pytest.mark.parametrize(
    ("tamper", "reason"),
    [
        (lambda q: {**q, "state": q["state"][:-2] + "xx"}, "state does not match"),
        (lambda q: {k: v for k, v in q.items() if k != "state"}, "state does not match"),
        (lambda q: {"error": "access_denied", "state": q["state"]}, "said access_denied"),
        (lambda q: {**q, "code": "forged-code"}, "refused the sign-in"),
    ],
)
def test_tampered_callbacks_are_refused(
    oidc_app: FastAPI, provider: str, tamper: object, reason: str
) -> None:
    set_user(provider, "u-admin", email="ops@example.org", groups=["gpu-portal-admins"])
    client = browser(oidc_app)
    url, _ = start(client)
    callback = authorize(url, "u-admin")
    response = client.get("/auth/callback", params=tamper(callback), follow_redirects=False)  # type: ignore[operator]
    assert response.status_code == 400
    assert "Sign-in failed" in response.text
    assert reason in response.text
    assert client.get("/admin", follow_redirects=False).status_code == 303, "no access"
    assert audit_actions(oidc_app)[-1] == "auth.sign_in_failed"


def test_a_callback_is_used_once(oidc_app: FastAPI, provider: str) -> None:
    client = browser(oidc_app)
    url, _ = start(client)
    callback = authorize(url, "u-someone")
    assert client.get("/auth/callback", params=callback, follow_redirects=False).status_code == 303
    client.cookies.clear()
    replay = client.get("/auth/callback", params=callback, follow_redirects=False)
    assert replay.status_code == 400


def test_wrong_nonce_is_refused(oidc_app: FastAPI, provider: str) -> None:
    client = browser(oidc_app)
    url, query = start(client)
    forged = url.split("?")[0] + "?" + urlencode({**query, "nonce": "attacker-chosen"})
    callback = authorize(forged, "u-admin")
    response = client.get("/auth/callback", params=callback, follow_redirects=False)
    assert response.status_code == 400
    assert "nonce" in response.text
    assert client.get("/teams", follow_redirects=False).status_code == 303


def test_code_issued_to_another_client_is_refused(oidc_app: FastAPI, provider: str) -> None:
    client = browser(oidc_app)
    url, query = start(client)
    forged = url.split("?")[0] + "?" + urlencode({**query, "client_id": "another-app"})
    callback = authorize(forged, "u-admin")
    response = client.get("/auth/callback", params=callback, follow_redirects=False)
    assert response.status_code == 400
    assert client.get("/teams", follow_redirects=False).status_code == 303


def provider_id_token(provider: str, *, client_id: str, sub: str, nonce: str) -> str:
    tokens = provider_tokens(
        provider, client_id=client_id, sub=sub, nonce=nonce, scope="openid email"
    )
    return str(tokens["id_token"])


def test_id_token_for_another_audience_is_refused(provider: str, db_url: str) -> None:
    client = OidcClient(oidc_settings(db_url, provider).oidc)
    mine = provider_id_token(provider, client_id=CLIENT_ID, sub="u1", nonce="n1")
    assert client.verify_id_token(mine, nonce="n1")["sub"] == "u1"
    theirs = provider_id_token(provider, client_id="another-app", sub="u1", nonce="n1")
    with pytest.raises(OidcError, match="aud"):
        client.verify_id_token(theirs, nonce="n1")
    tampered = mine[:-4] + ("AAAA" if not mine.endswith("AAAA") else "BBBB")
    with pytest.raises(OidcError, match="signature"):
        client.verify_id_token(tampered, nonce="n1")


def test_expired_id_token_is_refused(db_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    with oidc_provider("--token-max-age", "-120") as stale:
        app = create_app(oidc_settings(db_url, stale))
        with TestClient(app):
            client = browser(app)
            response = sign_in(client, "u-late")
            assert response.status_code == 400
            assert "expired" in response.text
            assert client.get("/teams", follow_redirects=False).status_code == 303


def test_provider_down_is_explained(db_url: str) -> None:
    app = create_app(oidc_settings(db_url, f"http://127.0.0.1:{free_port()}"))
    with TestClient(app):
        client = browser(app)
        response = client.get("/auth/start", follow_redirects=False)
        assert response.status_code == 502
        assert "could not be reached" in response.text
        assert client.get("/teams", follow_redirects=False).status_code == 303


def test_sign_out_ends_the_session_here_and_at_the_provider(
    oidc_app: FastAPI, provider: str
) -> None:
    client = browser(oidc_app)
    sign_in(client, "u-someone")
    stolen = dict(client.cookies)
    client.refresh_csrf()
    response = client.form("/logout", follow_redirects=False)
    assert response.status_code == 303
    target = urlsplit(response.headers["location"])
    assert f"{target.scheme}://{target.netloc}{target.path}" == provider + "/oauth2/end_session"
    assert "post_logout_redirect_uri=https%3A%2F%2Fportal.test%2Flogin" in target.query
    replay = browser(oidc_app)
    replay.cookies.update(stolen)
    assert replay.get("/teams", follow_redirects=False).status_code == 303, "revoked server-side"


def test_sessions_expire_when_idle_and_when_old(oidc_app: FastAPI, provider: str) -> None:
    client = browser(oidc_app)
    sign_in(client, "u-someone")
    assert client.get("/teams").status_code == 200
    # A team page reads its caller in its own statement: signed in, not one of its people.
    assert client.get("/teams/1", follow_redirects=False).status_code == 404
    factory = portal_of(oidc_app).session_factory
    with factory() as session, session.begin():
        session.execute(update(WebSession).values(last_seen_at=utcnow() - timedelta(hours=2)))
    assert client.get("/teams/1", follow_redirects=False).status_code == 303, "idle, on a team"
    assert client.get("/teams", follow_redirects=False).status_code == 303, "idle"

    sign_in(client, "u-someone")
    with factory() as session, session.begin():
        session.execute(update(WebSession).values(expires_at=utcnow() - timedelta(seconds=1)))
    assert client.get("/teams", follow_redirects=False).status_code == 303, "absolute"


def test_sign_in_rotates_the_session(oidc_app: FastAPI, provider: str) -> None:
    client = browser(oidc_app)
    sign_in(client, "u-someone")
    before = dict(client.cookies)
    sign_in(client, "u-someone")
    assert dict(client.cookies) != before
    old = browser(oidc_app)
    old.cookies.update(before)
    assert old.get("/teams", follow_redirects=False).status_code == 303
    with portal_of(oidc_app).session_factory() as session:
        rows = session.scalars(select(WebSession)).all()
        assert [r.revoked_at is not None for r in rows] == [True, False]


def test_development_sign_in_is_off_outside_development(oidc_app: FastAPI) -> None:
    client = browser(oidc_app)
    page = client.get("/login").text
    assert "Sign in with Test IdP" in page
    assert "Development sign-in" not in page
    client.refresh_csrf()
    response = client.form("/login/dev", {"email": "x@example.org", "role": "admin"})
    assert response.status_code == 403


def test_sign_out_redirect_is_allowed_by_the_csp(oidc_app: FastAPI, provider: str) -> None:
    csp = browser(oidc_app).get("/login").headers["content-security-policy"]
    assert f"form-action 'self' {provider}" in csp


def _with_header(token: str, **header: str) -> str:
    """The same token with its header's fields replaced (the signature no longer matches)."""
    head, payload, signature = token.split(".")
    fields = json.loads(base64.urlsafe_b64decode(head + "=" * (-len(head) % 4)))
    fields.update(header)
    encoded = base64.urlsafe_b64encode(json.dumps(fields).encode()).rstrip(b"=").decode()
    return f"{encoded}.{payload}.{signature}"


def test_bad_bearer_tokens_do_not_make_the_portal_download_keys(
    oidc_app: FastAPI, provider: str
) -> None:
    """Anyone can send tokens without signing in: a bad signature never refetches the
    provider's keys, and a token with an unknown key id refetches them once per interval."""
    good = provider_id_token(provider, client_id=CLIENT_ID, sub="u1", nonce="n1")
    client = oidc_client(oidc_app)
    anonymous = browser(oidc_app)
    bad_signature = good[:-4] + ("AAAA" if not good.endswith("AAAA") else "BBBB")
    for _ in range(5):
        response = anonymous.get("/api/v1/me", headers={"Authorization": f"Bearer {bad_signature}"})
        assert response.status_code == 401
        assert "signature" in response.json()["detail"]
    assert client.key_downloads == 1
    unknown_key = _with_header(good, kid="rotated-away")
    for _ in range(5):
        response = anonymous.get("/api/v1/me", headers={"Authorization": f"Bearer {unknown_key}"})
        assert response.status_code == 401
    assert client.key_downloads == 2


class _NotJsonProvider(BaseHTTPRequestHandler):
    """A provider whose token introspection answers with an HTML error page."""

    def do_POST(self) -> None:
        self.do_GET()

    def do_GET(self) -> None:
        assert isinstance(self.server, ThreadingHTTPServer)
        issuer = f"http://127.0.0.1:{self.server.server_port}"
        if self.path == "/.well-known/openid-configuration":
            body = json.dumps(
                {
                    "issuer": issuer,
                    "userinfo_endpoint": issuer + "/userinfo",
                    "introspection_endpoint": issuer + "/introspect",
                }
            )
            kind = "application/json"
        else:
            body, kind = "<html><body>Bad gateway</body></html>", "text/html"
        self.send_response(200)
        self.send_header("Content-Type", kind)
        self.end_headers()
        self.wfile.write(body.encode())

    def log_message(self, *args: object) -> None:
        pass


def test_an_introspection_that_is_not_json_is_a_clear_502(db_url: str) -> None:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _NotJsonProvider)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        app = create_app(oidc_settings(db_url, f"http://127.0.0.1:{server.server_port}"))
        with TestClient(app):
            response = browser(app).get(
                "/api/v1/me", headers={"Authorization": "Bearer an-opaque-token"}
            )
        assert response.status_code == 502
        assert response.json()["detail"] == (
            "the access token could not be checked: "
            "the identity provider's introspection answer is not JSON"
        )
    finally:
        server.shutdown()
