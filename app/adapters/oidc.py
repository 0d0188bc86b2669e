"""OpenID Connect relying party: authorization code flow with PKCE, state and nonce.

Works with any standards-compliant provider (Keycloak, Dex, Entra ID, Google) from its
discovery document. ID tokens are verified here: signature against the provider's keys,
issuer, audience, expiry and nonce.
"""

from __future__ import annotations

import base64
import json
import secrets
import threading
import time
from typing import Any
from urllib.parse import urlencode

import httpx
from authlib.integrations.httpx_client import OAuth2Client
from joserfc import jwt
from joserfc.errors import JoseError
from joserfc.jwk import KeySet

from app.auth.provider import AuthorizationRequest, ProviderError
from app.core.config import OidcSettings

ALGORITHMS = ["RS256", "RS384", "RS512", "ES256", "ES384", "PS256"]
CACHE_SECONDS = 3600.0
# A token signed with a key we do not know may mean the provider rotated its keys: the key
# set is fetched again, but at most this often, so that unsigned-in callers sending made-up
# tokens cannot make the portal download it on every request.
KEYS_REFRESH_MIN_SECONDS = 60.0
LEEWAY_SECONDS = 30


class OidcError(ProviderError):
    """Sign-in could not be completed; the message is safe to show."""


class OidcClient:
    def __init__(self, settings: OidcSettings) -> None:
        assert settings.issuer
        self.settings = settings
        self.issuer = settings.issuer.rstrip("/")
        self._lock = threading.Lock()
        self._metadata: tuple[float, dict[str, Any]] | None = None
        self._keys: tuple[float, KeySet] | None = None
        self._keys_refreshed_at = float("-inf")
        self.key_downloads = 0
        self._userinfo: dict[str, tuple[float, dict[str, Any]]] = {}

    # --- provider documents ---------------------------------------------------------

    def _get_json(self, url: str) -> dict[str, Any]:
        try:
            response = httpx.get(url, timeout=self.settings.timeout_seconds)
            response.raise_for_status()
            body = response.json()
        except (httpx.HTTPError, json.JSONDecodeError) as exc:
            raise OidcError(
                f"the identity provider could not be reached ({type(exc).__name__}); "
                "try again in a moment",
                unavailable=True,
            ) from exc
        if not isinstance(body, dict):
            raise OidcError(
                "the identity provider answered with something unexpected", unavailable=True
            )
        return body

    def metadata(self) -> dict[str, Any]:
        with self._lock:
            if self._metadata and time.monotonic() - self._metadata[0] < CACHE_SECONDS:
                return self._metadata[1]
        url = self.settings.discovery_url or (self.issuer + "/.well-known/openid-configuration")
        body = self._get_json(url)
        if str(body.get("issuer", "")).rstrip("/") != self.issuer:
            raise OidcError("the identity provider's discovery document names another issuer")
        with self._lock:
            self._metadata = (time.monotonic(), body)
        return body

    def keys(self, *, refresh: bool = False) -> KeySet:
        with self._lock:
            if not refresh and self._keys and time.monotonic() - self._keys[0] < CACHE_SECONDS:
                return self._keys[1]
        self.key_downloads += 1
        keys = KeySet.import_key_set(self._get_json(self.metadata()["jwks_uri"]))  # type: ignore[arg-type]
        with self._lock:
            self._keys = (time.monotonic(), keys)
        return keys

    def _keys_for(self, raw: str) -> KeySet:
        """The cached keys, fetched again only for a key id they lack, and at most once
        per ``KEYS_REFRESH_MIN_SECONDS``."""
        keys = self.keys()
        kid = _key_id(raw)
        if kid is None or any(key.kid == kid for key in keys):
            return keys
        with self._lock:
            now = time.monotonic()
            due = now - self._keys_refreshed_at >= KEYS_REFRESH_MIN_SECONDS
            if due:
                self._keys_refreshed_at = now
        return self.keys(refresh=True) if due else keys

    # --- the code flow --------------------------------------------------------------

    def _client(self, redirect_uri: str) -> OAuth2Client:
        return OAuth2Client(
            client_id=self.settings.client_id,
            client_secret=self.settings.client_secret.get_secret_value(),
            scope=self.settings.scopes,
            redirect_uri=redirect_uri,
            code_challenge_method="S256",
            timeout=self.settings.timeout_seconds,
        )

    def begin(self, redirect_uri: str) -> AuthorizationRequest:
        state = secrets.token_urlsafe(24)
        nonce = secrets.token_urlsafe(24)
        verifier = secrets.token_urlsafe(48)
        with self._client(redirect_uri) as client:
            url, _ = client.create_authorization_url(
                self.metadata()["authorization_endpoint"],
                state=state,
                nonce=nonce,
                code_verifier=verifier,
            )
        return AuthorizationRequest(url=url, state=state, nonce=nonce, code_verifier=verifier)

    def finish(
        self, *, code: str, redirect_uri: str, code_verifier: str, nonce: str
    ) -> dict[str, Any]:
        """Exchange the code and return the verified ID token's claims."""
        endpoint = self.metadata()["token_endpoint"]
        try:
            with self._client(redirect_uri) as client:
                token = client.fetch_token(
                    endpoint,
                    code=code,
                    code_verifier=code_verifier,
                    grant_type="authorization_code",
                )
        except httpx.HTTPError as exc:
            raise OidcError(
                f"the identity provider could not be reached ({type(exc).__name__}); try again",
                unavailable=True,
            ) from exc
        except Exception as exc:  # authlib raises OAuthError subclasses for refusals
            raise OidcError(f"the identity provider refused the sign-in: {exc}") from exc
        id_token = token.get("id_token")
        if not isinstance(id_token, str):
            raise OidcError("the identity provider returned no ID token (is `openid` a scope?)")
        return self.verify_id_token(id_token, nonce=nonce)

    def verify_id_token(self, id_token: str, *, nonce: str) -> dict[str, Any]:
        claims = self._verify_jwt(
            id_token,
            audience=self.settings.client_id,
            extra={"nonce": {"essential": True, "value": nonce}},
        )
        if not claims.get("sub"):
            raise OidcError("the ID token has no subject")
        return claims

    def _verify_jwt(
        self, raw: str, *, audience: str, extra: dict[str, Any] | None = None
    ) -> dict[str, Any]:
        try:
            token = jwt.decode(raw, self._keys_for(raw), algorithms=ALGORITHMS)
            registry = jwt.JWTClaimsRegistry(
                leeway=LEEWAY_SECONDS,
                iss={"essential": True, "value": self.issuer},
                aud={"essential": True, "value": audience},
                exp={"essential": True},
                **(extra or {}),
            )
            registry.validate(token.claims)
        except JoseError as exc:
            raise OidcError(f"the token was refused: {_describe(exc)}") from exc
        except ValueError as exc:
            raise OidcError(f"the token could not be read: {exc}") from exc
        return dict(token.claims)

    # --- bearer access tokens -------------------------------------------------------

    def verify_access_token(self, raw: str) -> dict[str, Any]:
        """A JWT access token is verified with the provider's keys; an opaque one is
        checked by asking the provider's userinfo endpoint (cached for a minute)."""
        if raw.count(".") == 2:
            audience = self.settings.audience or self.settings.client_id
            return self._verify_jwt(raw, audience=audience)
        now = time.monotonic()
        with self._lock:
            cached = self._userinfo.get(raw)
            if cached and now - cached[0] < 60:
                return cached[1]
        endpoint = self.metadata().get("userinfo_endpoint")
        if not endpoint:
            raise OidcError("the provider has no userinfo endpoint to check opaque tokens")
        try:
            response = httpx.get(
                endpoint,
                headers={"Authorization": f"Bearer {raw}"},
                timeout=self.settings.timeout_seconds,
            )
        except httpx.HTTPError as exc:
            raise OidcError("the identity provider could not be reached", unavailable=True) from exc
        if response.status_code != 200:
            raise OidcError("the access token is invalid or expired")
        try:
            claims = response.json()
        except ValueError as exc:
            raise OidcError(
                "the identity provider's userinfo answer is not JSON", unavailable=True
            ) from exc
        if not isinstance(claims, dict) or not claims.get("sub"):
            raise OidcError("the provider's userinfo has no subject")
        with self._lock:
            if len(self._userinfo) > 1000:
                self._userinfo.clear()
            self._userinfo[raw] = (now, claims)
        return claims

    def end_session_url(self, post_logout_redirect_uri: str) -> str | None:
        try:
            endpoint = self.metadata().get("end_session_endpoint")
        except OidcError:
            return None
        if not endpoint:
            return None
        query = urlencode(
            {
                "client_id": self.settings.client_id,
                "post_logout_redirect_uri": post_logout_redirect_uri,
            }
        )
        return f"{endpoint}?{query}"


def _key_id(raw: str) -> str | None:
    """The ``kid`` in a compact JWT's header, or None when it has none or is unreadable."""
    head = raw.split(".", 1)[0]
    try:
        header = json.loads(base64.urlsafe_b64decode(head + "=" * (-len(head) % 4)))
    except (ValueError, TypeError):
        return None
    kid = header.get("kid") if isinstance(header, dict) else None
    return kid if isinstance(kid, str) else None


def _describe(exc: JoseError) -> str:
    text = getattr(exc, "description", "") or str(exc) or type(exc).__name__
    names = {
        "ExpiredTokenError": "it has expired",
        "InvalidClaimError": f"a claim does not match ({text})",
        "MissingClaimError": f"a required claim is missing ({text})",
        "BadSignatureError": "its signature does not match the provider's keys",
    }
    return names.get(type(exc).__name__, text)
