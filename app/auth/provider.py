"""What sign-in needs from an identity provider. The OIDC adapter implements it."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol


class ProviderError(Exception):
    """Sign-in or a token check could not be completed; the message is safe to show.

    ``unavailable`` is set when the provider could not be reached or answered with
    something unreadable (shown as 502), rather than refusing the user (401/400)."""

    def __init__(self, message: str, *, unavailable: bool = False) -> None:
        super().__init__(message)
        self.unavailable = unavailable


@dataclass(frozen=True)
class AuthorizationRequest:
    url: str
    state: str
    nonce: str
    code_verifier: str


class IdentityProvider(Protocol):
    def begin(self, redirect_uri: str) -> AuthorizationRequest: ...

    def finish(
        self, *, code: str, redirect_uri: str, code_verifier: str, nonce: str
    ) -> dict[str, Any]:
        """Exchange the code and return the verified ID token's claims."""
        ...

    def verify_access_token(self, raw: str) -> dict[str, Any]: ...

    def end_session_url(self, post_logout_redirect_uri: str) -> str | None: ...
