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
	want := fmt.Sprintf("kexec/%s/%s/%s", ref.Namespace, ref.Name, ref.UID)
	if id := activity.GetInfo(ctx).WorkflowExecution.ID; id != want || (k.Status.WorkflowID != "" && k.Status.WorkflowID != want) {
		return nil, permanent(ReasonSubjectMismatch, fmt.Errorf("KubernetesExecution %s/%s is run by workflow %s only, not %s", ref.Namespace, ref.Name, want, id))
	}
	if k.Status.Phase.Terminal() {
		return nil, permanent(ReasonSubjectMismatch, fmt.Errorf("KubernetesExecution %s/%s already finished (%s, %s): a finished execution never runs again",
			ref.Namespace, ref.Name, k.Status.Phase, k.Status.Reason))
	}
	return &k, nil
}

// VerifyRemediation requires the RemediationRequest to exist with the UID and spec the workflow has.
func (s *Subjects) VerifyRemediation(ctx context.Context, ref SubjectRef, spec v1alpha1.RemediationRequestSpec) error {
	var rr v1alpha1.RemediationRequest
	if err := s.get(ctx, ref, "RemediationRequest", &rr); err != nil {
		return err
	}
	return s.compare(ctx, ref, "RemediationRequest", string(rr.UID), equality.Semantic.DeepEqual(rr.Spec, spec))
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
