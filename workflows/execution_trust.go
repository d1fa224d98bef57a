package workflows

import (
	"go.temporal.io/sdk/workflow"

	"github.com/remedy-dev/remedy/activities/gate"
	"github.com/remedy-dev/remedy/api/v1alpha1"
	"github.com/remedy-dev/remedy/internal/actions"
)

var subjects *gate.Subjects

// verifySubject is the run's first activity: a start forged from outside,
// for an object that does not exist or has another UID or spec, does nothing.
func (r *executionRun) verifySubject(ctx workflow.Context, req actions.Request) bool {
	r.setPhase(ctx, v1alpha1.PhaseValidating, "Validating", "verifying the KubernetesExecution requested by "+orUnknown(requesterName(r.in.Spec.Requester)))
	ref := gate.SubjectRef{Namespace: r.in.Namespace, Name: r.in.Name, UID: r.in.UID}
	// None of these reads the target, so a forged start learns nothing of it.
	r.early.startIdentity(ctx, ref, r.in.Spec, req, r.requesterCheck(r.in.Spec.Action))
	err := r.early.subject.Get(ctx, nil)
	if err != nil {
		r.fail(ctx, err, v1alpha1.ReasonSubjectMismatch)
		return false
	}
	return true
}

// checkRequester asks whether the requester may still have the action run.
func (r *executionRun) checkRequester(ctx workflow.Context, action string) error {
	return check(ctx, validation.CheckRequester, r.requesterCheck(action)).Get(ctx, nil)
}

func (r *executionRun) requesterCheck(action string) gate.RequesterCheck {
	return gate.RequesterCheck{Namespace: r.in.Namespace, Requester: r.in.Spec.Requester, Action: action, Target: r.in.Spec.Target}
}

func requesterName(r *v1alpha1.Requester) string {
	if r == nil {
		return ""
	}
	return r.Username
}
