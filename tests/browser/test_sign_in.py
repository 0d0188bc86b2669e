"""Single sign-on in a real headless Chromium: portal -> provider's page -> portal."""

from __future__ import annotations

import re
from collections.abc import Iterator

import httpx
import pytest

from tests.browser.conftest import CHROMIUM, CHROMIUM_ARGS
from tests.servers import free_port, oidc_provider, portal_process

pytestmark = pytest.mark.browser


@pytest.fixture(scope="module")
def sso_portal(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, str]]:
    folder = tmp_path_factory.mktemp("sso")
    with oidc_provider() as provider:
        port = free_port()
        base = f"http://localhost:{port}"
        env = {
            "PORTAL_SECRET_KEY": "browser-test-secret-key-0123456789",
            "PORTAL_DATABASE_URL": f"sqlite:///{folder / 'portal.db'}",
            "PORTAL_PUBLIC_URL": base,
            "PORTAL_OIDC_ISSUER": provider,
            "PORTAL_OIDC_CLIENT_ID": "gpu-portal",
            "PORTAL_OIDC_CLIENT_SECRET": "browser-test-client-secret",
            "PORTAL_OIDC_PROVIDER_NAME": "Mock IdP",
            "AUTHLIB_INSECURE_TRANSPORT": "1",
        }
        with portal_process(folder, port, env):
            yield base, provider


def test_sign_in_through_the_provider_and_out(sso_portal: tuple[str, str]) -> None:
    from playwright.sync_api import expect, sync_playwright

    base, provider = sso_portal
    claims = {"email": "lead-nlp@example.org", "name": "Ana Lead", "groups": ["gpu-team-nlp"]}
    assert httpx.put(f"{provider}/users/u-ana", json=claims, timeout=10).status_code == 204
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        page = browser.new_page()
        page.set_default_timeout(15_000)
        page.goto(base + "/teams/1")
        expect(page).to_have_url(base + "/login?next=/teams/1")
        expect(page.locator("body")).not_to_contain_text("Development sign-in")
        page.click("text=Sign in with Mock IdP")
        expect(page).to_have_url(re.compile(re.escape(provider) + "/oauth2/authorize"))
        page.fill("input[name=sub]", "u-ana")
        page.click("button:has-text('Authorize')")
        expect(page).to_have_url(base + "/teams/1")
        expect(page.locator("h1")).to_contain_text("nlp")
        expect(page.locator(".chip")).to_contain_text("Ana Lead · team lead")
        page.goto(base + "/teams/2")
        expect(page.locator("h1")).to_contain_text("Not found")
        page.goto(base + "/teams/1")
        page.click("text=Sign out")
        expect(page).to_have_url(re.compile(re.escape(provider) + "/oauth2/end_session"))
        page.goto(base + "/teams/1")
        expect(page).to_have_url(base + "/login?next=/teams/1")
        browser.close()
