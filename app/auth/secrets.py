"""Random credentials and their one-way hashes: the database never holds one in clear."""

from __future__ import annotations

import hashlib
import secrets


def new_secret(prefix: str = "") -> str:
    return prefix + secrets.token_urlsafe(32)


def digest(raw: str) -> str:
    return hashlib.sha256(raw.encode()).hexdigest()
