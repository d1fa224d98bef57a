package execution

import (
	"context"
	"time"

	"go.temporal.io/sdk/activity"
	"k8s.io/apimachinery/pkg/api/meta"

	"github.com/remedy-dev/remedy/activities/gate"
	"github.com/remedy-dev/remedy/api/v1alpha1"
	"github.com/remedy-dev/remedy/internal/actions"
)

// Execution holds the activities of one KubernetesExecution run.
type Execution struct {
	// Gate hands out the clients that act as the action's ServiceAccount,
	// so the API server enforces the action's RBAC and the worker itself
	// needs no access to targets: read-only ones to inspect and dry-run, a
	// writing one only to a write that passed it.
	Gate *gate.Gate
	// Mapper resolves target kinds to resources.
	Mapper meta.RESTMapper
	// Heartbeats sends the plan to the server before a write, unthrottled
	// (activity.RecordHeartbeat may hold it back for seconds): a retry after a
	// crash must find it. Nil leaves only the throttled heartbeat.
	Heartbeats Heartbeater
	// HeartbeatEvery bounds the silence between heartbeats while a write runs (default 2s).
	HeartbeatEvery time.Duration
	// Runs binds the reads made for a person (InspectTarget, DryRun) to
	// the run their subject records; nil refuses them.
	Runs gate.ReadBinder
}

// InspectTarget reads the live target as the action's ServiceAccount and plans
// the change: this is the existence check and the before-image for rollback.
// Only the subject's own run reads it (ReadBinder).
func (a *Execution) InspectTarget(ctx context.Context, req actions.Request) (actions.Plan, error) {
	if err := gate.BindRead(ctx, a.Runs, gate.ReadFor{What: "inspect", Action: req.Action, Target: req.Target, Requester: req.Requester}); err != nil {
		return actions.Plan{}, err
	}
	return a.run(ctx, req, actions.Inspect, v1alpha1.ReasonInvalidParameters)
}

// DryRun sends the exact write as a server-side dry-run. Only the subject's
// own run asks for it (ReadBinder).
func (a *Execution) DryRun(ctx context.Context, req actions.Request) (v1alpha1.DryRunResults, error) {
	err := gate.BindRead(ctx, a.Runs, gate.ReadFor{What: "dry-run", Action: req.Action, Target: req.Target, Requester: req.Requester})
	var plan actions.Plan
	if err == nil {
		plan, err = a.run(ctx, req, actions.DryRun, v1alpha1.ReasonDryRunFailed)
	}
	if err != nil {
		return v1alpha1.DryRunResults{Performed: true, Success: false, Warnings: []string{err.Error()}}, err
	}
	res := v1alpha1.DryRunResults{Performed: true, Success: true, EstimatedImpact: actions.Impact(plan.Change)}
	if plan.NoOp {
		res.Warnings = []string{"target already at the desired state; nothing will change"}
	}
	return res, nil
}

// ExecuteResult is what the executing step did.
type ExecuteResult struct {
	Plan    actions.Plan `json:"plan"`
	Retries int32        `json:"retries"`
	// JobName and Logs are set by the job executor.
	JobName string `json:"jobName,omitempty"`
	Logs    string `json:"logs,omitempty"`
}

// Heartbeater records an activity heartbeat at once; client.Client is one.
type Heartbeater interface {
	RecordActivityHeartbeat(ctx context.Context, taskToken []byte, details ...any) error
}

// ExecuteInline performs the action from the worker as the action's
// ServiceAccount, once the write gate passed it. It heartbeats, so a dead worker's attempt is retried within
// the heartbeat timeout, and records the plan before writing, so the retry
// recognises a write that landed (actions.Guard) and reports the change and
// rollback captured from the object it actually wrote.
func (a *Execution) ExecuteInline(ctx context.Context, w gate.Write) (ExecuteResult, error) {
	req := w.Request
	log := activity.GetLogger(ctx)
	beat := newBeater(ctx, a.Heartbeats)
	defer beat.stop()
	var guard actions.Guard
	var prior actions.Plan
	if activity.HasHeartbeatDetails(ctx) && activity.GetHeartbeatDetails(ctx, &prior) == nil && prior.UID != "" {
		guard.Prior = &prior
		// Before the first beat: an empty one would erase the record.
		beat.set(prior)
		log.Info("resuming after an attempt that got as far as writing", "uid", prior.UID, "resourceVersion", prior.ResourceVersion)
	}
	go beat.every(a.HeartbeatEvery)
	guard.Record = func(p actions.Plan) error { return beat.record(p) }
	writer, err := a.Gate.Pass(ctx, w)
	if err != nil {
		return ExecuteResult{}, err
	}
	plan, err := actions.ApplyOnce(ctx, writer.Resource(), writer.Reads(), req, guard)
	if err != nil {
		return ExecuteResult{}, gate.FromAPIServer(v1alpha1.ReasonExecutionFailed, err)
	}
	log.Info("action applied", "action", req.Action, "target", req.Target.String(), "noOp", plan.NoOp, "after", plan.Change.After)
	return ExecuteResult{Plan: plan, Retries: activity.GetInfo(ctx).Attempt - 1}, nil
}

func (a *Execution) run(ctx context.Context, req actions.Request, mode actions.Mode, failReason string) (actions.Plan, error) {
	inspector, err := a.Gate.Inspector(actions.ServiceAccountName(req.Action))
	if err != nil {
		return actions.Plan{}, err
	}
	plan, err := actions.Run(ctx, inspector.Dynamic, a.Mapper, req, mode)
	return plan, gate.FromAPIServer(failReason, err)
}
