package drift

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"go.temporal.io/sdk/activity"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/retry"

	"github.com/remedy-dev/remedy/activities/fail"
	"github.com/remedy-dev/remedy/activities/gate"
	kv1 "github.com/remedy-dev/remedy/api/kausality/v1alpha1"
	"github.com/remedy-dev/remedy/api/v1alpha1"
	"github.com/remedy-dev/remedy/internal/actions"
)

// DriftDecisionInput is a person's decision on one drift, to write onto its parent.
type DriftDecisionInput struct {
	Parent DriftObject `json:"parent"`
	Child  DriftObject `json:"child"`
	// Generation is the parent generation of the drift (its last spec change).
	Generation int64 `json:"generation"`
	// Reason explains a rejection.
	Reason string `json:"reason,omitempty"`
	// ApprovalRequest is the decided RemediationApprovalRequest, in the
	// parent's namespace, that the write gate finds the decision on.
	ApprovalRequest string `json:"approvalRequest"`
}

// WriteApproval adds a once approval for the child to the parent's
// kausality.io/approvals, so the webhook lets the drifting change through
// one time. An equal approval already there is left alone, so retries add
// no duplicate.
func (d *Drift) WriteApproval(ctx context.Context, in DriftDecisionInput) error {
	if in.Generation <= 0 {
		// kausality refuses a once approval without its generation; writing one would break the annotation.
		return fail.Permanent(v1alpha1.ReasonInvalidParameters, fmt.Errorf("approve drift of %s: parent generation %d is not positive", in.Child, in.Generation))
	}
	want := kv1.Approval{APIVersion: in.Child.APIVersion, Kind: in.Child.Kind, Name: in.Child.Name, Generation: in.Generation, Mode: kv1.ApprovalOnce}
	return d.editAnnotation(ctx, in, v1alpha1.DecisionApproved, kv1.AnnotationApprovals, func(value string) (string, bool, error) {
		as, err := kv1.ParseApprovals(value)
		if err != nil {
			return "", false, err
		}
		for _, a := range as {
			if a == want {
				return value, false, nil
			}
		}
		return kv1.FormatApprovals(append(as, want)), true, nil
	})
}

// WriteRejection adds a rejection for the child, valid while the parent
// stays at the drift's generation, to the parent's kausality.io/rejections.
// A rejection of the same child and generation already there is left alone.
func (d *Drift) WriteRejection(ctx context.Context, in DriftDecisionInput) error {
	want := kv1.Rejection{APIVersion: in.Child.APIVersion, Kind: in.Child.Kind, Name: in.Child.Name, Generation: in.Generation, Reason: in.Reason}
	if want.Reason == "" {
		want.Reason = "rejected"
	}
	return d.editAnnotation(ctx, in, v1alpha1.DecisionRejected, kv1.AnnotationRejections, func(value string) (string, bool, error) {
		rs, err := kv1.ParseRejections(value)
		if err != nil {
			return "", false, err
		}
		for _, r := range rs {
			if r.APIVersion == want.APIVersion && r.Kind == want.Kind && r.Name == want.Name && r.Generation == want.Generation {
				return value, false, nil
			}
		}
		return kv1.FormatRejections(append(rs, want)), true, nil
	})
}

// editAnnotation rewrites one annotation of the parent with a merge patch
// pinned to the resourceVersion it read, retrying on conflict, with the
// client the write gate hands out for this decision. A value edit cannot
// parse is a person's to fix: overwriting it would drop their entries, so
// that fails for good.
func (d *Drift) editAnnotation(ctx context.Context, in DriftDecisionInput, decision v1alpha1.Decision, key string, edit func(string) (string, bool, error)) error {
	parent := in.Parent
	writer, err := d.Gate.Pass(ctx, driftWrite(in, decision))
	if err != nil {
		return err
	}
	r := writer.Resource()
	err = retry.RetryOnConflict(retry.DefaultRetry, func() error {
		obj, err := r.Get(ctx, parent.Name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if parent.UID != "" && string(obj.GetUID()) != parent.UID {
			return &notSameObject{parent: parent.String()}
		}
		value, changed, err := edit(obj.GetAnnotations()[key])
		if err != nil {
			return &invalidAnnotation{err: err}
		}
		if !changed {
			activity.GetLogger(ctx).Info("annotation already up to date", "parent", parent.String(), "annotation", key)
			return nil
		}
		patch, err := json.Marshal(map[string]any{"metadata": map[string]any{
			"resourceVersion": obj.GetResourceVersion(),
			"annotations":     map[string]any{key: value},
		}})
		if err != nil {
			return fmt.Errorf("encode patch: %w", err)
		}
		_, err = r.Patch(ctx, parent.Name, types.MergePatchType, patch, metav1.PatchOptions{FieldManager: "remedy-drift"})
		if err == nil {
			activity.GetLogger(ctx).Info("annotation written", "parent", parent.String(), "annotation", key, "value", value)
		}
		return err
	})
	var inv *invalidAnnotation
	var gone *notSameObject
	switch {
	case errors.As(err, &inv):
		return fail.Permanent(v1alpha1.ReasonInvalidParameters, fmt.Errorf("edit %s on %s: %w", key, parent, inv.err))
	case errors.As(err, &gone):
		return fail.Permanent(v1alpha1.ReasonNotFound, fmt.Errorf("edit %s on %s: %w", key, parent, gone))
	case err != nil:
		return fail.Classify(v1alpha1.ReasonInvalidParameters, fmt.Errorf("edit %s on %s: %w", key, parent, err))
	}
	return nil
}

// driftWrite is the write gate's question about one decision on a parent.
func driftWrite(in DriftDecisionInput, decision v1alpha1.Decision) gate.Write {
	p := in.Parent
	return gate.Write{
		Subject: gate.Subject{Kind: gate.SubjectDrift, Namespace: p.Namespace, Name: p.Name, UID: p.UID, Drift: &gate.DriftSubject{
			ApprovalRequest: in.ApprovalRequest, Decision: decision,
			Child: v1alpha1.ObjectRef{APIVersion: in.Child.APIVersion, Kind: in.Child.Kind, Namespace: in.Child.Namespace, Name: in.Child.Name},
		}},
		Request: actions.Request{Action: gate.DriftApprovalAction, Target: v1alpha1.ObjectRef{APIVersion: p.APIVersion, Kind: p.Kind, Namespace: p.Namespace, Name: p.Name}},
		As:      gate.DriftServiceAccount,
	}
}

type invalidAnnotation struct{ err error }

func (e *invalidAnnotation) Error() string { return e.err.Error() }

type notSameObject struct{ parent string }

func (e *notSameObject) Error() string {
	return "parent " + e.parent + " was deleted and recreated"
}
