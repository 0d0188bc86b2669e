//go:build tools

// Package tools pins kine, the vCluster's default backing store (SQLite behind an etcd
// API), which the syncer runs from its binaries folder; scripts/build-tools.sh builds it
// into the cache.
package tools

import _ "github.com/k3s-io/kine"
