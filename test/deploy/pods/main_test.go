// Package pods installs deploy/ with the install doc's procedure as written
// onto a real node: the operator, the worker and the drift webhook run as
// Pods of the image built from this tree, under the kubelet, with the
// probes, security contexts, ServiceAccount tokens and volumes deploy/
// declares; the API server calls the webhooks in those Pods through their
// Services; Temporal listens on the node's IP, where the Pods reach it
// (test/procs with Options.Node). test/deploy runs the same manifests as
// local processes, which is faster for what needs no kubelet.
package pods

import (
	"os"
	"testing"

	"github.com/remedy-dev/remedy/test/procs"
)

func TestMain(m *testing.M) {
	os.Exit(procs.Main(m, procs.Options{Name: "deploypods", Node: true, Pods: true,
		// PodDisruptionBudgets' status, which evictions are checked against.
		ExtraControllers: []string{"disruption-controller"}}))
}
