// Package deploy runs deploy/ as written: the built binary as the three
// processes of deploy/manager, with the args, env, ports and mounts their
// Deployments declare, each under its own ServiceAccount's token, against
// the real API server (with kube-controller-manager) and Temporal (test/procs).
package deploy

import (
	"os"
	"testing"

	"github.com/remedy-dev/remedy/test/procs"
)

func TestMain(m *testing.M) { os.Exit(procs.Main(m, procs.Options{Name: "deploy"})) }
