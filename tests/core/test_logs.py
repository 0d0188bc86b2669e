"""Secrets in URLs never reach the logs."""

from __future__ import annotations

import logging

import pytest

from app.core.logs import RedactSecrets, install, redact


def test_redact_query_secrets() -> None:
    line = 'GET /auth/callback?code=abc123&state=xyz HTTP/1.1" 303'
    assert redact(line) == 'GET /auth/callback?code=[redacted]&state=[redacted] HTTP/1.1" 303'
    assert redact("/teams/1?sort=name") == "/teams/1?sort=name"


def test_access_log_records_are_redacted(caplog: pytest.LogCaptureFixture) -> None:
    logger = logging.getLogger("uvicorn.access.test")
    logger.addFilter(RedactSecrets())
    with caplog.at_level(logging.INFO, logger="uvicorn.access.test"):
        logger.info('%s - "%s %s"', "127.0.0.1", "GET", "/auth/callback?code=s3cr3t&state=abc")
    assert "s3cr3t" not in caplog.text
    assert "code=[redacted]" in caplog.text


def test_install_redacts_every_logger_once(caplog: pytest.LogCaptureFixture) -> None:
    """Child loggers of the portal and libraries alike; installing twice adds nothing."""
    install()
    factory = logging.getLogRecordFactory()
    install()
    assert logging.getLogRecordFactory() is factory
    with caplog.at_level(logging.INFO):
        logging.getLogger("app.adapters.oidc").info("callback %s", "/cb?code=s3cr3t")
        logging.getLogger("some.library").warning("GET /x?access_token=t0ken&page=2")
    assert "s3cr3t" not in caplog.text
    assert "t0ken" not in caplog.text
    assert caplog.text.count("[redacted]") == 2
    assert "page=2" in caplog.text
