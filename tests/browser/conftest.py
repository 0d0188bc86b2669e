"""Headless Chromium and a portal process for the browser tests."""

from __future__ import annotations

import contextlib
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.servers import free_port, portal_process

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-dev-shm-usage",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]


@contextlib.contextmanager
def seeded_portal(folder: Path, **env: str) -> Iterator[str]:
    """The portal as `make run` starts it: its own process, SQLite, seeded, worker on."""
    port = free_port()
    settings = {
        "PORTAL_DEVELOPMENT": "true",
        "PORTAL_DATABASE_URL": f"sqlite:///{folder / 'portal.db'}",
        **env,
    }
    with portal_process(folder, port, settings):
        yield f"http://127.0.0.1:{port}"


@pytest.fixture(scope="module")
def browser() -> Iterator[object]:
    if not Path(CHROMIUM).exists():
        pytest.fail("Chromium is not installed: run `make setup-test`")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        instance = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        yield instance
        instance.close()
