// kube-controller-manager for the test suite (namespace deletion, garbage collection),
// built from the same Kubernetes Go module as the API server.
package main

import (
	"os"

	"k8s.io/component-base/cli"
	"k8s.io/kubernetes/cmd/kube-controller-manager/app"
)

func main() {
	command := app.NewControllerManagerCommand()
	os.Exit(cli.Run(command))
}
