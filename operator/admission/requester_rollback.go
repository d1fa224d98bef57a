package admission

import (
	"context"
	"errors"
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/remedy-dev/remedy/api/v1alpha1"
	"github.com/remedy-dev/remedy/internal/authz"
)

// updateExecution authorizes a rollback asked for by annotation, for the
// inverse action, and records who asked; nobody else may write that record.
//
// The inverse action, the target and the earlier record come from oldObject:
// the body's status and annotations are the caller's to write, and the API
// server drops a status written through the main resource only after
// mutating webhooks ran.
func (h *Requester) updateExecution(ctx context.Context, req admission.Request) (func(map[string]any) error, error) {
	var old v1alpha1.KubernetesExecution
	if err := decodeObject(req.OldObject.Raw, &old); err != nil {
		return nil, fmt.Errorf("decode old KubernetesExecution: %w", err)
	}
	var cur metav1.PartialObjectMetadata
	if err := decodeObject(req.Object.Raw, &cur); err != nil {
		return nil, err
	}
	reason, asked := cur.Annotations[v1alpha1.RollbackAnnotation]
	oldReason, wasAsked := old.Annotations[v1alpha1.RollbackAnnotation]
	var record string
	switch {
	case !asked:
	case wasAsked && reason == oldReason:
		record = old.Annotations[v1alpha1.RollbackRequesterAnnotation]
	default:
		if err := h.authorizeRollback(ctx, req, &old); err != nil {
			return nil, err
		}
		record = req.UserInfo.Username
	}
	if got, ok := cur.Annotations[v1alpha1.RollbackRequesterAnnotation]; ok == (record != "") && got == record {
		return nil, nil
	}
	return func(obj map[string]any) error {
		if record == "" {
			unstructured.RemoveNestedField(obj, "metadata", "annotations", v1alpha1.RollbackRequesterAnnotation)
			return nil
		}
		return unstructured.SetNestedField(obj, record, "metadata", "annotations", v1alpha1.RollbackRequesterAnnotation)
	}, nil
}

// authorizeRollback asks whether the user may run the inverse action the
// run captured, on the execution's target, both as stored.
func (h *Requester) authorizeRollback(ctx context.Context, req admission.Request, old *v1alpha1.KubernetesExecution) error {
	rb := old.Status.RollbackInformation
	switch {
	case rb == nil:
		return invalid(field.Forbidden(rollbackAnnotationPath(), fmt.Sprintf(
			"KubernetesExecution %s has nothing to roll back: its status has no rollbackInformation (%s); ask once it is RollbackReady",
			old.Name, phaseOf(old.Status))))
	case rb.RollbackAction == "":
		return invalid(field.Forbidden(rollbackAnnotationPath(), fmt.Sprintf(
			"KubernetesExecution %s has no rollback: %s", old.Name, rb.Reason)))
	}
	err := h.Authorize(ctx, authz.Request{Requester: fromUser(req.UserInfo), Namespace: req.Namespace, Action: rb.RollbackAction, Target: old.Spec.Target})
	var denied *authz.Denied
	var malformed *authz.Malformed
	switch {
	case errors.As(err, &malformed):
		return invalid(field.Forbidden(rollbackAnnotationPath(), fmt.Sprintf(
			"the rollback of KubernetesExecution %s cannot be authorized: status.rollbackInformation: %v", old.Name, malformed)))
	case errors.As(err, &denied):
		return &authz.Denied{Msg: "rollback: " + denied.Msg}
	}
	return err
}

func rollbackAnnotationPath() *field.Path {
	return field.NewPath("metadata", "annotations").Key(v1alpha1.RollbackAnnotation)
}

func phaseOf(s v1alpha1.KubernetesExecutionStatus) string {
	switch {
	case s.Phase == "":
		return "it has not started"
	case s.Reason == "":
		return "it is " + string(s.Phase)
	default:
		return fmt.Sprintf("it is %s (%s)", s.Phase, s.Reason)
	}
}
