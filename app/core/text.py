"""Text that goes where one line or one address is expected.

An e-mail header, a notification's title, a chat line: a line break there breaks the
message (Python's e-mail package refuses it, so the mail was never sent) or forges a
header. An address field takes exactly one plain address: no list, no display name, no
quoting (``email.utils.parseaddr`` accepts all of those and is not validation).
"""

from __future__ import annotations

import re

# A dot-atom local part (RFC 5322 without quoted strings) and a domain of DNS labels.
_LOCAL = r"[a-z0-9!#$%&'*+/=?^_`{|}~-]+(?:\.[a-z0-9!#$%&'*+/=?^_`{|}~-]+)*"
_LABEL = r"[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?"
_ADDRESS = re.compile(rf"^{_LOCAL}@{_LABEL}(?:\.{_LABEL})+$")


def one_line(text: str, limit: int | None = None) -> str:
    """``text`` on one line: line breaks, tabs and runs of spaces become one space,
    other control characters go; cut to ``limit`` characters (with "…")."""
    kept = "".join(c for c in text if c.isprintable() or c.isspace())
    line = " ".join(kept.split())
    if limit is not None and len(line) > limit:
        line = line[: limit - 1].rstrip() + "…"
    return line


def is_address(value: str) -> bool:
    """Whether ``value`` (lower case) is one plain e-mail address."""
    return len(value) <= 254 and _ADDRESS.match(value) is not None


def is_number(value: str) -> bool:
    """Whether ``value`` is a whole number written in ASCII digits: ``str.isdigit`` also
    says yes to "²", "①" and other scripts' digits, which ``int`` then refuses or reads."""
    return value.isascii() and value.isdigit()
