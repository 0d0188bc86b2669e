"""Random credentials, their one-way hashes and sealed (encrypted) values: the database
never holds a credential in clear."""

from __future__ import annotations

import base64
import hashlib
import secrets

from cryptography.fernet import Fernet, InvalidToken


def new_secret(prefix: str = "") -> str:
    return prefix + secrets.token_urlsafe(32)


def digest(raw: str) -> str:
    return hashlib.sha256(raw.encode()).hexdigest()


def _fernet(key: str) -> Fernet:
    derived = hashlib.sha256(b"gpu-portal sealed values\0" + key.encode()).digest()
    return Fernet(base64.urlsafe_b64encode(derived))


def seal(value: str, key: str) -> str:
    """Encrypt and authenticate ``value`` with a key derived from ``key`` (the portal's
    secret key): for credentials the portal must use again (a webhook URL), which a hash
    cannot serve."""
    return _fernet(key).encrypt(value.encode()).decode()


def unseal(sealed: str, key: str) -> str | None:
    """The sealed value, or None when it cannot be read (the secret key changed)."""
    try:
        return _fernet(key).decrypt(sealed.encode()).decode()
    except InvalidToken:
        return None
