"""The portal's static files (its CSS and scripts, and htmx and the API docs' bundles).

Pages name each file with its content's hash (``static("portal.css")`` →
``/static/portal.css?v=1a2b3c4d5e``): a browser keeps that address a year without asking
again, and a new release names a new address. Any other address of a file is revalidated
on each use (its ETag answers 304). A browser that accepts gzip gets the text files
compressed, each compressed once per process.
"""

from __future__ import annotations

import gzip
import hashlib
import os
from pathlib import Path
from urllib.parse import parse_qs

from starlette.datastructures import Headers
from starlette.responses import Response
from starlette.staticfiles import StaticFiles
from starlette.types import Scope

from app.core.config import PROJECT_ROOT

FOREVER = "public, max-age=31536000, immutable"  # the hashed address of this content
REVALIDATE = "no-cache"  # any other address: kept, but asked again on each use
COMPRESSED = {".js", ".css", ".svg", ".json", ".map", ".txt"}
SMALLEST = 1024  # below this a compressed answer saves less than its headers cost


class Assets(StaticFiles):
    def __init__(self, directory: Path) -> None:
        super().__init__(directory=str(directory))
        self.root = directory
        self._versions: dict[str, str] = {}
        self._gzipped: dict[tuple[str, float, int], bytes] = {}

    def version(self, name: str) -> str:
        """The first hex digits of the file's SHA-256 (read once per process)."""
        if name not in self._versions:
            self._versions[name] = hashlib.sha256((self.root / name).read_bytes()).hexdigest()[:10]
        return self._versions[name]

    def url(self, name: str) -> str:
        """The address pages use for ``name``: cached by browsers until it changes."""
        return f"/static/{name}?v={self.version(name)}"

    def file_response(
        self,
        full_path: str | os.PathLike[str],
        stat_result: os.stat_result,
        scope: Scope,
        status_code: int = 200,
    ) -> Response:
        response = super().file_response(full_path, stat_result, scope, status_code)
        name = Path(full_path).resolve().relative_to(self.root.resolve()).as_posix()
        asked = parse_qs(scope.get("query_string", b"").decode("latin-1")).get("v", [""])[0]
        response.headers["Cache-Control"] = FOREVER if asked == self.version(name) else REVALIDATE
        path = Path(full_path)
        if (
            response.status_code != 200
            or path.suffix not in COMPRESSED
            or stat_result.st_size < SMALLEST
            or "gzip" not in Headers(scope=scope).get("accept-encoding", "")
        ):
            if path.suffix in COMPRESSED:
                response.headers["Vary"] = "Accept-Encoding"
            return response
        key = (str(path), stat_result.st_mtime, stat_result.st_size)
        if key not in self._gzipped:
            self._gzipped[key] = gzip.compress(path.read_bytes(), compresslevel=9, mtime=0)
        headers = {k: v for k, v in response.headers.items() if k not in ("content-length", "etag")}
        headers["ETag"] = "W/" + response.headers["etag"]  # the same file, another encoding
        headers["Content-Encoding"] = "gzip"
        headers["Vary"] = "Accept-Encoding"
        return Response(self._gzipped[key], status_code=200, headers=headers)


ASSETS = Assets(PROJECT_ROOT / "static")
