package execution

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/util/retry"

	"github.com/remedy-dev/remedy/internal/actions"
)

// ExecRequest is the body of `remedy exec`: it asks the write gate (ask,
// immediately before the write), applies the request with the caller's
// identity (the pod's ServiceAccount) and writes the plan's JSON, or the
// error, to the termination log that RunJob reads. A refusal writes nothing.
func ExecRequest(ctx context.Context, dyn dynamic.Interface, mapper meta.RESTMapper, request []byte, terminationLog string,
	ask func(context.Context, actions.Request) error) (actions.Plan, error) {
	var req actions.Request
	if err := json.Unmarshal(request, &req); err != nil {
		err = fmt.Errorf("decode request: %w", err)
		return actions.Plan{}, errors.Join(err, writeTermination(terminationLog, err.Error()))
	}
	if err := ask(ctx, req); err != nil {
		err = fmt.Errorf("%s %s: %w", req.Action, req.Target.String(), err)
		return actions.Plan{}, errors.Join(err, writeTermination(terminationLog, err.Error()))
	}
	// The plan pins the resourceVersion it was made from, so a controller's
	// concurrent write conflicts; re-reading and re-planning is cheaper than
	// failing the pod and waiting out the Job's backoff.
	var plan actions.Plan
	err := retry.RetryOnConflict(retry.DefaultBackoff, func() (err error) {
		plan, err = actions.Run(ctx, dyn, mapper, req, actions.Apply)
		return err
	})
	if err != nil {
		err = fmt.Errorf("%s %s: %w", req.Action, req.Target.String(), err)
		return plan, errors.Join(err, writeTermination(terminationLog, err.Error()))
	}
	out, err := json.Marshal(plan)
	if err == nil && len(out) > maxTerminationMessage {
		// The patch is already applied and the rest of the plan is what
		// callers need; drop it rather than let the kubelet cut the JSON.
		trimmed := plan
		trimmed.Patch = ""
		out, err = json.Marshal(trimmed)
	}
	if err != nil {
		return plan, fmt.Errorf("encode plan: %w", err)
	}
	return plan, writeTermination(terminationLog, string(out))
}

func writeTermination(path, msg string) error {
	if len(msg) > maxTerminationMessage {
		msg = msg[:maxTerminationMessage]
	}
	if err := os.WriteFile(path, []byte(msg), 0o644); err != nil {
		return fmt.Errorf("write termination log %s: %w", path, err)
	}
	return nil
}
