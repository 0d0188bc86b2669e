#!/usr/bin/env python3
"""Write the README's settings table from the settings' own descriptions
(app/core/config.py): each setting is described once, there."""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from app.core.config import settings_table  # noqa: E402

BEGIN = "<!-- settings: written by scripts/settings-table.py from app/core/config.py -->"
END = "<!-- /settings -->"


def main() -> None:
    readme = ROOT / "README.md"
    text = readme.read_text()
    head, rest = text.split(BEGIN, 1)
    _, tail = rest.split(END, 1)
    readme.write_text(head + BEGIN + "\n" + "\n".join(settings_table()) + "\n" + END + tail)


if __name__ == "__main__":
    main()
