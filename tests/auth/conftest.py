"""A real OpenID provider process and a portal configured to trust it."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any
from urllib.parse import parse_qs, urlencode, urlsplit

import httpx
import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient

from app.core.db import unit_of_work
from app.main import create_app
from app.runtime import portal_of
from app.teams.seed import seed_example
from tests.conftest import settings_for
from tests.servers import oidc_provider
from tests.web.conftest import Client

CLIENT_ID = "gpu-portal"
SECRET = "client-secret-for-tests"
PORTAL = "https://portal.test"


@pytest.fixture(scope="session")
def provider() -> Iterator[str]:
    with oidc_provider() as url:
        yield url


@pytest.fixture(autouse=True)
def _insecure_transport_for_loopback(monkeypatch: pytest.MonkeyPatch) -> None:
    # The provider runs on plain HTTP on loopback; authlib refuses that unless told.
    monkeypatch.setenv("AUTHLIB_INSECURE_TRANSPORT", "1")


def set_user(provider: str, sub: str, **claims: Any) -> None:
    response = httpx.put(f"{provider}/users/{sub}", json=claims, timeout=10)
    assert response.status_code == 204, response.text


def oidc_settings(db_url: str, issuer: str, **overrides: Any) -> Any:
    return settings_for(
        db_url,
        development=False,
        secret_key="a-long-random-secret-for-tests",
        oidc_issuer=issuer,
        oidc_client_id=CLIENT_ID,
        oidc_client_secret=SECRET,
        oidc_provider_name="Test IdP",
        **overrides,
    )


@pytest.fixture
def oidc_app(db_url: str, provider: str) -> Iterator[FastAPI]:
    application = create_app(oidc_settings(db_url, provider))
    with TestClient(application):
        with unit_of_work(portal_of(application).session_factory) as session:
            seed_example(session)
        portal_of(application).reconciler.run_once()
        yield application


def browser(app: FastAPI) -> Client:
    return Client(app, base_url=PORTAL)


def start(client: Client, next_path: str = "/") -> tuple[str, dict[str, str]]:
    """Begin sign-in at the portal; return the provider URL and its query parameters."""
    response = client.get(f"/auth/start?next={next_path}", follow_redirects=False)
    assert response.status_code == 303, response.text
    location = response.headers["location"]
    query = {k: v[0] for k, v in parse_qs(urlsplit(location).query).items()}
    return location, query


def authorize(authorize_url: str, sub: str) -> dict[str, str]:
    """Play the user at the provider's page: submit the subject, follow back."""
    response = httpx.post(authorize_url, data={"sub": sub}, follow_redirects=False, timeout=10)
    assert response.status_code == 302, response.text
    back = response.headers["location"]
    assert back.startswith(PORTAL + "/auth/callback"), back
    return {k: v[0] for k, v in parse_qs(urlsplit(back).query).items()}


def sign_in(client: Client, sub: str, next_path: str = "/") -> httpx.Response:
    url, _ = start(client, next_path)
    callback = authorize(url, sub)
    response: httpx.Response = client.get("/auth/callback", params=callback, follow_redirects=False)
    return response


def provider_tokens(
    provider: str,
    *,
    client_id: str = CLIENT_ID,
    sub: str,
    nonce: str = "n",
    scope: str = "openid email profile",
) -> dict[str, Any]:
    """Run the code flow as ``client_id`` directly against the provider; its tokens."""
    redirect = "https://portal.test/auth/callback"
    authorize_url = f"{provider}/oauth2/authorize?" + urlencode(
        {
            "client_id": client_id,
            "response_type": "code",
            "scope": scope,
            "redirect_uri": redirect,
            "state": "s",
            "nonce": nonce,
        }
    )
    got = httpx.post(authorize_url, data={"sub": sub}, follow_redirects=False, timeout=10)
    code = parse_qs(urlsplit(got.headers["location"]).query)["code"][0]
    tokens: dict[str, Any] = httpx.post(
        f"{provider}/oauth2/token",
        data={
            "grant_type": "authorization_code",
            "code": code,
            "redirect_uri": redirect,
            "client_id": client_id,
            "client_secret": "x",
        },
        timeout=10,
    ).json()
    return tokens
