package operator

import (
	"testing"

	"github.com/stretchr/testify/assert"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/remedy-dev/remedy/api/v1alpha1"
)

// A rule is Ready from its own check, before any alert: valid, authored,
// granted and not suspended; otherwise not Ready, saying why.
func TestRuleReadyFromItsOwnCheck(t *testing.T) {
	rule := func(mut func(*v1alpha1.RemediationRule)) *v1alpha1.RemediationRule {
		r := &v1alpha1.RemediationRule{ObjectMeta: metav1.ObjectMeta{Name: "r", Namespace: "shop", Generation: 3},
			Spec: v1alpha1.RemediationRuleSpec{Matchers: []string{`alertname="X"`}, Author: &v1alpha1.Requester{Username: "alice"},
				Template: v1alpha1.RemediationTemplate{Steps: []v1alpha1.RemediationStep{{Name: "restart", Execution: v1alpha1.KubernetesExecutionSpec{
					Action: "restart", Target: v1alpha1.ObjectRef{APIVersion: "apps/v1", Kind: "Deployment", Namespace: "shop", Name: "{{ .Labels.deployment }}"}}}}}}}
		if mut != nil {
			mut(r)
		}
		return r
	}
	for _, tc := range []struct {
		name   string
		rule   *v1alpha1.RemediationRule
		denied string
		status metav1.ConditionStatus
		reason string
	}{
		{"valid and granted", rule(nil), "", metav1.ConditionTrue, v1alpha1.ReasonRuleValid},
		{"shadow mode", rule(func(r *v1alpha1.RemediationRule) { r.Spec.DryRun = true }), "", metav1.ConditionTrue, v1alpha1.ReasonRuleValid},
		{"author lost the grant", rule(nil), `user "alice" cannot execute`, metav1.ConditionFalse, v1alpha1.ReasonRuleForbidden},
		{"no author", rule(func(r *v1alpha1.RemediationRule) { r.Spec.Author = nil }), "", metav1.ConditionFalse, v1alpha1.ReasonRuleNoAuthor},
		{"bad matcher", rule(func(r *v1alpha1.RemediationRule) { r.Spec.Matchers = []string{"alertname=~("} }), "", metav1.ConditionFalse, v1alpha1.ReasonRuleInvalid},
		{"another namespace", rule(func(r *v1alpha1.RemediationRule) { r.Spec.Template.Steps[0].Execution.Target.Namespace = "kube-system" }), "", metav1.ConditionFalse, v1alpha1.ReasonRuleInvalid},
		{"suspended", rule(func(r *v1alpha1.RemediationRule) { r.Spec.Suspend = true }), "", metav1.ConditionFalse, v1alpha1.ReasonRuleSuspended},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st, changed := planRuleStatus(tc.rule, tc.denied)
			assert.True(t, changed)
			assert.Equal(t, int64(3), st.ObservedGeneration)
			require := assert.New(t)
			require.Len(st.Conditions, 1)
			c := st.Conditions[0]
			require.Equal(v1alpha1.ConditionReady, c.Type)
			require.Equal(tc.status, c.Status, c.Message)
			require.Equal(tc.reason, c.Reason)
			if tc.denied != "" {
				require.Contains(c.Message, tc.denied)
			}
			tc.rule.Status = st
			_, again := planRuleStatus(tc.rule, tc.denied)
			require.False(again, "a second reconcile writes nothing")
		})
	}
}
