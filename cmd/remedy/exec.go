package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"time"

	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/restmapper"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/remedy-dev/remedy/activities/execution"
	"github.com/remedy-dev/remedy/internal/actions"
)

// runExec is the job executor's entrypoint. It runs as the action's
// ServiceAccount (the pod's own token, no impersonation), so the API server
// enforces the action's RBAC on the write, and writes only after the worker's
// exec gate passed it, immediately before (activities/execution/job_gate.go).
func runExec(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("exec", flag.ContinueOnError)
	request := fs.String("request", os.Getenv(execution.RequestEnv), "the action request as JSON (default $"+execution.RequestEnv+")")
	termLog := fs.String("termination-log", "/dev/termination-log", "file the plan (or the error) is written to for the worker to read")
	gate := execution.DefaultGateClient()
	fs.StringVar(&gate.URL, "exec-gate-url", gate.URL, "the worker's exec gate, asked immediately before the write (default $"+execution.ExecGateURLEnv+")")
	fs.StringVar(&gate.TokenFile, "exec-gate-token-file", gate.TokenFile, "the Pod's projected token of audience "+execution.ExecGateAudience)
	fs.DurationVar(&gate.Wait, "exec-gate-wait", 2*time.Minute, "how long to keep asking while no run answers; then exit non-zero, nothing written")
	if err := fs.Parse(args); err != nil {
		return err
	}
	// The worker reports the termination log, so setup failures go there too.
	fail := func(err error) error {
		_ = os.WriteFile(*termLog, []byte(err.Error()), 0o644)
		return err
	}
	if *request == "" {
		return fail(fmt.Errorf("no request: set --request or $%s", execution.RequestEnv))
	}
	// In a pod this is the in-cluster config; KUBECONFIG elsewhere.
	cfg, err := ctrl.GetConfig()
	if err != nil {
		return fail(fmt.Errorf("load kubeconfig: %w", err))
	}
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return fail(fmt.Errorf("build dynamic client: %w", err))
	}
	dc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		return fail(fmt.Errorf("build discovery client: %w", err))
	}
	mapper := restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(dc))
	plan, err := execution.ExecRequest(ctx, dyn, mapper, []byte(*request), *termLog, func(ctx context.Context, req actions.Request) error {
		if err := gate.Ask(ctx, req); err != nil {
			return err
		}
		fmt.Printf("the exec gate passed %s %s\n", req.Action, req.Target.String())
		return nil
	})
	if err != nil {
		return err
	}
	if plan.NoOp {
		fmt.Printf("%s %s: already at the target state (%s)\n", plan.Change.Action, target(plan), plan.Change.After)
		return nil
	}
	fmt.Printf("%s %s: %s\n", plan.Change.Action, target(plan), actions.Impact(plan.Change))
	return nil
}

func target(p actions.Plan) string {
	return p.Change.Namespace + "/" + p.Change.Kind + "/" + p.Change.Name
}
