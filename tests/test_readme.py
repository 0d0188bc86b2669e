"""The README starts with the two commands and documents every setting."""

from __future__ import annotations

from pathlib import Path

from app.core.config import Settings

README = (Path(__file__).resolve().parents[1] / "README.md").read_text()


def test_every_setting_is_documented() -> None:
    missing = [
        f"PORTAL_{name.upper()}"
        for name in Settings.model_fields
        if f"PORTAL_{name.upper()}" not in README
    ]
    assert missing == []


def test_the_two_commands_come_first() -> None:
    head = README.split("## ")[0]
    assert "make run" in head
    assert "make test" in head
