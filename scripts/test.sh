#!/usr/bin/env bash
# The whole test suite, as `make test` runs it (after `make setup` and the system
# packages). The Go tools build in the background (from an empty cache that is the
# longest part) while the linters, the type checker, the import layers and every test
# that needs no Go tool run; then the tests that use the tools (the mark `tools`: the
# real API server, vCluster syncer, KAI Scheduler, helm, Prometheus), two files at a time.
set -euo pipefail
cd "$(dirname "$0")/.."
BIN="${VENV:-.venv}/bin"
log="$(mktemp)"
started=$SECONDS

setsid scripts/build-tools.sh >"$log" 2>&1 &
build=$!
stop_build() { kill -- -"$build" 2>/dev/null || true; }
trap stop_build EXIT

"$BIN/ruff" check app tests bench migrations scripts
"$BIN/ruff" format --check app tests bench migrations
"$BIN/lint-imports"
"$BIN/mypy" --strict app tests bench
PORTAL_TOOLS_BUILDING=1 "$BIN/pytest" -q -m "not tools"
echo "tests without the Go tools done after $((SECONDS - started)) s; waiting for the tools"

if ! wait "$build"; then
  cat "$log"
  echo "building the Go tools failed (log above)" >&2
  exit 1
fi
trap - EXIT
cat "$log"
echo "Go tools ready after $((SECONDS - started)) s"
"$BIN/pytest" -q -m tools -n 2 --dist loadfile
echo "whole suite done after $((SECONDS - started)) s"
