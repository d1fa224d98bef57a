package activities

import (
	"context"
	"fmt"
	"sync"

	"go.temporal.io/sdk/activity"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"

	"github.com/remedy-dev/remedy/activities/actions"
	"github.com/remedy-dev/remedy/api/v1alpha1"
)

// Execution holds the activities of one KubernetesExecution run.
type Execution struct {
	// Config is the worker's own identity; action calls impersonate the
	// action's ServiceAccount on top of it, so the API server enforces the
	// action's RBAC and the worker itself needs no access to targets.
	Config *rest.Config
	// ActionNamespace holds the remedy-action-<action> ServiceAccounts.
	ActionNamespace string
	// Mapper resolves target kinds to resources.
	Mapper meta.RESTMapper

	clients sync.Map // action name -> dynamic.Interface
}

// InspectTarget reads the live target as the action's ServiceAccount and plans
// the change: this is the existence check and the before-image for rollback.
func (a *Execution) InspectTarget(ctx context.Context, req actions.Request) (actions.Plan, error) {
	return a.run(ctx, req, actions.Inspect, ReasonInvalidParameters)
}

// DryRun sends the exact write as a server-side dry-run.
func (a *Execution) DryRun(ctx context.Context, req actions.Request) (v1alpha1.DryRunResults, error) {
	plan, err := a.run(ctx, req, actions.DryRun, ReasonDryRunFailed)
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

// ExecuteInline performs the action from the worker as the action's ServiceAccount.
// Re-running it after a success finds the object at the target state and writes nothing.
func (a *Execution) ExecuteInline(ctx context.Context, req actions.Request) (ExecuteResult, error) {
	plan, err := a.run(ctx, req, actions.Apply, ReasonExecutionFailed)
	if err != nil {
		return ExecuteResult{}, err
	}
	activity.GetLogger(ctx).Info("action applied", "action", req.Action, "target", req.Target.String(), "noOp", plan.NoOp, "after", plan.Change.After)
	return ExecuteResult{Plan: plan, Retries: activity.GetInfo(ctx).Attempt - 1}, nil
}

func (a *Execution) run(ctx context.Context, req actions.Request, mode actions.Mode, failReason string) (actions.Plan, error) {
	dyn, err := a.clientFor(req.Action)
	if err != nil {
		return actions.Plan{}, err
	}
	plan, err := actions.Run(ctx, dyn, a.Mapper, req, mode)
	return plan, classify(failReason, err)
}

func (a *Execution) clientFor(action string) (dynamic.Interface, error) {
	if c, ok := a.clients.Load(action); ok {
		return c.(dynamic.Interface), nil
	}
	c, err := dynamic.NewForConfig(AsServiceAccount(a.Config, a.ActionNamespace, actions.ServiceAccountName(action)))
	if err != nil {
		return nil, fmt.Errorf("build client for action %s: %w", action, err)
	}
	actual, _ := a.clients.LoadOrStore(action, c)
	return actual.(dynamic.Interface), nil
}
