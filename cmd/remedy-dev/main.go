// Command remedy-dev runs the whole platform on this machine (`make dev`):
// etcd, kube-apiserver, kube-controller-manager, Temporal with its Web UI,
// Alertmanager, the operator, the worker and the drift webhook, and with
// --node a real node. It is a developer binary of its own, not a command of
// cmd/remedy, so that the product binary and its image link no envtest and
// no Temporal dev server.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"

	"github.com/remedy-dev/remedy/internal/devenv"
	"github.com/remedy-dev/remedy/internal/plugin"
)

func main() {
	// remedy-dev starts its child processes through this binary.
	devenv.ExecIfWrapped()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	// <dev-dir>/bin/kubectl-remedy links to this binary.
	if filepath.Base(os.Args[0]) == plugin.Name {
		if err := plugin.Run(ctx, os.Args[1:], os.Stdout, os.Stderr); err != nil {
			fmt.Fprintln(os.Stderr, "error:", err)
			os.Exit(1)
		}
		return
	}
	err := runDev(ctx, os.Args[1:])
	// The flag package has printed the usage.
	if errors.Is(err, flag.ErrHelp) {
		return
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "remedy-dev:", err)
		os.Exit(1)
	}
}
