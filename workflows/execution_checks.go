package workflows

import (
	"reflect"
	"runtime"
	"time"

	"go.temporal.io/sdk/workflow"
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
//
// The checks start in two groups instead of one by one, so each group costs
// its slowest check rather than their sum: first those that read no target
// (subject, spec, requester), then, once the subject and the requester are
// verified, RBAC, the target and the policy. validate still takes the
// results in the seed's order, so the first failure in that order decides
// the run.
func (r *executionRun) check(ctx workflow.Context, fn any, args ...any) workflow.Future {
	if f, ok := r.early[checkName(fn)]; ok {
		delete(r.early, checkName(fn))
		return f
	}
	return workflow.ExecuteLocalActivity(workflow.WithLocalActivityOptions(ctx, checkOptions), fn, args...)
}

// ahead starts a check now; the check of the same function later takes its result.
func (r *executionRun) ahead(ctx workflow.Context, fn any, args ...any) {
	f := r.check(ctx, fn, args...)
	if r.early == nil {
		r.early = map[string]workflow.Future{}
	}
	r.early[checkName(fn)] = f
}

func checkName(fn any) string {
	return runtime.FuncForPC(reflect.ValueOf(fn).Pointer()).Name()
}
