// Command remedy is Remedy's product binary, the one its image ships:
// operator, worker, drift webhook, job executor, demo app and kubectl
// plugin. The whole platform locally is cmd/remedy-dev, a binary of its own,
// so that this one links no envtest and no Temporal dev server.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/remedy-dev/remedy/internal/release"
)

const usage = `usage: remedy <command> [flags]

commands:
  operator   run the controller manager (reconcilers that start and mirror workflows)
  worker     run the Temporal worker (workflows and activities)
  webhook    run the drift admission webhook (kausality semantics; signals drift workflows)
  exec       perform one action as the pod's ServiceAccount (the job executor's entrypoint)
  demo-app   the demo workloads' HTTP server (reports its mounted config; /readyz)
  kubectl    the kubectl plugin: approve, reject, rollback, status, why (also run as
             kubectl-remedy, e.g. through a symlink on PATH: kubectl remedy ...)
  version    print the version, the VCS revision and the Go version (also --version)

Run 'remedy <command> -h' for the flags of a command.
`

func main() {
	args := os.Args
	if isKubectlPlugin(args[0]) {
		args = append([]string{args[0], "kubectl"}, args[1:]...)
	}
	if len(args) < 2 {
		fmt.Fprint(os.Stderr, usage)
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	var err error
	switch cmd, args := args[1], args[2:]; cmd {
	case "operator":
		err = runOperator(ctx, args)
	case "worker":
		err = runWorker(ctx, args)
	case "webhook":
		err = runWebhook(ctx, args)
	case "exec":
		err = runExec(ctx, args)
	case "demo-app":
		err = runDemoApp(ctx, args)

	case "kubectl":
		if err := runKubectl(ctx, args); err != nil {
			fmt.Fprintln(os.Stderr, "error:", err)
			os.Exit(1)
		}
		return
	case "version", "--version":
		fmt.Println(release.String())
		return
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
