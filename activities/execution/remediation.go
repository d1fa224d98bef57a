package execution

import (
	"context"
	"fmt"
	"maps"

	"go.temporal.io/sdk/activity"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	ctrlclient "sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/remedy-dev/remedy/activities/fail"
	"github.com/remedy-dev/remedy/activities/gate"
	"github.com/remedy-dev/remedy/api/v1alpha1"
)

// +kubebuilder:rbac:groups=remedy.dev,resources=kubernetesexecutions,verbs=get;create
// +kubebuilder:rbac:groups=remedy.dev,resources=remediationrequests,verbs=get

// Remediation holds the activities of a RemediationRequest's workflow.
type Remediation struct {
	Client ctrlclient.Client
}

// StepInput names one step of one request.
type StepInput struct {
	Namespace  string                   `json:"namespace"`
	Request    string                   `json:"request"`
	RequestUID string                   `json:"requestUID"`
	Step       v1alpha1.RemediationStep `json:"step"`
	// Requester is the request's; every step runs for it.
	Requester *v1alpha1.Requester `json:"requester,omitempty"`
}

// StepRef identifies the step's KubernetesExecution.
type StepRef struct {
	Name string `json:"name"`
	UID  string `json:"uid"`
}

// CreateStepExecution materialises the step as a KubernetesExecution owned by
// the request, so kubectl shows it; a retry finds the one it created.
func (r *Remediation) CreateStepExecution(ctx context.Context, in StepInput) (StepRef, error) {
	// Only the request's own run creates its steps.
	if _, err := gate.RemediationOf(ctx, &gate.Subjects{Client: r.Client}, gate.SubjectRef{Namespace: in.Namespace, Name: in.Request, UID: in.RequestUID}); err != nil {
		return StepRef{}, err
	}
	spec := in.Step.Execution
	spec.RemediationRequestRef = &v1alpha1.LocalRef{Name: in.Request}
	spec.Requester = in.Requester
	k := &v1alpha1.KubernetesExecution{
		ObjectMeta: metav1.ObjectMeta{
			Name: in.Request + "-" + in.Step.Name, Namespace: in.Namespace,
			Labels: map[string]string{"remedy.dev/remediation-request": in.Request, "remedy.dev/step": in.Step.Name},
			OwnerReferences: []metav1.OwnerReference{{
				APIVersion: v1alpha1.GroupVersion.String(), Kind: "RemediationRequest", Name: in.Request,
				UID: types.UID(in.RequestUID), Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true),
			}},
		},
		Spec: spec,
	}
	want := k.DeepCopy()
	err := r.Client.Create(ctx, k)
	if apierrors.IsAlreadyExists(err) {
		err = r.Client.Get(ctx, ctrlclient.ObjectKeyFromObject(k), k)
		if err == nil {
			if err := r.isOwnStep(ctx, want, k); err != nil {
				// Returned as is: wrapped, Temporal would retry it as an unknown error.
				return StepRef{}, err
			}
		}
	}
	if err != nil {
		return StepRef{}, fail.Classify(v1alpha1.ReasonInvalidParameters, fmt.Errorf("create step execution %s: %w", k.Name, err))
	}
	activity.GetLogger(ctx).Info("step execution ready", "request", in.Request, "step", in.Step.Name, "execution", k.Name)
	return StepRef{Name: k.Name, UID: string(k.UID)}, nil
}

// isOwnStep checks that existing, found under the step's name, is the step
// this request created (on an earlier attempt whose answer was lost), not an
// object someone else put there: controlled by the request, labelled for the
// step, and with the spec the API server would store for want (asked by a
// dry-run create, so its defaults and the admission webhook's stamp count).
// Anything else fails the request naming the object, and is never used.
func (r *Remediation) isOwnStep(ctx context.Context, want, existing *v1alpha1.KubernetesExecution) error {
	squatted := func(why string) error {
		return fail.Permanent(v1alpha1.ReasonInvalidParameters, fmt.Errorf(
			"KubernetesExecution %s/%s already exists and is not this request's step (%s): delete it and create the request again", existing.Namespace, existing.Name, why))
	}
	owner := metav1.GetControllerOf(existing)
	wantOwner := want.OwnerReferences[0]
	switch {
	case owner == nil:
		return squatted("it has no controller")
	case owner.UID != wantOwner.UID || owner.Kind != wantOwner.Kind || owner.APIVersion != wantOwner.APIVersion || owner.Name != wantOwner.Name:
		return squatted("it belongs to " + owner.Kind + " " + owner.Name)
	case !maps.Equal(existing.Labels, want.Labels):
		return squatted("its labels differ")
	}
	dry := want.DeepCopy()
	dry.Name, dry.GenerateName = "", want.Name+"-"
	if err := r.Client.Create(ctx, dry, ctrlclient.DryRunAll); err != nil {
		return fail.Classify(v1alpha1.ReasonInvalidParameters, fmt.Errorf("dry-run create step execution %s: %w", want.Name, err))
	}
	if !equality.Semantic.DeepEqual(dry.Spec, existing.Spec) {
		return squatted("its spec is not the step's")
	}
	return nil
}
