"""The README starts with the two commands and documents every setting."""

from __future__ import annotations

from pathlib import Path

from app.core.config import Settings, settings_table

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


def test_the_settings_table_is_the_settings_own_descriptions() -> None:
    """Each setting is described once, on its field; `scripts/settings-table.py` writes
    the README's table from the fields."""
    begin = "<!-- settings: written by scripts/settings-table.py from app/core/config.py -->"
    table = README.split(begin, 1)[1].split("<!-- /settings -->", 1)[0].strip().splitlines()
    assert table == settings_table(), "run scripts/settings-table.py"
    assert len(table) == len(Settings.model_fields) + 2
