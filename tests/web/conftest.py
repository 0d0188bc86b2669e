"""A portal app per test (worker off: tests drive the reconciler) and signed-in clients."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from collections.abc import Iterator, Mapping
from typing import Any

import httpx
import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient

from app.auth import repository as users
from app.auth import tokens
from app.core.config import PROJECT_ROOT
from app.core.db import unit_of_work
from app.main import create_app
from app.runtime import portal_of
from app.teams import members
from app.teams import repository as repo
from app.teams.seed import seed_example
from tests.conftest import settings_for

META_CSRF = re.compile(r'<meta name="csrf-token" content="([^"]+)">')


class Client(TestClient):
    """A browser-like client: keeps cookies and knows the page's CSRF token."""

    csrf: str = ""

    def refresh_csrf(self) -> str:
        found = META_CSRF.search(self.get("/login").text)
        assert found, "the sign-in page carries a CSRF token"
        self.csrf = found.group(1)
        return self.csrf

    def sign_in(self, email: str, *, admin: bool = False) -> Client:
        self.refresh_csrf()
        response = self.post(
            "/login/dev",
            data={"csrf_token": self.csrf, "email": email, "role": "admin" if admin else "lead"},
            follow_redirects=False,
        )
        assert response.status_code == 303, response.text
        self.refresh_csrf()
        return self

    def form(self, url: str, data: dict[str, str] | None = None, **kw: Any) -> httpx.Response:
        response: httpx.Response = self.post(
            url, data={"csrf_token": self.csrf, **(data or {})}, **kw
        )
        return response

    def api(self, method: str, url: str, json: Any = None) -> httpx.Response:
        response: httpx.Response = self.request(
            method, url, json=json, headers={"X-CSRF-Token": self.csrf}
        )
        return response


@pytest.fixture
def app(db_url: str) -> Iterator[FastAPI]:
    application = create_app(settings_for(db_url))
    with TestClient(application):  # runs the lifespan
        with unit_of_work(portal_of(application).session_factory) as session:
            seed_example(session)
            nlp = repo.get_team(session, 1)
            lead = users.get_user_by_email(session, "lead-nlp@example.org")
            assert nlp.name == "nlp"
            assert lead is not None
            member = members.add(
                session, actor=lead, team=nlp, email="member-nlp@example.org", role="member"
            )
            assert member.user_id == 5
            tokens.create(session, user=lead, name="lead's token", days=30, max_days=90)
        portal_of(application).reconciler.run_once()
        yield application


def client_for(app: FastAPI, email: str | None = None, *, admin: bool = False) -> Client:
    client = Client(app, base_url="http://testserver")
    if email:
        client.sign_in(email, admin=admin)
    return client


@pytest.fixture
def admin(app: FastAPI) -> Client:
    return client_for(app, "admin@example.org", admin=True)


@pytest.fixture
def lead(app: FastAPI) -> Client:
    return client_for(app, "lead-nlp@example.org")


@pytest.fixture
def other_lead(app: FastAPI) -> Client:
    return client_for(app, "lead-vision@example.org")


@pytest.fixture
def anonymous(app: FastAPI) -> Client:
    return client_for(app)


PUBLIC = "https://gpu.example.org"


def portal_command(
    db_url: str, *args: str, settings: Mapping[str, str], log: bool = False
) -> subprocess.Popen[str]:
    """`gpu-portal <args>` in its own process, in development on ``db_url`` at PUBLIC,
    with these settings (PORTAL_<NAME>); its output piped when ``log``, else dropped."""
    env = {
        **os.environ,
        "PORTAL_DEVELOPMENT": "true",
        "PORTAL_DATABASE_URL": db_url,
        "PORTAL_PUBLIC_URL": PUBLIC,
        **{f"PORTAL_{name.upper()}": value for name, value in settings.items()},
    }
    return subprocess.Popen(
        [sys.executable, "-m", "app.cli", *args],
        cwd=PROJECT_ROOT,
        env=env,
        stdout=subprocess.PIPE if log else subprocess.DEVNULL,
        stderr=subprocess.STDOUT if log else subprocess.DEVNULL,
        text=True,
    )


def portal(db_url: str, **overrides: object) -> Iterator[FastAPI]:
    """A seeded portal with these settings (and PUBLIC as its address), lifespan running."""
    application = create_app(settings_for(db_url, public_url=PUBLIC, **overrides))
    with TestClient(application):
        with unit_of_work(portal_of(application).session_factory) as session:
            seed_example(session)
        portal_of(application).reconciler.run_once()
        yield application


def set_hook(client: Client, base: str, kind: str, url: str) -> str:
    """Save a webhook through its page; the signing secret shown once (JSON), else ""."""
    page = client.form(base, {"kind": kind, "url": url})
    assert page.status_code == 200, page.text
    found = re.search(r'data-testid="signing-secret">([^<]+)<', page.text)
    return found.group(1) if found else ""
