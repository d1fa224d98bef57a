package workflows

import (
	"time"

	"go.temporal.io/sdk/workflow"

	"github.com/remedy-dev/remedy/activities/gate"
	"github.com/remedy-dev/remedy/api/v1alpha1"
	"github.com/remedy-dev/remedy/internal/actions"
)

// checkOptions mirror quickOptions for a local activity. Past the local retry
// threshold the SDK backs off on a timer, so an API server that is down for a
// while still fails the run only after the five attempts.
var checkOptions = workflow.LocalActivityOptions{
	ScheduleToCloseTimeout: 2 * time.Minute,
	StartToCloseTimeout:    quickOptions.StartToCloseTimeout,
	RetryPolicy:            quickOptions.RetryPolicy,
}

// check runs one read-only check (subject, spec, requester, RBAC, target,
// policy, dry-run) as a local activity: it changes nothing, so a retry from
// the start of the workflow task is as good as a durable retry point, and it
// costs one marker event instead of an activity round trip through the task
// queue (three activity events and a workflow task each).
func check(ctx workflow.Context, fn any, args ...any) workflow.Future {
	return workflow.ExecuteLocalActivity(workflow.WithLocalActivityOptions(ctx, checkOptions), fn, args...)
}

// prefetch holds the checks validate starts ahead of their turn. They start
// in two groups instead of one by one, so each group costs its slowest check
// rather than their sum: first those that read no target (startIdentity),
// then, once the subject and the requester are verified, RBAC, the target
// and the policy (startTarget). Each future is started once, with its own
// arguments, and awaited by its name, so no check can take another's result;
// validate awaits them in the order docs/concepts.md gives for
// Validating, so the first failure in that order decides the run.
type prefetch struct {
	subject, spec, requester workflow.Future
	rbac, target, policy     workflow.Future
	// readable is started only when the run redacts (redactChange).
	readable workflow.Future
}

// startIdentity starts the checks that read no target: the subject, the
// spec and the requester's grant.
func (p *prefetch) startIdentity(ctx workflow.Context, ref gate.SubjectRef, spec v1alpha1.KubernetesExecutionSpec, req actions.Request, requester gate.RequesterCheck) {
	p.subject = check(ctx, subjects.VerifyExecution, ref, spec)
	p.spec = check(ctx, validation.CheckSpec, spec, req)
	p.requester = check(ctx, validation.CheckRequester, requester)
}

// startTarget starts the checks that read the target or the policy, and
// the requester's read check when the run redacts.
func (p *prefetch) startTarget(ctx workflow.Context, req actions.Request, requester gate.RequesterCheck, redacts bool) {
	p.rbac = check(ctx, validation.CheckRBAC, req)
	p.target = check(ctx, executionActs.InspectTarget, req)
	p.policy = check(ctx, validation.EvaluatePolicy, req)
	if redacts {
		p.readable = check(ctx, validation.MayReadTarget, requester)
	}
}
