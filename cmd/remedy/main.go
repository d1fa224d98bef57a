// Command remedy is Remedy's one binary: operator, worker, or the whole
// platform locally with `remedy dev`.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/remedy-dev/remedy/internal/devenv"
)

const usage = `usage: remedy <command> [flags]

commands:
  operator   run the controller manager (reconcilers that start and mirror workflows)
  worker     run the Temporal worker (workflows and activities)
  webhook    run the drift admission webhook (kausality semantics; signals drift workflows)
  exec       perform one action as the pod's ServiceAccount (the job executor's entrypoint)
  dev        run the whole platform locally: etcd, kube-apiserver, kube-controller-manager,
             Temporal with its Web UI, the operator, the worker and the drift webhook

Run 'remedy <command> -h' for the flags of a command.
`

func main() {
	// `remedy dev` starts its child processes through this binary.
	devenv.ExecIfWrapped()
	if len(os.Args) < 2 {
		fmt.Fprint(os.Stderr, usage)
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	var err error
	switch cmd, args := os.Args[1], os.Args[2:]; cmd {
	case "operator":
		err = runOperator(ctx, args)
	case "worker":
		err = runWorker(ctx, args)
	case "webhook":
		err = runWebhook(ctx, args)
	case "dev":
		err = runDev(ctx, args)
	case "exec":
		err = runExec(ctx, args)
	case "-h", "--help", "help":
		fmt.Print(usage)
		return
	default:
		fmt.Fprintf(os.Stderr, "remedy: unknown command %q\n\n%s", cmd, usage)
		os.Exit(2)
	}
	// The flag package has printed the command's usage.
	if errors.Is(err, flag.ErrHelp) {
		return
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "remedy:", err)
		os.Exit(1)
	}
}
