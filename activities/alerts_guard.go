package activities

import (
	"context"
	"errors"
	"fmt"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	workflowservice "go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
)

// GuardAcquire asks a namespace's guard workflow for one run on one target.
// The alert workflow sends the rule's limits as it verified them.
type GuardAcquire struct {
	AlertID string `json:"alertID"`
	// RunID is the alert workflow's run that holds or awaits the permit:
	// the guard reclaims the permit once that run is closed (empty, from
	// runs started before v0.2: the workflow ID's newest run).
	RunID         string        `json:"runID,omitempty"`
	Rule          string        `json:"rule"`
	Target        string        `json:"target"`
	MaxConcurrent int           `json:"maxConcurrent"`
	Cooldown      time.Duration `json:"cooldown"`
	BreakerRuns   int           `json:"breakerRuns"`
	BreakerWindow time.Duration `json:"breakerWindow"`
	// Slots is the namespace budget: at most this many targets in remediation at once.
	Slots int `json:"slots"`
}

// GuardStarter signal-with-starts the guard workflow and describes the
// alert workflows that hold its permits; client.Client is one.
type GuardStarter interface {
	SignalWithStartWorkflow(ctx context.Context, workflowID, signalName string, signalArg any,
		options client.StartWorkflowOptions, workflow any, workflowArgs ...any) (client.WorkflowRun, error)
	DescribeWorkflowExecution(ctx context.Context, workflowID, runID string) (*workflowservice.DescribeWorkflowExecutionResponse, error)
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

// Closed returns the alert workflows among holders whose run is no longer
// open: terminated, canceled, timed out, or gone. Their permits are the
// guard's to reclaim; a workflow that ends on its own releases its permit
// itself, but one that is terminated or times out never runs again to do so.
func (g *Guards) Closed(ctx context.Context, holders []GuardAcquire) ([]string, error) {
	var closed []string
	for _, h := range holders {
		d, err := g.Temporal.DescribeWorkflowExecution(ctx, h.AlertID, h.RunID)
		var nf *serviceerror.NotFound
		switch {
		case errors.As(err, &nf):
			closed = append(closed, h.AlertID)
		case err != nil:
			return nil, fmt.Errorf("describe alert workflow %s: %w", h.AlertID, err)
		case d.GetWorkflowExecutionInfo().GetStatus() != enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING:
			closed = append(closed, h.AlertID)
		}
	}
	return closed, nil
}
