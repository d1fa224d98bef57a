package workflows

import (
	"go.temporal.io/sdk/workflow"

	"github.com/remedy-dev/remedy/activities/gate"
	"github.com/remedy-dev/remedy/internal/actions"
)

// remediationFailureReadable is the workflow.GetVersion change ID of a
// step's failed dry-run published only as the requester may read its
// target. Runs recorded before it publish the API server's text.
const remediationFailureReadable = "remediation-dry-run-failure-readable"

// dryRunFailure is the message of step req's failed dry-run as the request
// may publish it: the API server's text (which may quote the target's
// values) only when the requester may get the target. The requester's read
// access is asked on this failure path only, so a request that passes its
// checks asks nothing more.
func (r *remediationRun) dryRunFailure(ctx workflow.Context, lctx workflow.Context, req actions.Request, err error) string {
	if _, ok := gate.APITextOf(err); !ok {
		return messageOf(err)
	}
	if workflow.GetVersion(ctx, remediationFailureReadable, workflow.DefaultVersion, 1) == workflow.DefaultVersion {
		return messageOf(err)
	}
	var reads gate.Readable
	check := gate.RequesterCheck{Namespace: r.in.Namespace, Requester: req.Requester, Action: req.Action, Target: req.Target}
	if e := workflow.ExecuteLocalActivity(lctx, validation.MayReadTarget, check).Get(ctx, &reads); e != nil {
		workflow.GetLogger(ctx).Warn("could not ask whether the requester may get the target; the dry-run's message is not shown", "error", e)
		reads = gate.Readable{}
	}
	return reads.Failure(err)
}
