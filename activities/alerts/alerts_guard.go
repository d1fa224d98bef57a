package alerts

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	workflowservice "go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	ctrlclient "sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/remedy-dev/remedy/api/v1alpha1"
)

// GuardAcquire asks a namespace's guard workflow for one run on one target.
// The alert workflow sends the rule's limits as it verified them.
type GuardAcquire struct {
	AlertID string `json:"alertID"`
	// RunID is the alert workflow's run that holds or awaits the permit:
	// the guard reclaims the permit once that run is closed (empty, from
	// runs started before v0.2: the workflow ID's newest run).
	RunID string `json:"runID,omitempty"`
	// Nonce is the run's secret for this request: the guard's permit
	// carries it back, and only a release that carries it ends the permit
	// (empty from runs recorded before permits were bound to requests).
	Nonce         string        `json:"nonce,omitempty"`
	Rule          string        `json:"rule"`
	Target        string        `json:"target"`
	MaxConcurrent int           `json:"maxConcurrent"`
	Cooldown      time.Duration `json:"cooldown"`
	BreakerRuns   int           `json:"breakerRuns"`
	BreakerWindow time.Duration `json:"breakerWindow"`
	// Slots is the namespace budget: at most this many targets in remediation at once.
	Slots int `json:"slots"`
	// Join: an open request of the same rule and target that also joins
	// (spec.verify) takes this alert in instead of a run of its own.
	Join bool `json:"join,omitempty"`
	// Continues is the nonce of the permit this request continues: the
	// run's next rung of spec.escalation, counted by the circuit breaker.
	Continues string `json:"continues,omitempty"`
	// Step is the rung the permit is for (0: spec.template): its request
	// is the one a reclaim waits for.
	Step int `json:"step,omitempty"`
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
	// Client reads the RemediationRequests of permits' holders.
	Client ctrlclient.Reader
}

// Acquire delivers the request to the namespace's guard, starting it if it
// is not running. The guard answers with a permit signal; a retried
// delivery is recognised by the alert's workflow ID.
func (g *Guards) Acquire(ctx context.Context, namespace string, r GuardAcquire) error {
	id := v1alpha1.AlertGuardWorkflowID(namespace)
	_, err := g.Temporal.SignalWithStartWorkflow(ctx, id, guardSignal, r, client.StartWorkflowOptions{
		ID: id, TaskQueue: g.TaskQueue,
	}, guardWorkflowType, map[string]any{"state": map[string]any{"namespace": namespace}})
	if err != nil {
		return fmt.Errorf("signal guard %s: %w", id, err)
	}
	return nil
}

// Closed returns the alert workflows among holders whose permit is free
// to reclaim: the run is no longer open (terminated, canceled, timed out,
// or gone) and the RemediationRequest it started, if any, has ended. A
// workflow that ends on its own releases its permit itself; one that is
// terminated or times out never runs again to do so. Its request runs on
// without it, and holds the target until it ends.
func (g *Guards) Closed(ctx context.Context, holders []GuardAcquire) ([]string, error) {
	var closed []string
	for _, h := range holders {
		open, err := g.open(ctx, h)
		if err != nil {
			return nil, err
		}
		if !open {
			closed = append(closed, h.AlertID)
		}
	}
	return closed, nil
}

// open says whether the holder's run, or the request it started, still runs.
func (g *Guards) open(ctx context.Context, h GuardAcquire) (bool, error) {
	d, err := g.Temporal.DescribeWorkflowExecution(ctx, h.AlertID, h.RunID)
	var nf *serviceerror.NotFound
	switch {
	case errors.As(err, &nf):
	case err != nil:
		return false, fmt.Errorf("describe alert workflow %s: %w", h.AlertID, err)
	case d.GetWorkflowExecutionInfo().GetStatus() == enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING:
		return true, nil
	}
	// alert/<namespace>/<rule>/<fingerprint>
	parts := strings.Split(h.AlertID, "/")
	if h.RunID == "" || g.Client == nil || len(parts) != 4 {
		return false, nil
	}
	var rr v1alpha1.RemediationRequest
	err = g.Client.Get(ctx, ctrlclient.ObjectKey{Namespace: parts[1], Name: stepRequestName(alertRequestName(parts[2], parts[3], h.RunID), h.Step)}, &rr)
	if apierrors.IsNotFound(err) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("read the RemediationRequest of %s: %w", h.AlertID, err)
	}
	return !rr.Status.Phase.Terminal(), nil
}
