package authz

import (
	"context"
	"errors"
	"strings"

	"github.com/remedy-dev/remedy/api/v1alpha1"
)

// RuleSteps requires a RemediationRule's author to run each step's action
// on its target kind in the namespace, and returns a *Denied naming every
// missing grant. A templated name is unknown until an alert comes, so the
// grant is asked for the whole namespace; a literal name is asked for as
// written. Admission asks it when the spec changes, the rule's reconciler
// again for its Ready condition (RBAC changes while a rule stands).
func RuleSteps(ctx context.Context, authorize func(context.Context, Request) error, author v1alpha1.Requester, namespace string, steps []v1alpha1.RemediationStep) error {
	var denials []string
	for _, s := range steps {
		t := s.Execution.Target
		t.Namespace = namespace
		if strings.Contains(t.Name, "{{") {
			t.Name = ""
		}
		err := authorize(ctx, Request{Requester: author, Namespace: namespace, Action: s.Execution.Action, Target: t})
		var denied *Denied
		if errors.As(err, &denied) {
			denials = append(denials, "step "+s.Name+": "+denied.Msg)
		} else if err != nil {
			return err
		}
	}
	if len(denials) > 0 {
		return &Denied{Msg: strings.Join(denials, "; ")}
	}
	return nil
}
