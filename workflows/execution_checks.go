package workflows

import (
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
	if r.localChecks == nil {
		local := workflow.GetVersion(ctx, versionLocalChecks, workflow.DefaultVersion, 1) >= 1
		r.localChecks = &local
	}
	if *r.localChecks {
		return workflow.ExecuteLocalActivity(workflow.WithLocalActivityOptions(ctx, checkOptions), fn, args...)
	}
	return workflow.ExecuteActivity(workflow.WithActivityOptions(ctx, quickOptions), fn, args...)
}
