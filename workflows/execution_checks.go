package workflows

import (
	"reflect"
	"runtime"
	"time"

	"go.temporal.io/sdk/workflow"
)

// versionLocalChecks gates the read-only checks (subject, spec, requester,
// RBAC, target, policy, dry-run) as local activities: they change nothing, so
// a retry from the start of the workflow task is as good as a durable retry
// point, and each costs one marker event instead of an activity round trip
// through the task queue (three activity events and a workflow task each).
// Runs started before it replay their checks as activities.
const versionLocalChecks = "local-checks"

// checkOptions mirror quickOptions for a local activity. Past the local retry
// threshold the SDK backs off on a timer, so an API server that is down for a
// while still fails the run only after the five attempts.
var checkOptions = workflow.LocalActivityOptions{
	ScheduleToCloseTimeout: 2 * time.Minute,
	StartToCloseTimeout:    quickOptions.StartToCloseTimeout,
	RetryPolicy:            quickOptions.RetryPolicy,
}

// check runs one read-only check: a local activity on runs started on the
// local-checks version, an activity with quickOptions before it. The version
// is asked at the first check, so runs in flight across the upgrade keep
// their activities until they next check (a rollback's requester check).
func (r *executionRun) check(ctx workflow.Context, fn any, args ...any) workflow.Future {
	if f, ok := r.early[checkName(fn)]; ok {
		delete(r.early, checkName(fn))
		return f
	}
	if r.local(ctx) {
		return workflow.ExecuteLocalActivity(workflow.WithLocalActivityOptions(ctx, checkOptions), fn, args...)
	}
	return workflow.ExecuteActivity(workflow.WithActivityOptions(ctx, quickOptions), fn, args...)
}

// local asks the local-checks version once per run.
func (r *executionRun) local(ctx workflow.Context) bool {
	if r.localChecks == nil {
		local := workflow.GetVersion(ctx, versionLocalChecks, workflow.DefaultVersion, 1) >= 1
		r.localChecks = &local
	}
	return *r.localChecks
}

// versionParallelChecks starts the read-only checks in two groups instead of
// one by one, so each group costs its slowest check rather than their sum:
// first those that read no target (subject, spec, requester), then, once the
// subject and the requester are verified, RBAC, the target and the policy.
// validate still takes the results in the seed's order, so the first failure
// in that order decides the run, as before. Asked after the local-checks
// version, on runs that check locally.
const versionParallelChecks = "parallel-checks"

// parallel reports whether this run starts its checks in groups.
func (r *executionRun) parallel(ctx workflow.Context) bool {
	if r.parallelChecks == nil {
		on := r.local(ctx) && workflow.GetVersion(ctx, versionParallelChecks, workflow.DefaultVersion, 1) >= 1
		r.parallelChecks = &on
	}
	return *r.parallelChecks
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
