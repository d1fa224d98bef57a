package activities

import (
	"context"
	"fmt"
	"time"

	"go.temporal.io/sdk/client"
)

// GuardAcquire asks a namespace's guard workflow for one run on one target.
// The alert workflow sends the rule's limits as it verified them.
type GuardAcquire struct {
	AlertID       string        `json:"alertID"`
	Rule          string        `json:"rule"`
	Target        string        `json:"target"`
	MaxConcurrent int           `json:"maxConcurrent"`
	Cooldown      time.Duration `json:"cooldown"`
	BreakerRuns   int           `json:"breakerRuns"`
	BreakerWindow time.Duration `json:"breakerWindow"`
	// Slots is the namespace budget: at most this many targets in remediation at once.
	Slots int `json:"slots"`
}

// GuardStarter signal-with-starts the guard workflow; client.Client is one.
type GuardStarter interface {
	SignalWithStartWorkflow(ctx context.Context, workflowID, signalName string, signalArg any,
		options client.StartWorkflowOptions, workflow any, workflowArgs ...any) (client.WorkflowRun, error)
}

// Names of the guard workflow and its signal, as the workflows package registers them.
const (
	guardWorkflowType = "AlertGuardWorkflow"
	guardSignal       = "acquire"
)

// Guards asks a namespace's guard for permits.
type Guards struct {
	Temporal  GuardStarter
	TaskQueue string
}

// Acquire delivers the request to the namespace's guard, starting it if it
// is not running. The guard answers with a permit signal; a retried
// delivery is recognised by the alert's workflow ID.
func (g *Guards) Acquire(ctx context.Context, namespace string, r GuardAcquire) error {
	id := AlertGuardWorkflowID(namespace)
	_, err := g.Temporal.SignalWithStartWorkflow(ctx, id, guardSignal, r, client.StartWorkflowOptions{
		ID: id, TaskQueue: g.TaskQueue,
	}, guardWorkflowType, map[string]any{"state": map[string]any{"namespace": namespace}})
	if err != nil {
		return fmt.Errorf("signal guard %s: %w", id, err)
	}
	return nil
}
