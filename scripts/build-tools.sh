#!/usr/bin/env bash
# Build the Go test tools from the Go module proxy into a cache outside git.
set -euo pipefail
cd "$(dirname "$0")/.."
CACHE="${PORTAL_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/gpu-portal}"
mkdir -p "$CACHE/bin"
stamp="$CACHE/bin/.composecheck-$(sha256sum tools/composecheck/go.sum tools/composecheck/main.go | sha256sum | cut -c1-12)"
if [ ! -x "$CACHE/bin/composecheck" ] || [ ! -f "$stamp" ]; then
  (cd tools/composecheck && go build -o "$CACHE/bin/composecheck" .)
  rm -f "$CACHE"/bin/.composecheck-*
  touch "$stamp"
fi

# Prometheus, for the optional usage source's tests.
PROMETHEUS_VERSION="${PROMETHEUS_VERSION:-v0.316.0}"
if [ ! -x "$CACHE/bin/prometheus-$PROMETHEUS_VERSION" ]; then
  GOBIN="$CACHE/bin/.prometheus-build" go install "github.com/prometheus/prometheus/cmd/prometheus@$PROMETHEUS_VERSION"
  mv "$CACHE/bin/.prometheus-build/prometheus" "$CACHE/bin/prometheus-$PROMETHEUS_VERSION"
  rmdir "$CACHE/bin/.prometheus-build"
fi
ln -sf "prometheus-$PROMETHEUS_VERSION" "$CACHE/bin/prometheus"

# etcd and kube-apiserver for the Kubernetes tests, unless KUBEBUILDER_ASSETS has them.
for name in etcd kube-apiserver; do
  if [ -n "${KUBEBUILDER_ASSETS:-}" ] && [ -x "$KUBEBUILDER_ASSETS/$name" ]; then
    continue
  fi
  stamp="$CACHE/bin/.$name-$(sha256sum tools/$name/go.mod tools/$name/go.sum tools/$name/main.go | sha256sum | cut -c1-12)"
  if [ ! -x "$CACHE/bin/$name" ] || [ ! -f "$stamp" ]; then
    (cd "tools/$name" && go build -o "$CACHE/bin/$name" .)
    rm -f "$CACHE"/bin/."$name"-*
    touch "$stamp"
  fi
done
