#!/usr/bin/env bash
# Build the Go test tools from the Go module proxy into a cache outside git:
# composecheck (docker-compose.yml as `docker compose config` reads it), an OpenID
# provider with token introspection, the benchmarks' load client, Prometheus,
# etcd, kube-apiserver and kube-controller-manager, an OCI registry, helm and the vcluster
# CLI, the vCluster syncer, kine and KAI Scheduler's scheduler, binder, pod-grouper and
# queue controller. A binary is rebuilt only when its module or source changes. KUBEBUILDER_ASSETS, when set, provides the Kubernetes ones.
set -euo pipefail
cd "$(dirname "$0")/.."
CACHE="${PORTAL_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/gpu-portal}"
mkdir -p "$CACHE/bin"

build() {  # name, module folder, package folder within it, [go build -ldflags]
  local name=$1 module=$2 package=$3 ldflags=${4:-} stamp
  if [ -n "${KUBEBUILDER_ASSETS:-}" ] && [ -x "$KUBEBUILDER_ASSETS/$name" ]; then
    return
  fi
  stamp="$CACHE/bin/.$name-$( (cat "$module/go.mod" "$module/go.sum" "$module/$package"/*.go; echo "$ldflags") | sha256sum | cut -c1-12)"
  if [ ! -x "$CACHE/bin/$name" ] || [ ! -f "$stamp" ]; then
    echo "building $name (once; cached in $CACHE/bin)"
    (cd "$module" && go build -ldflags "$ldflags" -o "$CACHE/bin/$name" "./$package")
    rm -f "$CACHE"/bin/."$name"-*
    touch "$stamp"
  fi
}

build composecheck tools/composecheck .
# An OpenID provider with token introspection and JWT access tokens (zitadel/oidc's
# example provider, tools/oidc-op).
build oidc-op tools/oidc-op .
# The benchmarks' compiled keep-alive load client (standard library only).
build loadclient tools/loadclient .
build etcd tools/etcd .
# The version the servers report (helm and the vcluster CLI check it), as upstream's
# release build stamps it: the k8s.io/kubernetes version the module pins.
KUBE_VERSION="$(awk '$1 == "k8s.io/kubernetes" {print $2}' tools/kube/go.mod)"
KUBE_MINOR="$(echo "$KUBE_VERSION" | cut -d. -f2)"
kube_ldflags="-X k8s.io/component-base/version.gitVersion=$KUBE_VERSION -X k8s.io/component-base/version.gitMajor=1 -X k8s.io/component-base/version.gitMinor=$KUBE_MINOR -X k8s.io/component-base/version.gitTreeState=clean"
build kube-apiserver tools/kube kube-apiserver "$kube_ldflags"
build kube-controller-manager tools/kube kube-controller-manager "$kube_ldflags"

PROMETHEUS_VERSION="${PROMETHEUS_VERSION:-v0.316.0}"
if [ ! -x "$CACHE/bin/prometheus-$PROMETHEUS_VERSION" ]; then
  echo "building prometheus $PROMETHEUS_VERSION (once; cached in $CACHE/bin)"
  GOBIN="$CACHE/bin/.prometheus-build" go install "github.com/prometheus/prometheus/cmd/prometheus@$PROMETHEUS_VERSION"
  mv "$CACHE/bin/.prometheus-build/prometheus" "$CACHE/bin/prometheus-$PROMETHEUS_VERSION"
  rmdir "$CACHE/bin/.prometheus-build"
fi
ln -sf "prometheus-$PROMETHEUS_VERSION" "$CACHE/bin/prometheus"

# An OCI registry (CNCF Distribution), to install the vCluster chart from oci:// in tests.
REGISTRY_VERSION="${REGISTRY_VERSION:-v3.0.0}"
if [ ! -x "$CACHE/bin/registry-$REGISTRY_VERSION" ]; then
  echo "building the OCI registry $REGISTRY_VERSION (once; cached in $CACHE/bin)"
  GOBIN="$CACHE/bin/.registry-build" go install "github.com/distribution/distribution/v3/cmd/registry@$REGISTRY_VERSION"
  mv "$CACHE/bin/.registry-build/registry" "$CACHE/bin/registry-$REGISTRY_VERSION"
  rmdir "$CACHE/bin/.registry-build"
fi
ln -sf "registry-$REGISTRY_VERSION" "$CACHE/bin/registry"

# helm, for the portal's own chart (lint, template, server-side dry-run install).
HELM_VERSION="${HELM_VERSION:-v3.22.0}"
if [ ! -x "$CACHE/bin/helm-$HELM_VERSION" ]; then
  echo "building helm $HELM_VERSION (once; cached in $CACHE/bin)"
  GOBIN="$CACHE/bin/.helm-build" go install -ldflags "-X helm.sh/helm/v3/internal/version.version=$HELM_VERSION" \
    "helm.sh/helm/v3/cmd/helm@$HELM_VERSION"
  mv "$CACHE/bin/.helm-build/helm" "$CACHE/bin/helm-$HELM_VERSION"
  rmdir "$CACHE/bin/.helm-build"
fi
ln -sf "helm-$HELM_VERSION" "$CACHE/bin/helm"

# The vcluster CLI at the version tools/vcluster/go.mod pins, its version stamped as
# upstream's release build does.
VCLUSTER_VERSION="$(grep -oE 'github.com/loft-sh/vcluster v[0-9][^ ]*' tools/vcluster/go.mod | head -1 | cut -d' ' -f2)"
vstamp="$CACHE/bin/.vcluster-$(cat tools/vcluster/go.mod tools/vcluster/go.sum | sha256sum | cut -c1-12)"
if [ ! -x "$CACHE/bin/vcluster" ] || [ ! -f "$vstamp" ]; then
  echo "building vcluster $VCLUSTER_VERSION (once, a few minutes; cached in $CACHE/bin)"
  (cd tools/vcluster && GONOSUMDB=github.com/loft-sh go build \
    -ldflags "-X main.version=${VCLUSTER_VERSION#v}" \
    -o "$CACHE/bin/vcluster" github.com/loft-sh/vcluster/cmd/vclusterctl)
  rm -f "$CACHE"/bin/.vcluster-*
  touch "$vstamp"
fi

# The vCluster syncer (what a vCluster's pod runs) from the same module and go.sum as the
# CLI, its version stamped as upstream's image build does. Upstream keeps its state in
# /data and runs its distro from /binaries (the pod's volumes); here both live under one
# folder that the tests bind, in each vCluster's own mount namespace, to that vCluster's.
VCLUSTER_ROOT=/var/tmp/gpu-portal-vcluster
syncer_ldflags="-X github.com/loft-sh/vcluster/pkg/telemetry.SyncerVersion=${VCLUSTER_VERSION#v} -X github.com/loft-sh/vcluster/pkg/constants.DataDir=$VCLUSTER_ROOT/data -X github.com/loft-sh/vcluster/pkg/constants.BinariesDir=$VCLUSTER_ROOT/binaries"
sstamp="$CACHE/bin/.vcluster-syncer-$( (cat tools/vcluster/go.mod tools/vcluster/go.sum; echo "$syncer_ldflags") | sha256sum | cut -c1-12)"
if [ ! -x "$CACHE/bin/vcluster-syncer" ] || [ ! -f "$sstamp" ]; then
  echo "building the vcluster syncer $VCLUSTER_VERSION (once; cached in $CACHE/bin)"
  (cd tools/vcluster && GONOSUMDB=github.com/loft-sh go build -ldflags "$syncer_ldflags" \
    -o "$CACHE/bin/vcluster-syncer" github.com/loft-sh/vcluster/cmd/vcluster)
  rm -f "$CACHE"/bin/.vcluster-syncer-*
  touch "$sstamp"
fi

# kine, the vCluster's default backing store (SQLite behind an etcd API), with cgo's
# SQLite as upstream's release build links it.
KINE_VERSION="$(grep -oE 'github.com/k3s-io/kine v[0-9][^ ]*' tools/kine/go.mod | head -1 | cut -d' ' -f2)"
kstamp="$CACHE/bin/.kine-$( (cat tools/kine/go.mod tools/kine/go.sum; echo "$KINE_VERSION") | sha256sum | cut -c1-12)"
if [ ! -x "$CACHE/bin/kine" ] || [ ! -f "$kstamp" ]; then
  echo "building kine $KINE_VERSION (once; cached in $CACHE/bin)"
  (cd tools/kine && CGO_ENABLED=1 go build \
    -ldflags "-X github.com/k3s-io/kine/pkg/version.Version=$KINE_VERSION" \
    -o "$CACHE/bin/kine" github.com/k3s-io/kine)
  rm -f "$CACHE"/bin/.kine-*
  touch "$kstamp"
fi

# KAI Scheduler from the release's source archive in the shared artifacts (the module
# proxy refuses the module itself, and serves its dependencies): only the components the
# tests run. Unpacked into the cache, never into the repository.
SHARED="${PORTAL_SHARED_DIR:-$(cd .. && pwd)/shared}"
KAI_ARCHIVE="$SHARED/third_party/kai-scheduler/kai-scheduler-v0.17.0-src.tar.gz"
KAI_VERSION=v0.17.0
if [ -f "$KAI_ARCHIVE" ]; then
  KAI_SRC="$CACHE/src/kai-scheduler-$KAI_VERSION"
  astamp="$CACHE/src/.kai-$(sha256sum "$KAI_ARCHIVE" | cut -c1-12)"
  if [ ! -f "$astamp" ]; then
    rm -rf "$KAI_SRC" "$CACHE"/src/.kai-*
    mkdir -p "$CACHE/src"
    tar -xzf "$KAI_ARCHIVE" -C "$CACHE/src"
    touch "$astamp"
  fi
  for component in scheduler binder podgrouper podgroupcontroller queuecontroller admission; do
    bin="$CACHE/bin/kai-$component"
    cstamp="$CACHE/bin/.kai-$component-$(basename "$astamp" | cut -d- -f2)"
    if [ ! -x "$bin" ] || [ ! -f "$cstamp" ]; then
      echo "building KAI Scheduler's $component $KAI_VERSION (once; cached in $CACHE/bin)"
      (cd "$KAI_SRC" && go build -buildvcs=false \
        -ldflags "-X github.com/kai-scheduler/KAI-scheduler/pkg/scheduler/version.gitVersion=$KAI_VERSION" \
        -o "$bin" "./cmd/$component")
      rm -f "$CACHE"/bin/.kai-"$component"-*
      touch "$cstamp"
    fi
  done
else
  echo "KAI Scheduler's source archive is not at $KAI_ARCHIVE: check the shared artifacts out beside the repository (../shared) or set PORTAL_SHARED_DIR" >&2
  exit 1
fi

# The ServiceMonitor CRD (for the chart's server-side dry run with metrics.serviceMonitor
# on), generated from prometheus-operator's own API types with controller-gen.
mkdir -p "$CACHE/crds"
crds="$CACHE/crds/monitoring-$(cat tools/monitoring-crd/go.sum | sha256sum | cut -c1-12)"
if [ ! -f "$crds/monitoring.coreos.com_servicemonitors.yaml" ]; then
  echo "generating the ServiceMonitor CRD (once; cached in $CACHE/crds)"
  (cd tools/monitoring-crd && go run sigs.k8s.io/controller-tools/cmd/controller-gen crd \
    paths=github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1 \
    "output:crd:dir=$crds")
fi
ln -sfn "$crds" "$CACHE/crds/monitoring"
