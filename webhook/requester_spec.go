package webhook

import (
	"context"
	"errors"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/util/validation/field"
	ctrlclient "sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/remedy-dev/remedy/api/v1alpha1"
	"github.com/remedy-dev/remedy/internal/authz"
	"github.com/remedy-dev/remedy/workflows"
)

// checkSpec refuses an execution spec (at path in the object) that cannot
// run: an action or target the webhook cannot authorize, a condition whose
// Rego does not compile, a target in a protected namespace. Those come back
// as field errors; a requester who may not have it run is a *authz.Denied,
// and other errors mean the webhook could not ask.
func (h *Requester) checkSpec(ctx context.Context, ns string, spec v1alpha1.KubernetesExecutionSpec, path *field.Path, who v1alpha1.Requester) (field.ErrorList, error) {
	var errs field.ErrorList
	for _, list := range []struct {
		name  string
		conds []v1alpha1.Condition
	}{{"preConditions", spec.PreConditions}, {"postConditions", spec.PostConditions}} {
		for i, c := range list.conds {
			if err := h.CheckCondition(ctx, c.Name, c.Rego); err != nil {
				errs = append(errs, field.Invalid(path.Child(list.name).Index(i).Child("rego"), field.OmitValueType{}, err.Error()))
			}
		}
	}
	protected, err := h.protected(ctx, spec.Target.Namespace)
	if err != nil {
		return errs, err
	}
	err = h.Authorize(ctx, authz.Request{Requester: who, Namespace: ns, Action: spec.Action, Target: spec.Target})
	var malformed *authz.Malformed
	if errors.As(err, &malformed) {
		return append(errs, malformed.Under(path)), nil
	}
	if protected {
		return errs, &authz.Denied{Msg: workflows.ProtectedNamespaceMessage(spec.Target.Namespace) + ": Remedy changes nothing there"}
	}
	return errs, err
}

// protected applies the protected-namespace rule to the target's namespace;
// one that does not exist is left to authorization, which refuses a target
// outside the object's own namespace.
func (h *Requester) protected(ctx context.Context, name string) (bool, error) {
	if name == "" {
		return false, nil
	}
	var ns corev1.Namespace
	err := h.Namespaces.Get(ctx, ctrlclient.ObjectKey{Name: name}, &ns)
	if apierrors.IsNotFound(err) {
		return false, nil
	} else if err != nil {
		return false, fmt.Errorf("read namespace %s: %w", name, err)
	}
	return workflows.IsProtectedNamespace(&ns), nil
}
