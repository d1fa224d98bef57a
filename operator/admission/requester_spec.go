package admission

import (
	"context"
	"errors"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/util/validation/field"
	ctrlclient "sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/remedy-dev/remedy/api/v1alpha1"
	"github.com/remedy-dev/remedy/internal/authz"
	"github.com/remedy-dev/remedy/internal/policy"
)

// DefaultCompileBudget bounds the time one admission request spends
// compiling its conditions, all of them together.
const DefaultCompileBudget = 2 * time.Second

// checkSpec refuses an execution spec (at path in the object) that cannot
// run: an action or target the webhook cannot authorize, a condition over
// the size limit or whose Rego does not compile, a target in a protected
// namespace. Those come back as field errors; a requester who may not have
// it run is a *authz.Denied, and other errors mean the webhook could not ask.
//
// It authorizes before it compiles: compiling is the webhook's one costly
// step, shared by every tenant, so only a requester who may have the action
// run gets it, for conditions within the size limit, within CompileBudget.
func (h *Requester) checkSpec(ctx context.Context, ns string, spec v1alpha1.KubernetesExecutionSpec, path *field.Path, who v1alpha1.Requester) (field.ErrorList, error) {
	type cond struct {
		c    v1alpha1.Condition
		path *field.Path
	}
	var errs field.ErrorList
	var sized []cond
	for _, list := range []struct {
		name  string
		conds []v1alpha1.Condition
	}{{"preConditions", spec.PreConditions}, {"postConditions", spec.PostConditions}} {
		for i, c := range list.conds {
			p := path.Child(list.name).Index(i).Child("rego")
			if err := policy.CheckConditionSize(c.Name, c.Rego); err != nil {
				errs = append(errs, field.Invalid(p, field.OmitValueType{}, err.Error()))
				continue
			}
			sized = append(sized, cond{c, p})
		}
	}
	protected, err := h.protected(ctx, spec.Target.Namespace)
	if err != nil {
		return errs, err
	}
	err = h.Authorize(ctx, authz.Request{Requester: who, Namespace: ns, Action: spec.Action, Target: spec.Target})
	var malformed *authz.Malformed
	switch {
	case errors.As(err, &malformed):
		return append(errs, malformed.Under(path)...), nil
	case protected:
		return errs, &authz.Denied{Msg: v1alpha1.ProtectedNamespaceMessage(spec.Target.Namespace) + ": Remedy changes nothing there"}
	case err != nil:
		return errs, err
	}
	budget := h.CompileBudget
	if budget <= 0 {
		budget = DefaultCompileBudget
	}
	cctx, cancel := context.WithTimeout(ctx, budget)
	defer cancel()
	for _, c := range sized {
		if cctx.Err() != nil {
			errs = append(errs, field.Invalid(c.path, field.OmitValueType{}, fmt.Sprintf(
				"condition %q was not compiled: the conditions of one object compile within the admission webhook's budget of %s", c.c.Name, budget)))
			continue
		}
		if err := h.CheckCondition(cctx, c.c.Name, c.c.Rego); err != nil {
			errs = append(errs, field.Invalid(c.path, field.OmitValueType{}, err.Error()))
		}
	}
	return errs, nil
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
	return v1alpha1.IsProtectedNamespace(&ns), nil
}
