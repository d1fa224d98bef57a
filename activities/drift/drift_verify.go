package drift

import (
	"context"
	"errors"
	"fmt"

	"go.temporal.io/sdk/activity"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/remedy-dev/remedy/activities/fail"
	"github.com/remedy-dev/remedy/activities/gate"
	kv1 "github.com/remedy-dev/remedy/api/kausality/v1alpha1"
	"github.com/remedy-dev/remedy/api/v1alpha1"
)

// VerifyDriftInput is what a drift signal claims, to be checked against
// the API server before the drift workflow acts on it.
type VerifyDriftInput struct {
	Parent DriftObject `json:"parent"`
	// Child and ParentSpecHash are the new drift's; a run's carried drifts
	// are checked by their parent only (Carried).
	Child          DriftObject `json:"child"`
	ParentSpecHash string      `json:"parentSpecHash,omitempty"`
	Carried        bool        `json:"carried,omitempty"`
}

// VerifyDrift re-reads what a drift signal claims: anyone who can reach
// Temporal can send one, so the run takes nothing from it that the API
// server does not confirm. The parent must exist with the signal's UID and
// be this workflow's (drift/<parent-uid>), its spec must still hash as the
// webhook saw it, and a child that exists must be the parent's. It returns
// the configured settings for the parent: where reports go and whether a
// person is asked. A claim that does not hold fails for good
// (SubjectMismatch) and the run ignores the signal.
func (d *Drift) VerifyDrift(ctx context.Context, in VerifyDriftInput) (gate.DriftSettings, error) {
	if err := d.Gate.Runs.Drift(ctx, in.Parent.UID); err != nil {
		return gate.DriftSettings{}, err
	}
	parent, err := d.get(ctx, in.Parent)
	switch {
	case apierrors.IsNotFound(err):
		return gate.DriftSettings{}, fail.Permanent(v1alpha1.ReasonSubjectMismatch, fmt.Errorf("parent %s does not exist", in.Parent))
	case err != nil:
		return gate.DriftSettings{}, fail.Classify(v1alpha1.ReasonSubjectMismatch, fmt.Errorf("read parent %s: %w", in.Parent, err))
	case string(parent.GetUID()) != in.Parent.UID:
		return gate.DriftSettings{}, fail.Permanent(v1alpha1.ReasonSubjectMismatch, fmt.Errorf("parent %s has UID %s, not %s", in.Parent, parent.GetUID(), in.Parent.UID))
	}
	if !in.Carried {
		if err := d.verifyChild(ctx, in); err != nil {
			return gate.DriftSettings{}, err
		}
		if h := kv1.SpecHash(parent.Object); h != in.ParentSpecHash {
			return gate.DriftSettings{}, fail.Permanent(v1alpha1.ReasonSubjectMismatch, fmt.Errorf("parent %s's spec is not the one the drift was detected against", in.Parent))
		}
	}
	s, err := d.Config.Settings(ctx, in.Parent.Namespace)
	if err != nil {
		return gate.DriftSettings{}, err
	}
	activity.GetLogger(ctx).Info("drift verified", "parent", in.Parent.String(), "child", in.Child.String(),
		"callbackURLs", len(s.CallbackURLs), "requestApproval", s.RequestApproval)
	return s, nil
}

// verifyChild checks the child a new drift names: never a Secret (whose
// data a report would carry), in the parent's namespace, and controlled by
// the parent if it exists (a denied CREATE's child never did; a deleted one
// is gone).
func (d *Drift) verifyChild(ctx context.Context, in VerifyDriftInput) error {
	c := in.Child
	if c.APIVersion == "v1" && c.Kind == "Secret" {
		return fail.Permanent(v1alpha1.ReasonSubjectMismatch, errors.New("drifts of Secrets are never reported"))
	}
	if in.Parent.Namespace != "" && c.Namespace != in.Parent.Namespace {
		return fail.Permanent(v1alpha1.ReasonSubjectMismatch, fmt.Errorf("child %s is not in its parent's namespace %s", c, in.Parent.Namespace))
	}
	child, err := d.get(ctx, c)
	switch {
	case apierrors.IsNotFound(err):
		return nil
	case err != nil:
		return fail.Classify(v1alpha1.ReasonSubjectMismatch, fmt.Errorf("read child %s: %w", c, err))
	case c.UID != "" && string(child.GetUID()) != c.UID:
		return nil
	}
	if ref := metav1.GetControllerOf(child); ref == nil || string(ref.UID) != in.Parent.UID {
		return fail.Permanent(v1alpha1.ReasonSubjectMismatch, fmt.Errorf("child %s is not controlled by parent %s", c, in.Parent))
	}
	return nil
}
