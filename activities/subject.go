package activities

import (
	"context"
	"fmt"

	"go.temporal.io/sdk/activity"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	ctrlclient "sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/remedy-dev/remedy/api/v1alpha1"
)

// +kubebuilder:rbac:groups=remedy.dev,resources=remediationrequests,verbs=get

// Subjects re-reads the object a workflow was started for. A workflow's input
// is whatever its starter sent, and anyone who can reach Temporal can start
// one: acting only when the object exists with that UID and spec makes a
// forged start do nothing.
type Subjects struct {
	Client ctrlclient.Reader
}

// SubjectRef names the object and what the workflow was told about it.
type SubjectRef struct {
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
	UID       string `json:"uid"`
}

// VerifyExecution requires the KubernetesExecution to exist with the UID and spec the workflow has.
func (s *Subjects) VerifyExecution(ctx context.Context, ref SubjectRef, spec v1alpha1.KubernetesExecutionSpec) error {
	_, err := s.execution(ctx, ref, spec)
	return err
}

// execution reads the KubernetesExecution and requires the UID and spec the
// run has, an unfinished object, and this run's workflow ID: a start replayed
// with the UID and spec of an execution that finished long ago, or under
// another ID, does nothing.
func (s *Subjects) execution(ctx context.Context, ref SubjectRef, spec v1alpha1.KubernetesExecutionSpec) (*v1alpha1.KubernetesExecution, error) {
	var k v1alpha1.KubernetesExecution
	if err := s.get(ctx, ref, "KubernetesExecution", &k); err != nil {
		return nil, err
	}
	if err := s.compare(ctx, ref, "KubernetesExecution", string(k.UID), equality.Semantic.DeepEqual(k.Spec, spec)); err != nil {
		return nil, err
	}
	if err := s.ownRun(ctx, ref, "KubernetesExecution", fmt.Sprintf("kexec/%s/%s/%s", ref.Namespace, ref.Name, ref.UID), k.Status.WorkflowID, k.Status.Phase, k.Status.Reason); err != nil {
		return nil, err
	}
	return &k, nil
}

// VerifyRemediation requires the RemediationRequest to exist with the UID and spec the workflow has.
func (s *Subjects) VerifyRemediation(ctx context.Context, ref SubjectRef, spec v1alpha1.RemediationRequestSpec) error {
	var rr v1alpha1.RemediationRequest
	if err := s.get(ctx, ref, "RemediationRequest", &rr); err != nil {
		return err
	}
	if err := s.compare(ctx, ref, "RemediationRequest", string(rr.UID), equality.Semantic.DeepEqual(rr.Spec, spec)); err != nil {
		return err
	}
	return s.ownRun(ctx, ref, "RemediationRequest", fmt.Sprintf("rr/%s/%s/%s", ref.Namespace, ref.Name, ref.UID), rr.Status.WorkflowID, rr.Status.Phase, rr.Status.Reason)
}

// ownRun requires that this run is the object's own workflow (want, the
// deterministic ID, which the operator records in status) and that the
// object has not finished.
func (s *Subjects) ownRun(ctx context.Context, ref SubjectRef, kind, want, recorded string, phase v1alpha1.Phase, reason string) error {
	if id := activity.GetInfo(ctx).WorkflowExecution.ID; id != want || (recorded != "" && recorded != want) {
		return permanent(ReasonSubjectMismatch, fmt.Errorf("%s %s/%s is run by workflow %s only, not %s", kind, ref.Namespace, ref.Name, want, id))
	}
	if phase.Terminal() {
		return permanent(ReasonSubjectMismatch, fmt.Errorf("%s %s/%s already finished (%s, %s): a finished %s never runs again",
			kind, ref.Namespace, ref.Name, phase, reason, kind))
	}
	return nil
}

func (s *Subjects) get(ctx context.Context, ref SubjectRef, kind string, obj ctrlclient.Object) error {
	err := s.Client.Get(ctx, ctrlclient.ObjectKey{Namespace: ref.Namespace, Name: ref.Name}, obj)
	if apierrors.IsNotFound(err) {
		return permanent(ReasonSubjectMismatch, fmt.Errorf("%s %s/%s does not exist: this run was not started for a live object, so it does nothing", kind, ref.Namespace, ref.Name))
	}
	if err != nil {
		return fmt.Errorf("read %s %s/%s: %w", kind, ref.Namespace, ref.Name, err)
	}
	return nil
}

func (s *Subjects) compare(ctx context.Context, ref SubjectRef, kind, uid string, sameSpec bool) error {
	switch {
	case uid != ref.UID:
		return permanent(ReasonSubjectMismatch, fmt.Errorf("%s %s/%s has UID %s, but this run was started for UID %s", kind, ref.Namespace, ref.Name, uid, ref.UID))
	case !sameSpec:
		return permanent(ReasonSubjectMismatch, fmt.Errorf("the spec this run was started with is not the spec of %s %s/%s", kind, ref.Namespace, ref.Name))
	}
	activity.GetLogger(ctx).Info("subject verified", "kind", kind, "object", ref.Namespace+"/"+ref.Name, "uid", uid)
	return nil
}
