package operator

import (
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/remedy-dev/remedy/api/v1alpha1"
	"github.com/remedy-dev/remedy/internal/alertrule"
)

// ruleReady is the Ready condition of a rule, from its own check: its spec
// is valid for its namespace, it has an author, the author may run every
// action of its template (denied names the missing grants, "" when
// granted), and it is not suspended. No alert is needed to know it.
func ruleReady(r *v1alpha1.RemediationRule, denied string) metav1.Condition {
	c := metav1.Condition{Type: v1alpha1.ConditionReady, Status: metav1.ConditionFalse, ObservedGeneration: r.Generation}
	switch errs := alertrule.Check(r.Namespace, &r.Spec); {
	case len(errs) > 0:
		c.Reason, c.Message = v1alpha1.ReasonRuleInvalid, errs.ToAggregate().Error()
	case r.Spec.Author == nil:
		c.Reason, c.Message = v1alpha1.ReasonRuleNoAuthor, "the rule has no author: apply its spec again, so admission stamps who wrote it"
	case denied != "":
		c.Reason, c.Message = v1alpha1.ReasonRuleForbidden, "the author may not run every action of the template: "+denied
	case r.Spec.Suspend:
		c.Reason, c.Message = v1alpha1.ReasonRuleSuspended, "suspended: new alerts start nothing"
	default:
		c.Status, c.Reason = metav1.ConditionTrue, v1alpha1.ReasonRuleValid
		c.Message = "matching alerts start remediations in the name of " + r.Spec.Author.Username
		if r.Spec.DryRun {
			c.Message = "shadow mode: matching alerts record what " + r.Spec.Author.Username + "'s remediation would change, and write nothing"
		}
	}
	if len(c.Message) > 1024 {
		c.Message = c.Message[:1024]
	}
	return c
}

// planRuleStatus returns the status with the rule's Ready condition and
// observedGeneration, and whether that changes anything.
func planRuleStatus(r *v1alpha1.RemediationRule, denied string) (v1alpha1.RemediationRuleStatus, bool) {
	next := *r.Status.DeepCopy()
	changed := meta.SetStatusCondition(&next.Conditions, ruleReady(r, denied))
	if next.ObservedGeneration != r.Generation {
		next.ObservedGeneration, changed = r.Generation, true
	}
	return next, changed
}
