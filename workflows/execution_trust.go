package workflows

import (
	"go.temporal.io/sdk/workflow"

	"github.com/remedy-dev/remedy/activities"
	"github.com/remedy-dev/remedy/api/v1alpha1"
)

// versionTrust gates the trust checks: the run re-reads its object before
// acting, and the requester's grants are checked again for the action and for
// any rollback. Runs started before it replay without them.
const versionTrust = "requester-trust"

var subjects *activities.Subjects

// verifySubject is the run's first activity: a start forged from outside,
// for an object that does not exist or has another UID or spec, does nothing.
func (r *executionRun) verifySubject(ctx workflow.Context) bool {
	r.trust = workflow.GetVersion(ctx, versionTrust, workflow.DefaultVersion, 1) >= 1
	if !r.trust {
		return true
	}
	r.setPhase(ctx, v1alpha1.PhaseValidating, "Validating", "verifying the KubernetesExecution requested by "+orUnknown(requesterName(r.in.Spec.Requester)))
	ref := activities.SubjectRef{Namespace: r.in.Namespace, Name: r.in.Name, UID: r.in.UID}
	err := r.check(ctx, subjects.VerifyExecution, ref, r.in.Spec).Get(ctx, nil)
	if err != nil {
		r.fail(ctx, err, activities.ReasonSubjectMismatch)
		return false
	}
	return true
}

// checkRequester asks whether the requester may still have the action run.
func (r *executionRun) checkRequester(ctx workflow.Context, action string) error {
	in := activities.RequesterCheck{Namespace: r.in.Namespace, Requester: r.in.Spec.Requester, Action: action, Target: r.in.Spec.Target}
	return r.check(ctx, validation.CheckRequester, in).Get(ctx, nil)
}

func requesterName(r *v1alpha1.Requester) string {
	if r == nil {
		return ""
	}
	return r.Username
}
