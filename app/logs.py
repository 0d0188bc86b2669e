"""Logging that never carries secrets: authorization codes and tokens are redacted."""

from __future__ import annotations

import logging
import re

_SECRET_PARAMS = re.compile(
    r"(?i)\b(code|state|token|access_token|id_token|client_secret)=([^&\s\"']+)"
)


def redact(text: str) -> str:
    return _SECRET_PARAMS.sub(lambda m: f"{m.group(1)}=[redacted]", text)


class RedactSecrets(logging.Filter):
    """Rewrites a record's arguments so that query-string secrets are not logged."""

    def filter(self, record: logging.LogRecord) -> bool:
        if isinstance(record.args, tuple):
            record.args = tuple(redact(a) if isinstance(a, str) else a for a in record.args)
        if isinstance(record.msg, str):
            record.msg = redact(record.msg)
        return True


def install() -> None:
    for name in ("uvicorn.access", "uvicorn.error", "httpx", "app"):
        logging.getLogger(name).addFilter(RedactSecrets())
