"""Static files: pages name each with its content's hash, which a browser keeps a year;
text files are sent compressed to a browser that accepts gzip."""

from __future__ import annotations

import gzip
import hashlib
import re

from app.core.config import PROJECT_ROOT
from tests.web.conftest import Client


def test_pages_name_each_file_by_its_content_and_browsers_keep_it(lead: Client) -> None:
    page = lead.get("/teams").text
    found = dict(re.findall(r'(?:src|href)="/static/([^"?]+)\?v=([0-9a-f]{10})"', page))
    assert {"portal.css", "portal.js", "vendor/htmx.min.js", "favicon.svg"} <= set(found)
    for name, version in found.items():
        content = (PROJECT_ROOT / "static" / name).read_bytes()
        assert version == hashlib.sha256(content).hexdigest()[:10], name
    htmx = f"/static/vendor/htmx.min.js?v={found['vendor/htmx.min.js']}"
    zipped = lead.get(htmx, headers={"Accept-Encoding": "gzip"})
    assert zipped.status_code == 200
    assert zipped.headers["cache-control"] == "public, max-age=31536000, immutable"
    assert zipped.headers["content-encoding"] == "gzip"
    assert zipped.headers["vary"] == "Accept-Encoding"
    raw = (PROJECT_ROOT / "static" / "vendor" / "htmx.min.js").read_bytes()
    # The client undoes the encoding; what travelled is a third of the file or less.
    assert zipped.content == raw
    assert int(zipped.headers["content-length"]) == len(gzip.compress(raw, 9, mtime=0))
    assert int(zipped.headers["content-length"]) < len(raw) / 3
    assert zipped.headers["content-type"].startswith(("text/javascript", "application/javascript"))
    # Without gzip: the file as it is; an old or no version: revalidated on each use.
    plain = lead.get("/static/vendor/htmx.min.js", headers={"Accept-Encoding": "identity"})
    assert "content-encoding" not in plain.headers
    assert plain.content == raw
    assert plain.headers["cache-control"] == "no-cache"
    again = lead.get(
        "/static/vendor/htmx.min.js?v=0000000000",
        headers={"Accept-Encoding": "gzip", "If-None-Match": zipped.headers["etag"]},
    )
    assert again.status_code == 304
    assert again.headers["cache-control"] == "no-cache"
