"""Logging that never carries secrets: authorization codes and tokens are redacted."""

from __future__ import annotations

import logging
import re
from typing import Any

_SECRET_PARAMS = re.compile(
    r"(?i)\b(code|state|token|access_token|id_token|client_secret)=([^&\s\"']+)"
)


def redact(text: str) -> str:
    return _SECRET_PARAMS.sub(lambda m: f"{m.group(1)}=[redacted]", text)


def redact_record(record: logging.LogRecord) -> None:
    """Rewrite a record's message and arguments so that query-string secrets are gone."""
    if isinstance(record.args, tuple):
        record.args = tuple(redact(a) if isinstance(a, str) else a for a in record.args)
    if isinstance(record.msg, str):
        record.msg = redact(record.msg)


class RedactSecrets(logging.Filter):
    """A filter for one logger or handler (``install`` covers every logger at once)."""

    def filter(self, record: logging.LogRecord) -> bool:
        redact_record(record)
        return True


_installed = False


def install() -> None:
    """Redact every record of every logger, the portal's, uvicorn's and libraries', once
    per process however often an app starts. A filter on one logger would miss records
    of its child loggers (filters do not apply to records propagated from children)."""
    global _installed
    if _installed:
        return
    make_record = logging.getLogRecordFactory()

    def redacting_factory(*args: Any, **kwargs: Any) -> logging.LogRecord:
        record = make_record(*args, **kwargs)
        redact_record(record)
        return record

    logging.setLogRecordFactory(redacting_factory)
    _installed = True
