//go:build tools

// Package tools pins what scripts/build-tools.sh uses to generate the ServiceMonitor CRD
// from prometheus-operator's own API types (the operator's module with the YAML is not
// served by the module proxy; its API types module is).
package tools

import (
	_ "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
	_ "sigs.k8s.io/controller-tools/cmd/controller-gen"
)
