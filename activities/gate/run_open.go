package gate

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"go.temporal.io/sdk/activity"

	"github.com/remedy-dev/remedy/activities/fail"
	"github.com/remedy-dev/remedy/api/v1alpha1"
	"github.com/remedy-dev/remedy/internal/runs"
)

// Workflow types of the runs that record no run ID on an object of their own.
const (
	ReloadWorkflowType = "ReloadWorkflow"
	DriftWorkflowType  = "DriftWorkflow"
	AlertWorkflowType  = "AlertWorkflow"
)

// OpenRuns binds the runs no object records (reload, drift and alert runs)
// to their subject. Their workflows are signal-with-started on
// deterministic IDs and continue as new, so nothing can record a fixed run
// ID for them. Instead the caller, as Temporal's server names it
// (activity.GetInfo, never the input), must be the workflow ID derived
// from the subject and that ID's open run, of the subject's workflow type
// on Remedy's task queue (runs.Open, the check the operator's run-ID
// backfill makes). Only one run of an ID is open: a closed run's replayed
// payload, a rogue workflow under the same ID on its own task queue or of
// its own type, and any other workflow act for nobody.
type OpenRuns struct {
	// Temporal describes runs (the worker's client); TaskQueue is Remedy's.
	Temporal  runs.Describer
	TaskQueue string

	mu sync.Mutex
	// open remembers runs found open: workflow ID -> run ID and when. Only
	// positive answers are kept, and only the run ID found open passes from
	// it: a continue-as-new's next run is a new run ID, and is described.
	open map[string]openRun
}

type openRun struct {
	runID string
	at    time.Time
}

// openRunTTL bounds how long a run found open is believed without asking
// again; maxOpenRuns bounds the memory (the oldest half is dropped).
const (
	openRunTTL  = time.Minute
	maxOpenRuns = 4096
)

// Reload requires the caller to be the open reload run of the workload.
func (o *OpenRuns) Reload(ctx context.Context, namespace, kind, name string) error {
	return o.callerIs(ctx, v1alpha1.ReloadWorkflowID(namespace, kind, name), ReloadWorkflowType)
}

// Drift requires the caller to be the open drift run of the parent.
func (o *OpenRuns) Drift(ctx context.Context, parentUID string) error {
	if parentUID == "" {
		return fail.Permanent(v1alpha1.ReasonSubjectMismatch, errors.New("a drift run acts only for a parent with a UID"))
	}
	return o.callerIs(ctx, v1alpha1.DriftWorkflowID(parentUID), DriftWorkflowType)
}

// Alert requires the caller to be the open alert run of the rule's alert.
func (o *OpenRuns) Alert(ctx context.Context, namespace, rule, fingerprint string) error {
	return o.callerIs(ctx, v1alpha1.AlertWorkflowID(namespace, rule, fingerprint), AlertWorkflowType)
}

// callerIs requires the calling run to be id's open run of workflowType on
// Remedy's task queue. Temporal not answering is retried; anything else
// fails for good.
func (o *OpenRuns) callerIs(ctx context.Context, id, workflowType string) error {
	caller := activity.GetInfo(ctx).WorkflowExecution
	if caller.ID != id {
		return fail.Permanent(v1alpha1.ReasonSubjectMismatch, fmt.Errorf("this subject is acted for by workflow %s only, not %s", id, caller.ID))
	}
	if o == nil || o.Temporal == nil {
		return fail.Permanent(v1alpha1.ReasonSubjectMismatch, fmt.Errorf("the worker cannot describe runs, so run %s of %s cannot be verified", caller.RunID, id))
	}
	if o.known(id, caller.RunID) {
		return nil
	}
	open, err := runs.Open(ctx, o.Temporal, id, workflowType, o.TaskQueue, nil)
	if err != nil {
		return err
	}
	if open == "" || open != caller.RunID {
		return fail.Permanent(v1alpha1.ReasonSubjectMismatch, fmt.Errorf("run %s of %s is not its open %s on Remedy's task queue: a payload from another run, or a run of another kind or queue under its ID, acts for nobody",
			caller.RunID, id, workflowType))
	}
	o.remember(id, open)
	return nil
}

func (o *OpenRuns) known(id, runID string) bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	r, ok := o.open[id]
	return ok && r.runID == runID && time.Since(r.at) < openRunTTL
}

func (o *OpenRuns) remember(id, runID string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.open == nil {
		o.open = map[string]openRun{}
	}
	if len(o.open) >= maxOpenRuns {
		for k, r := range o.open {
			if time.Since(r.at) >= openRunTTL || len(o.open) > maxOpenRuns/2 {
				delete(o.open, k)
			}
		}
	}
	o.open[id] = openRun{runID: runID, at: time.Now()}
}
