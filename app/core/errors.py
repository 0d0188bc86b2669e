"""Errors that services raise and pages and the API turn into clear answers."""

from __future__ import annotations


class DomainError(Exception):
    """A rule was broken; the message says what to change."""

    status_code = 400

    def __init__(self, message: str, *, field: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.field = field


class InvalidInput(DomainError):
    """One or more fields are wrong: ``errors`` maps field name to message."""

    status_code = 422

    def __init__(self, errors: dict[str, str]) -> None:
        super().__init__("; ".join(f"{k}: {v}" for k, v in errors.items()))
        self.errors = errors


class NotFound(DomainError):
    status_code = 404


class Forbidden(DomainError):
    status_code = 403


class Conflict(DomainError):
    status_code = 409


class TooMany(Conflict):
    """A per-person bound is reached (live kubeconfigs): the message says what frees one."""

    status_code = 429


class Unavailable(DomainError):
    """Something the portal depends on (the identity provider, the cluster) did not answer
    usefully; trying again later may work."""

    status_code = 502
