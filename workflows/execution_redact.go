package workflows

import (
	"crypto/rand"

	"go.temporal.io/sdk/workflow"

	"github.com/remedy-dev/remedy/activities/gate"
	"github.com/remedy-dev/remedy/api/v1alpha1"
	"github.com/remedy-dev/remedy/internal/actions"
)

// redactChange is the workflow.GetVersion change ID of publishing the
// target's values only as the requester may read them, with the dry-run
// moved after the preconditions. Runs recorded before it keep their path
// and publish as they did.
const redactChange = "published-values-readable"

// readable is how the run publishes the values it reads from its target:
// the status and its Events are read by whoever may get the execution, and
// the run writes for a requester who may have `execute` on the action but not
// `get` on the target.
func (r *executionRun) readable() gate.Readable {
	if !r.redacts {
		return gate.Readable{Allowed: true}
	}
	return r.reads
}

// change is c as the run may publish it.
func (r *executionRun) change(c v1alpha1.ResourceChange) v1alpha1.ResourceChange {
	return r.readable().Change(c)
}

// impact is Impact(c), or one marker when the values are not shown.
func (r *executionRun) impact(c v1alpha1.ResourceChange) string {
	if v := r.readable(); !v.Allowed {
		return v.Value(actions.Impact(c))
	}
	return actions.Impact(c)
}

// takeReadable takes the requester's read check started ahead; a check that
// failed shows nothing rather than failing the run.
func (r *executionRun) takeReadable(ctx workflow.Context) {
	if !r.redacts {
		return
	}
	if err := r.early.readable.Get(ctx, &r.reads); err != nil {
		workflow.GetLogger(ctx).Warn("could not ask whether the requester may get the target; values are not shown", "error", err)
		r.reads = gate.Readable{}
	}
}

// captureRollback keeps the inverse in the run and publishes it as the
// requester may read it, with a digest under a key of the run's own by which
// the write gate recognises the rollback: the status no longer has to
// carry the real parameters for the gate to compare. Encoding JSON is
// deterministic (map keys sorted); workflowcheck flags encoding/json only
// because it follows reflect into the runtime, hence the
// //workflowcheck:ignore lines.
func (r *executionRun) captureRollback(ctx workflow.Context, info v1alpha1.RollbackInformation) {
	if !r.redacts || !info.Available {
		//workflowcheck:ignore
		published := r.readable().Rollback(info, "")
		r.status.RollbackInformation = &published
		return
	}
	r.inverse = &info
	if r.rollbackKey == nil {
		err := workflow.SideEffect(ctx, func(workflow.Context) any {
			key := make([]byte, 32)
			// Random once, then recorded: SideEffect is what keeps it deterministic.
			//workflowcheck:ignore
			_, _ = rand.Read(key)
			return key
		}).Get(&r.rollbackKey)
		if err != nil {
			workflow.GetLogger(ctx).Error("rollback key", "error", err)
		}
	}
	var params v1alpha1.ActionParameters
	if info.RollbackParameters != nil {
		params = *info.RollbackParameters
	}
	//workflowcheck:ignore
	digest, err := gate.RollbackDigest(r.rollbackKey, params)
	if err != nil || len(r.rollbackKey) == 0 {
		workflow.GetLogger(ctx).Error("rollback digest", "error", err)
		r.inverse = nil
		r.status.RollbackInformation = &v1alpha1.RollbackInformation{Reason: "the captured inverse could not be sealed for the write gate, so no rollback is offered"}
		return
	}
	//workflowcheck:ignore
	published := r.readable().Rollback(info, digest)
	r.status.RollbackInformation = &published
}

// captured is the inverse the rollback runs: the run's own copy, or, in a
// run recorded before values were redacted, the one its status holds.
func (r *executionRun) captured() *v1alpha1.RollbackInformation {
	if r.inverse != nil {
		return r.inverse
	}
	return r.status.RollbackInformation
}
