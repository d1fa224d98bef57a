// Package faults kills Remedy's real processes and parts at the moments that
// matter and checks, from the API server's own record, that every action
// happened exactly once: `remedy operator`, `remedy worker` and `remedy
// webhook` run as subprocesses of the built binary from deploy/manager
// (test/procs), and kube-apiserver and the Temporal dev server restart on
// their own state. Each case SIGKILLs one of them at one point, brings it
// back, and asserts each target's metadata.generation, its rollouts
// (ReplicaSets, restart annotations) and the run's final phase. TestFaults
// prints the matrix of process x point with each outcome, and which pairs
// do not apply and why. `make faults` runs it.
package faults

import (
	"flag"
	"os"
	"testing"

	"github.com/remedy-dev/remedy/test/procs"
)

func TestMain(m *testing.M) {
	flag.Parse()
	os.Exit(procs.Main(m, procs.Options{
		Name: "faults", Restartable: true,
		// A finished Job is collected after the worker's --job-ttl.
		ExtraControllers: []string{"ttl-after-finished-controller"},
		// The Job's Pod runs `remedy exec` on a real node; the upgrade
		// test, in a process of its own (make faults), runs no Job.
		Node: flag.Lookup("test.run").Value.String() != "TestUpgrade",
	}))
}
