"""OpenID Connect relying party: authorization code flow with PKCE, state and nonce.

Works with any standards-compliant provider (Keycloak, Dex, Entra ID, Google) from its
discovery document. ID tokens are verified here: signature against the provider's keys,
issuer, audience, expiry and nonce.
"""

from __future__ import annotations

import base64
import hashlib
import json
import secrets
import threading
import time
from typing import Any
from urllib.parse import urlencode

import httpx
from authlib.oauth2.rfc6749.parameters import prepare_grant_uri, prepare_token_request
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
# An opaque token's check is kept this long at most (and never past its expiry).
USERINFO_CACHE_SECONDS = 60.0
# A JWT whose header names another type is not an access token (RFC 9068 says at+jwt).
ACCESS_TOKEN_TYPES = {"jwt", "at+jwt", "application/at+jwt"}
# Claims only an ID token carries (OpenID Connect Core 2 and 3.1.3.6).
ID_TOKEN_ONLY_CLAIMS = ("nonce", "at_hash", "c_hash")
# What introspection may name that is not an access token.
NOT_ACCESS_TOKEN_TYPES = {"refresh", "refresh_token", "id", "id_token"}


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
        # Opaque tokens already checked, by their SHA-256: (valid until, claims).
        self._checked: dict[str, tuple[float, dict[str, Any]]] = {}

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

    def begin(self, redirect_uri: str) -> AuthorizationRequest:
        """The provider's authorization address for this sign-in: the code flow with
        PKCE (S256), a state and a nonce (RFC 6749 4.1.1, RFC 7636 4.3)."""
        state = secrets.token_urlsafe(24)
        nonce = secrets.token_urlsafe(24)
        verifier = secrets.token_urlsafe(48)
        url = prepare_grant_uri(
            str(self.metadata()["authorization_endpoint"]),
            client_id=self.settings.client_id,
            response_type="code",
            redirect_uri=redirect_uri,
            scope=self.settings.scopes,
            state=state,
            nonce=nonce,
            code_challenge=_s256(verifier),
            code_challenge_method="S256",
        )
        return AuthorizationRequest(url=url, state=state, nonce=nonce, code_verifier=verifier)

    def finish(
        self, *, code: str, redirect_uri: str, code_verifier: str, nonce: str
    ) -> dict[str, Any]:
        """Exchange the code and return the verified ID token's claims."""
        token = self._token(code=code, redirect_uri=redirect_uri, code_verifier=code_verifier)
        id_token = token.get("id_token")
        if not isinstance(id_token, str):
            raise OidcError("the identity provider returned no ID token (is `openid` a scope?)")
        claims = self.verify_id_token(id_token, nonce=nonce)
        access_token = token.get("access_token")
        if "email" not in claims and isinstance(access_token, str):
            # Many providers give the profile (e-mail, groups) at userinfo only.
            profile = self._userinfo(access_token)
            if profile is not None and profile.get("sub") == claims["sub"]:
                claims = {**profile, **claims}
        return claims

    def _token(self, *, code: str, redirect_uri: str, code_verifier: str) -> dict[str, Any]:
        """The token endpoint's answer to the code (RFC 6749 4.1.3), the client signed in
        with HTTP Basic (``client_secret_basic``, as authlib's clients send it)."""
        secret = self.settings.client_secret.get_secret_value()
        body = prepare_token_request(
            "authorization_code", redirect_uri=redirect_uri, code=code, code_verifier=code_verifier
        )
        try:
            response = httpx.post(
                str(self.metadata()["token_endpoint"]),
                content=body,
                auth=(self.settings.client_id, secret),
                headers={
                    "Accept": "application/json",
                    "Content-Type": "application/x-www-form-urlencoded",
                },
                timeout=self.settings.timeout_seconds,
            )
        except httpx.HTTPError as exc:
            raise OidcError(
                f"the identity provider could not be reached ({type(exc).__name__}); try again",
                unavailable=True,
            ) from exc
        if response.status_code >= 500:
            raise OidcError(
                f"the identity provider answered {response.status_code}; try again",
                unavailable=True,
            )
        try:
            token = response.json()
        except ValueError:
            token = None
        if response.status_code != 200 or not isinstance(token, dict) or "error" in token:
            said = token if isinstance(token, dict) else {}
            why = said.get("error_description") or said.get("error") or response.status_code
            raise OidcError(f"the identity provider refused the sign-in: {str(why)[:200]}")
        return token

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
                iss={"essential": True, "value": str(self.metadata()["issuer"])},
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
        """The claims of an access token issued for the portal, or ``OidcError``.

        A JWT is verified with the provider's keys for the portal's audience, and refused
        when it is an ID token (the portal's own carry the nonce it always sends). An
        opaque token is checked by token introspection (RFC 7662) with the portal's own
        client credentials, and accepted only when it was issued to the portal's client or
        for its audience; the userinfo endpoint alone answers for any application's token,
        so a provider without introspection cannot vouch for an opaque token here.
        """
        if raw.count(".") == 2:
            return self._verify_jwt_access_token(raw)
        key = hashlib.sha256(raw.encode()).hexdigest()
        now = time.monotonic()
        with self._lock:
            cached = self._checked.get(key)
            if cached and now < cached[0]:
                return cached[1]
        claims, seconds_left = self._introspect(raw)
        profile = self._userinfo(raw)
        if profile is not None:
            if profile.get("sub") != claims["sub"]:
                raise OidcError("the provider's userinfo names another subject than the token")
            claims = {**claims, **profile}
        keep = min(USERINFO_CACHE_SECONDS, seconds_left)
        with self._lock:
            if len(self._checked) > 1000:
                self._checked.clear()
            if keep > 0:
                self._checked[key] = (now + keep, claims)
        return claims

    def _verify_jwt_access_token(self, raw: str) -> dict[str, Any]:
        kind = _header(raw).get("typ")
        if isinstance(kind, str) and kind.lower() not in ACCESS_TOKEN_TYPES:
            raise OidcError(f"a token of type {kind!r} is not an access token")
        claims = self._verify_jwt(raw, audience=self.audience)
        if any(name in claims for name in ID_TOKEN_ONLY_CLAIMS) or claims.get("typ") == "ID":
            raise OidcError(
                "it is an ID token, which proves a sign-in to the portal, not a grant of "
                "access: send the provider's access token or a portal API token (gpp_…)"
            )
        if not claims.get("sub"):
            raise OidcError("the access token has no subject")
        return claims

    @property
    def audience(self) -> str:
        return self.settings.audience or self.settings.client_id

    def _introspect(self, raw: str) -> tuple[dict[str, Any], float]:
        """The introspection's claims of an active token issued for the portal, and the
        seconds it stays valid."""
        endpoint = self.metadata().get("introspection_endpoint")
        if not endpoint:
            raise OidcError(
                "the identity provider offers no token introspection, so an opaque access "
                "token cannot be checked as issued to the portal: use a portal API token "
                "(gpp_…) or have the provider issue JWT access tokens"
            )
        try:
            response = httpx.post(
                endpoint,
                data={"token": raw, "token_type_hint": "access_token"},
                auth=(self.settings.client_id, self.settings.client_secret.get_secret_value()),
                timeout=self.settings.timeout_seconds,
            )
        except httpx.HTTPError as exc:
            raise OidcError("the identity provider could not be reached", unavailable=True) from exc
        if response.status_code in (401, 403):
            raise OidcError(
                "the identity provider refused the portal's client credentials at its "
                "introspection endpoint",
                unavailable=True,
            )
        if response.status_code != 200:
            raise OidcError(
                f"the identity provider's introspection answered {response.status_code}",
                unavailable=True,
            )
        try:
            body = response.json()
        except ValueError as exc:
            raise OidcError(
                "the identity provider's introspection answer is not JSON", unavailable=True
            ) from exc
        if not isinstance(body, dict) or body.get("active") is not True:
            raise OidcError("the access token is invalid, expired or not issued to the portal")
        kind = str(body.get("token_type", "")).lower()
        if kind in NOT_ACCESS_TOKEN_TYPES:
            raise OidcError(f"a {kind} token is not an access token")
        if not _issued_for(body, client_id=self.settings.client_id, audience=self.audience):
            raise OidcError("the access token was issued to another application")
        if not isinstance(body.get("sub"), str) or not body["sub"]:
            raise OidcError("the provider's introspection names no subject")
        seconds_left = float(USERINFO_CACHE_SECONDS)
        expires = body.get("exp")
        if isinstance(expires, int | float):
            seconds_left = float(expires) - time.time()
            if seconds_left <= -LEEWAY_SECONDS:
                raise OidcError("the access token has expired")
        return body, seconds_left

    def _userinfo(self, raw: str) -> dict[str, Any] | None:
        """The profile the userinfo endpoint gives for an introspected token (names,
        e-mail, groups), or None when the provider has no such endpoint or gives none."""
        endpoint = self.metadata().get("userinfo_endpoint")
        if not endpoint:
            return None
        try:
            response = httpx.get(
                endpoint,
                headers={"Authorization": f"Bearer {raw}"},
                timeout=self.settings.timeout_seconds,
            )
        except httpx.HTTPError as exc:
            raise OidcError("the identity provider could not be reached", unavailable=True) from exc
        if response.status_code != 200:
            return None
        try:
            claims = response.json()
        except ValueError as exc:
            raise OidcError(
                "the identity provider's userinfo answer is not JSON", unavailable=True
            ) from exc
        return claims if isinstance(claims, dict) else None

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


def _header(raw: str) -> dict[str, Any]:
    """A compact JWT's header, or {} when it is unreadable."""
    head = raw.split(".", 1)[0]
    try:
        header = json.loads(base64.urlsafe_b64decode(head + "=" * (-len(head) % 4)))
    except (ValueError, TypeError):
        return {}
    return header if isinstance(header, dict) else {}


def _key_id(raw: str) -> str | None:
    """The ``kid`` in a compact JWT's header, or None when it has none or is unreadable."""
    kid = _header(raw).get("kid")
    return kid if isinstance(kid, str) else None


def _issued_for(body: dict[str, Any], *, client_id: str, audience: str) -> bool:
    """Whether an introspection answer names the portal's client or audience."""
    if body.get("client_id") == client_id:
        return True
    aud = body.get("aud")
    names = [aud] if isinstance(aud, str) else aud if isinstance(aud, list) else []
    return audience in names or client_id in names


def _describe(exc: JoseError) -> str:
    text = getattr(exc, "description", "") or str(exc) or type(exc).__name__
    names = {
        "ExpiredTokenError": "it has expired",
        "InvalidClaimError": f"a claim does not match ({text})",
        "MissingClaimError": f"a required claim is missing ({text})",
        "BadSignatureError": "its signature does not match the provider's keys",
    }
    return names.get(type(exc).__name__, text)


def _s256(verifier: str) -> str:
    """The PKCE code challenge of ``verifier`` (RFC 7636 4.2: BASE64URL(SHA256), unpadded)."""
    digest = hashlib.sha256(verifier.encode("ascii")).digest()
    return base64.urlsafe_b64encode(digest).rstrip(b"=").decode("ascii")
