// Package pods installs the Helm chart deploy/helm/remedy with the Helm Go
// SDK onto a real node: its Deployments run as Pods of the image built from
// this tree, pointed at Temporal on the node's IP by the chart's
// temporal.address (test/procs with Options.Node). test/helm runs the same
// chart's Deployments as local processes.
package pods

import (
	"os"
	"testing"

	"github.com/remedy-dev/remedy/test/procs"
)

func TestMain(m *testing.M) {
	os.Exit(procs.Main(m, procs.Options{Name: "helmpods", Node: true, Pods: true, NoInstall: true}))
}
