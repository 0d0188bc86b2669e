#!/usr/bin/env bash
# Fetch third-party front-end assets from the npm registry into a cache outside git,
# then copy the ones the portal serves into static/vendor/ (ignored by git).
#   htmx             every page
#   swagger-ui-dist  /docs          (Swagger UI)
#   redoc            /redoc         (ReDoc's standalone bundle)
#   axe-core         browser tests only: stays in the cache, never served
set -euo pipefail
cd "$(dirname "$0")/.."
HTMX_VERSION="${HTMX_VERSION:-2.0.11}"
SWAGGER_UI_VERSION="${SWAGGER_UI_VERSION:-5.35.0}"
REDOC_VERSION="${REDOC_VERSION:-2.5.2}"
AXE_VERSION="${AXE_VERSION:-4.14.1}"
CACHE="${PORTAL_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/gpu-portal}"

# npm install (with dependencies, checked against the registry's integrity hashes).
install() {  # package version file-inside-package
  local dest="$CACHE/npm/$1-$2"
  if [ ! -f "$dest/node_modules/$1/$3" ]; then
    mkdir -p "$dest"
    npm install --prefix "$dest" --no-audit --no-fund --silent "$1@$2"
  fi
  echo "$dest/node_modules/$1/$3"
}

# ReDoc's standalone bundle needs none of the package's dependencies: the tarball alone.
redoc_dir="$CACHE/npm/redoc-$REDOC_VERSION"
if [ ! -f "$redoc_dir/package/bundles/redoc.standalone.js" ]; then
  mkdir -p "$redoc_dir"
  (cd "$redoc_dir" && npm pack --silent "redoc@$REDOC_VERSION" >/dev/null && tar xzf "redoc-$REDOC_VERSION.tgz")
fi

htmx="$(install htmx.org "$HTMX_VERSION" dist/htmx.min.js)"
swagger="$(dirname "$(install swagger-ui-dist "$SWAGGER_UI_VERSION" swagger-ui-bundle.js)")"
install axe-core "$AXE_VERSION" axe.min.js >/dev/null

mkdir -p static/vendor
cp "$htmx" static/vendor/htmx.min.js
cp "$swagger/swagger-ui-bundle.js" "$swagger/swagger-ui.css" static/vendor/
cp "$redoc_dir/package/bundles/redoc.standalone.js" static/vendor/
touch static/vendor/.fetched
