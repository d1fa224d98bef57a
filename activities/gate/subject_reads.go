package gate

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"go.temporal.io/sdk/activity"
	"k8s.io/apimachinery/pkg/api/equality"

	"github.com/remedy-dev/remedy/activities/fail"
	"github.com/remedy-dev/remedy/api/v1alpha1"
)

// ReadBinder binds a read Remedy makes for a person to the run its subject
// records; RunReads is the one the worker uses.
type ReadBinder interface {
	bindRead(ctx context.Context, r ReadFor) error
}

// ReadFor is what a read made for a person claims: the action (empty for a
// condition), the target and whose read it is.
type ReadFor struct {
	What      string
	Action    string
	Target    v1alpha1.ObjectRef
	Requester *v1alpha1.Requester
}

// RunReads requires the caller of a read made for a person (the target's
// inspection, the dry-run, a condition) to be the run its subject records,
// and the read to be one that subject asks for. The subject is the one the
// caller's workflow ID names, as Temporal's server names the caller
// (activity.GetInfo), never anything in the input: kexec/<ns>/<name>/<uid>
// is that KubernetesExecution, rr/... that RemediationRequest (its steps'
// targets), alert/<ns>/... an alert run, which its namespace guard's permit
// binds (Permits, the alert guard's). So the inputs need no subject field, and a
// read scheduled by a run started before this check (its input has none)
// is bound like any other. A read scheduled by a rogue workflow (its own
// ID, or a closed run's ID under a new run) reads nothing: non-retryable
// SubjectMismatch.
//
// The subject is read through Seen: the binding of a UID to its recorded
// run never changes once set, so a pass the worker saw holds (the run's
// status push and its subject check keep it there); anything else is read
// live.
type RunReads struct {
	Subjects *Subjects
	// Permits binds an alert run's reads (shadow mode's dry-runs) to the
	// permit the run holds (the alerts package's Permits); nil refuses them.
	Permits func(ctx context.Context, namespace string) error
}

func (b *RunReads) bindRead(ctx context.Context, r ReadFor) error {
	caller := activity.GetInfo(ctx).WorkflowExecution
	parts := strings.SplitN(caller.ID, "/", 4)
	if len(parts) != 4 {
		return fail.Permanent(v1alpha1.ReasonSubjectMismatch, fmt.Errorf("%s reads for a person only in the run of a Remedy object, not in workflow %s", r.What, caller.ID))
	}
	ref := SubjectRef{Namespace: parts[1], Name: parts[2], UID: parts[3]}
	switch parts[0] {
	case "kexec":
		k, ok := b.Subjects.seenExecution(ctx, ref, nil)
		if !ok {
			var err error
			if k, err = b.Subjects.execution(ctx, ref, nil); err != nil {
				return err
			}
		}
		if (r.Action != "" && r.Action != k.Spec.Action) || r.Target != k.Spec.Target {
			return fail.Permanent(v1alpha1.ReasonSubjectMismatch, fmt.Errorf("KubernetesExecution %s/%s runs %s on %s only: its run does not %s %s of %s",
				ref.Namespace, ref.Name, k.Spec.Action, k.Spec.Target.String(), r.What, r.Action, r.Target.String()))
		}
		return sameRequester(r, k.Spec.Requester, "KubernetesExecution", ref)
	case "rr":
		rr, ok := b.Subjects.seenRemediation(ctx, ref, nil)
		if !ok {
			var err error
			if rr, err = b.Subjects.remediation(ctx, ref); err != nil {
				return err
			}
		}
		for _, s := range rr.Spec.Steps {
			if (r.Action == "" || r.Action == s.Execution.Action) && r.Target == s.Execution.Target {
				return sameRequester(r, rr.Spec.Requester, "RemediationRequest", ref)
			}
		}
		return fail.Permanent(v1alpha1.ReasonSubjectMismatch, fmt.Errorf("no step of RemediationRequest %s/%s runs %s on %s: its run does not %s it",
			ref.Namespace, ref.Name, r.Action, r.Target.String(), r.What))
	case "alert":
		if b.Permits == nil {
			return fail.Permanent(v1alpha1.ReasonSubjectMismatch, errors.New("the worker cannot verify alert runs, so it reads nothing for one"))
		}
		return b.Permits(ctx, ref.Namespace)
	}
	return fail.Permanent(v1alpha1.ReasonSubjectMismatch, fmt.Errorf("%s reads for a person only in the run of a Remedy object, not in workflow %s", r.What, caller.ID))
}

// sameRequester requires the read to be made for the subject's requester.
func sameRequester(r ReadFor, requester *v1alpha1.Requester, kind string, ref SubjectRef) error {
	if !equality.Semantic.DeepEqual(r.Requester, requester) {
		return fail.Permanent(v1alpha1.ReasonSubjectMismatch, fmt.Errorf("%s %s/%s reads for its own requester only: its run does not %s for another", kind, ref.Namespace, ref.Name, r.What))
	}
	return nil
}

// BindRead refuses every read when the worker was built without a binder.
func BindRead(ctx context.Context, b ReadBinder, r ReadFor) error {
	if b == nil {
		return fail.Permanent(v1alpha1.ReasonSubjectMismatch, fmt.Errorf("%s: the worker binds no reads to their runs, so it reads nothing for a person", r.What))
	}
	return b.bindRead(ctx, r)
}
