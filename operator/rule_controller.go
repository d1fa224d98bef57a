package operator

import (
	"context"
	"errors"
	"fmt"
	"time"

	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	ctrlclient "sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/predicate"

	"github.com/remedy-dev/remedy/api/v1alpha1"
	"github.com/remedy-dev/remedy/internal/alertrule"
	"github.com/remedy-dev/remedy/internal/authz"
)

// RuleRecheck is how often a rule's author's grants are asked again: RBAC
// can change while the rule stands, without the rule changing.
const RuleRecheck = 5 * time.Minute

// RuleReconciler gives each RemediationRule its Ready condition from the
// rule's own check, on create and on every spec change, without waiting for
// an alert: the spec is valid, and its author may run its actions. Alert
// runs write the rest of the status (counters, alerts, guard conditions).
type RuleReconciler struct {
	ctrlclient.Client
	// Authorize is authz.Authorize bound to the API server.
	Authorize func(context.Context, authz.Request) error
}

// +kubebuilder:rbac:groups=remedy.dev,resources=remediationrules,verbs=get;list;watch
// +kubebuilder:rbac:groups=remedy.dev,resources=remediationrules/status,verbs=update

// Reconcile observes the author's grants, plans the Ready condition in a
// pure function, and writes status once when it changed.
func (r *RuleReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	var rule v1alpha1.RemediationRule
	if err := r.Get(ctx, req.NamespacedName, &rule); err != nil {
		return ctrl.Result{}, ctrlclient.IgnoreNotFound(err)
	}
	denied, err := r.denied(ctx, &rule)
	if err != nil {
		return ctrl.Result{}, err
	}
	next, changed := planRuleStatus(&rule, denied)
	if changed {
		rule.Status = next
		if err := r.Status().Update(ctx, &rule); err != nil {
			return ctrl.Result{}, fmt.Errorf("write RemediationRule %s status: %w", req.NamespacedName, err)
		}
	}
	return ctrl.Result{RequeueAfter: RuleRecheck}, nil
}

// denied asks whether the rule's author may run its template's and escalation's actions;
// it returns the missing grants, "" when there are none.
func (r *RuleReconciler) denied(ctx context.Context, rule *v1alpha1.RemediationRule) (string, error) {
	if rule.Spec.Author == nil || len(rule.Spec.Template.Steps) == 0 {
		return "", nil
	}
	err := authz.RuleSteps(ctx, r.Authorize, *rule.Spec.Author, rule.Namespace, alertrule.Steps(&rule.Spec))
	var d *authz.Denied
	var m *authz.Malformed
	switch {
	case errors.As(err, &d):
		return d.Msg, nil
	case errors.As(err, &m):
		return m.Error(), nil
	case err != nil:
		return "", fmt.Errorf("authorize RemediationRule %s/%s's author: %w", rule.Namespace, rule.Name, err)
	}
	return "", nil
}

// SetupWithManager reconciles rules whose spec changed: a status write (an
// alert run's) is no reason to ask again.
func (r *RuleReconciler) SetupWithManager(mgr ctrl.Manager) error {
	return ctrl.NewControllerManagedBy(mgr).
		For(&v1alpha1.RemediationRule{}, builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		Named("remediationrule").
		Complete(requeueOnConflict(r))
}
