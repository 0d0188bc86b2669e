#!/usr/bin/env bash
# Fetch third-party front-end assets from the npm registry into a cache outside git,
# then copy them where the portal serves them (static/vendor/, ignored by git).
set -euo pipefail
cd "$(dirname "$0")/.."
HTMX_VERSION="${HTMX_VERSION:-2.0.11}"
CACHE="${PORTAL_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/gpu-portal}"
dest="$CACHE/npm/htmx-$HTMX_VERSION"
if [ ! -f "$dest/node_modules/htmx.org/dist/htmx.min.js" ]; then
  mkdir -p "$dest"
  npm install --prefix "$dest" --no-audit --no-fund --silent "htmx.org@$HTMX_VERSION"
fi
mkdir -p static/vendor
cp "$dest/node_modules/htmx.org/dist/htmx.min.js" static/vendor/htmx.min.js
