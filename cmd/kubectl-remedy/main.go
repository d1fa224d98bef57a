// Command kubectl-remedy is the kubectl plugin alone, as `make release`
// ships it for Krew: `remedy kubectl` without the rest of the binary, so it
// builds for every platform kubectl runs on (remedy-dev is Linux's).
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/remedy-dev/remedy/internal/plugin"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := plugin.Run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "error:", err)
		os.Exit(1)
	}
}
