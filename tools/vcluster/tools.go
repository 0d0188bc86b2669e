//go:build tools

// Package tools pins the vcluster CLI and the vCluster syncer (the process a vCluster's
// pod runs) that scripts/build-tools.sh builds into the cache (the module proxy serves
// exact versions of github.com/loft-sh/vcluster but no version list). One dependency,
// github.com/loft-sh/api/v4 at a pre-release, is missing from the public checksum
// database: the build sets GONOSUMDB=github.com/loft-sh and verifies against this
// folder's go.sum instead.
package tools

import (
	_ "github.com/loft-sh/vcluster/cmd/vcluster"
	_ "github.com/loft-sh/vcluster/cmd/vclusterctl"
)
