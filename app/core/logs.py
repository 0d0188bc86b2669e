"""Logging that never carries secrets: authorization codes and tokens are redacted."""

from __future__ import annotations

import contextvars
import json
import logging
import re
from collections.abc import Iterable
from datetime import UTC, datetime
from typing import Any

_SECRET_PARAMS = re.compile(
    r"(?i)\b(code|state|token|access_token|id_token|client_secret)=([^&\s\"']+)"
)
# An absolute URL's path and query: a Slack webhook's path is its credential, and the
# delivery worker's HTTP client logs every post it makes ("HTTP Request: POST
# https://…/services/T…/B…/…"). Only scheme and host stay.
_URL_PATH = re.compile(r"(?i)\b(https?://[^/\s\"'<>?#]+)([/?#][^\s\"'<>]*)")
_PRIMITIVES = (int, float, bool, type(None))
_secrets: set[str] = set()


def register_secrets(values: Iterable[str | None]) -> None:
    """Configured secrets (the portal's key, the identity provider's client secret, the
    SMTP password, the metrics token): any record that would carry one carries
    [redacted] instead. Values under 8 characters are not registered (they would hide
    ordinary words)."""
    _secrets.update(v for v in values if v and len(v) >= 8)


def _path_hidden(match: re.Match[str]) -> str:
    rest = match.group(2)
    return match.group(1) + ("/" if rest == "/" else "/…")


def redact(text: str) -> str:
    text = _SECRET_PARAMS.sub(lambda m: f"{m.group(1)}=[redacted]", text)
    if "://" in text:
        text = _URL_PATH.sub(_path_hidden, text)
    for secret in _secrets:
        if secret in text:
            text = text.replace(secret, "[redacted]")
    return text


def _redacted_arg(value: object) -> object:
    if isinstance(value, str):
        return redact(value)
    if isinstance(value, _PRIMITIVES):
        return value
    # An object formatted by %s (httpx's URL, an exception): its text, redacted.
    text = str(value)
    cleaned = redact(text)
    return value if cleaned == text else cleaned


def redact_record(record: logging.LogRecord) -> None:
    """Rewrite a record's message and arguments so that secrets are gone."""
    if isinstance(record.args, tuple):
        record.args = tuple(_redacted_arg(a) for a in record.args)
    elif isinstance(record.args, dict):
        record.args = {k: _redacted_arg(v) for k, v in record.args.items()}
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


# --- request ids and the log format ---------------------------------------------------

REQUEST_ID: contextvars.ContextVar[str] = contextvars.ContextVar("request_id", default="")


class JsonFormatter(logging.Formatter):
    """One JSON object per line: time, level, logger, message, request id, exception."""

    def format(self, record: logging.LogRecord) -> str:
        entry: dict[str, Any] = {
            "time": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname.lower(),
            "logger": record.name,
            "message": record.getMessage(),
        }
        request_id = REQUEST_ID.get()
        if request_id:
            entry["request_id"] = request_id
        if record.exc_info:
            entry["exception"] = redact(self.formatException(record.exc_info))
        return json.dumps(entry, ensure_ascii=False)


class TextFormatter(logging.Formatter):
    def __init__(self) -> None:
        super().__init__("%(asctime)s %(levelname)s %(name)s %(message)s")

    def format(self, record: logging.LogRecord) -> str:
        line = redact(super().format(record))  # a traceback's text too
        request_id = REQUEST_ID.get()
        return f"{line} [request {request_id}]" if request_id else line


def dict_config(log_format: str = "text", level: str = "INFO") -> dict[str, Any]:
    """A logging.config.dictConfig for the process (uvicorn applies it in every worker):
    the root logger and uvicorn's loggers write through one handler in the chosen format."""
    formatter = (
        "app.core.logs.JsonFormatter" if log_format == "json" else "app.core.logs.TextFormatter"
    )
    return {
        "version": 1,
        "disable_existing_loggers": False,
        "formatters": {"portal": {"()": formatter}},
        "handlers": {
            "stderr": {
                "class": "logging.StreamHandler",
                "formatter": "portal",
                "stream": "ext://sys.stderr",
            }
        },
        "root": {"handlers": ["stderr"], "level": level},
        "loggers": {
            name: {"handlers": [], "propagate": True, "level": level}
            for name in ("uvicorn", "uvicorn.error", "uvicorn.access")
        },
    }
