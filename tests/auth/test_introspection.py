"""Bearer access tokens against a real provider that introspects tokens and issues JWT
access tokens (zitadel/oidc's example provider): a token is accepted only when it was
issued to the portal, and an ID token never is."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any
from urllib.parse import parse_qs, urlencode, urljoin, urlsplit

import httpx
import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient

from app.main import create_app
from tests.auth.conftest import PORTAL, browser
from tests.conftest import settings_for
from tests.servers import introspecting_provider
from tests.web.conftest import Client

CALLBACK = PORTAL + "/auth/callback"
EMAIL = "test-user@zitadel.ch"  # the example provider's first user


@pytest.fixture(scope="module")
def provider() -> Iterator[str]:
    with introspecting_provider(CALLBACK) as url:
        yield url


def tokens(provider: str, client_id: str) -> dict[str, Any]:
    """Sign in at the provider as its example user for ``client_id``: its tokens."""
    with httpx.Client(follow_redirects=False, timeout=10) as http:
        query = urlencode(
            {
                "client_id": client_id,
                "response_type": "code",
                "scope": "openid email profile",
                "redirect_uri": CALLBACK,
                "state": "s",
                "nonce": "n",
            }
        )
        login = urljoin(provider, http.get(f"{provider}auth?{query}").headers["location"])
        request_id = parse_qs(urlsplit(login).query)["authRequestID"][0]
        signed_in = http.post(
            f"{provider}login/username",
            data={"username": "test-user@localhost", "password": "verysecure", "id": request_id},
        )
        back = http.get(urljoin(provider, signed_in.headers["location"])).headers["location"]
        assert back.startswith(CALLBACK), back
        code = parse_qs(urlsplit(back).query)["code"][0]
        answer = http.post(
            f"{provider}oauth/token",
            data={"grant_type": "authorization_code", "code": code, "redirect_uri": CALLBACK},
            auth=(client_id, "secret"),
        )
        assert answer.status_code == 200, answer.text
        body: dict[str, Any] = answer.json()
        return body


def portal(db_url: str, provider: str, client_id: str) -> Iterator[FastAPI]:
    app = create_app(
        settings_for(
            db_url,
            development=False,
            secret_key="a-long-random-secret-for-tests",
            oidc_issuer=provider,
            oidc_client_id=client_id,
            oidc_client_secret="secret",
        )
    )
    with TestClient(app):
        yield app


@pytest.fixture
def web_portal(db_url: str, provider: str) -> Iterator[FastAPI]:
    yield from portal(db_url, provider, "web")


@pytest.fixture
def jwt_portal(db_url: str, provider: str) -> Iterator[FastAPI]:
    yield from portal(db_url, provider, "jwt-web")


def me(app: FastAPI, token: str) -> httpx.Response:
    client = Client(app, base_url=PORTAL)
    response: httpx.Response = client.get(
        "/api/v1/me", headers={"Authorization": f"Bearer {token}"}
    )
    return response


def test_an_opaque_token_issued_to_the_portal_is_accepted(
    web_portal: FastAPI, provider: str
) -> None:
    token = tokens(provider, "web")["access_token"]
    assert token.count(".") != 2, "the provider's access tokens for this client are opaque"
    answer = me(web_portal, token)
    assert answer.status_code == 200, answer.text
    assert answer.json()["email"] == EMAIL


def test_an_opaque_token_of_another_application_is_refused(
    web_portal: FastAPI, provider: str
) -> None:
    token = tokens(provider, "api")["access_token"]
    # The userinfo endpoint answers for it: that check alone let it in.
    userinfo = httpx.get(
        f"{provider}userinfo", headers={"Authorization": f"Bearer {token}"}, timeout=10
    )
    assert userinfo.status_code == 200
    assert userinfo.json()["email"] == EMAIL
    answer = me(web_portal, token)
    assert answer.status_code == 401
    assert answer.json()["detail"] == (
        "the access token was refused: "
        "the access token is invalid, expired or not issued to the portal"
    )


def test_the_portals_own_id_token_is_not_a_bearer(web_portal: FastAPI, provider: str) -> None:
    issued = tokens(provider, "web")
    answer = me(web_portal, issued["id_token"])
    assert answer.status_code == 401
    assert "it is an ID token" in answer.json()["detail"]
    assert me(web_portal, issued["access_token"]).status_code == 200


def test_jwt_access_tokens_for_the_portal_are_accepted_and_its_id_tokens_refused(
    jwt_portal: FastAPI, provider: str
) -> None:
    issued = tokens(provider, "jwt-web")
    assert issued["access_token"].count(".") == 2, "this client's access tokens are JWTs"
    answer = me(jwt_portal, issued["access_token"])
    assert answer.status_code == 200, answer.text
    refused = me(jwt_portal, issued["id_token"])
    assert refused.status_code == 401
    assert "it is an ID token" in refused.json()["detail"]


def test_a_jwt_for_another_application_is_refused(jwt_portal: FastAPI, provider: str) -> None:
    other = tokens(provider, "web")["id_token"]
    answer = me(jwt_portal, other)
    assert answer.status_code == 401
    assert "a claim does not match" in answer.json()["detail"]


def test_a_signed_in_browser_still_works_with_the_slash_ending_issuer(
    web_portal: FastAPI, provider: str
) -> None:
    """The provider's issuer ends in a slash: the ID token's `iss` is compared with the
    discovery document's issuer as it is written."""
    client = browser(web_portal)
    started = client.get("/auth/start?next=/", follow_redirects=False)
    assert started.status_code == 303
    with httpx.Client(follow_redirects=False, timeout=10) as http:
        login = urljoin(provider, http.get(started.headers["location"]).headers["location"])
        request_id = parse_qs(urlsplit(login).query)["authRequestID"][0]
        signed_in = http.post(
            f"{provider}login/username",
            data={"username": "test-user@localhost", "password": "verysecure", "id": request_id},
        )
        back = http.get(urljoin(provider, signed_in.headers["location"])).headers["location"]
    query = {k: v[0] for k, v in parse_qs(urlsplit(back).query).items()}
    done = client.get("/auth/callback", params=query, follow_redirects=False)
    assert done.status_code == 303, done.text
    assert client.get("/api/v1/me").json()["email"] == EMAIL
