package alertrule

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/remedy-dev/remedy/api/v1alpha1"
)

// Escalation steps are checked like the template's, each error naming its
// field, and Steps lists every step the author must be allowed to run.
func TestEscalationStepsAreCheckedLikeTheTemplate(t *testing.T) {
	step := func(action, ns, name string) v1alpha1.RemediationStep {
		return v1alpha1.RemediationStep{Name: action, Execution: v1alpha1.KubernetesExecutionSpec{Action: action,
			Target: v1alpha1.ObjectRef{APIVersion: "apps/v1", Kind: "Deployment", Namespace: ns, Name: name}}}
	}
	spec := &v1alpha1.RemediationRuleSpec{
		Matchers: []string{`alertname="Crash"`},
		Template: v1alpha1.RemediationTemplate{Steps: []v1alpha1.RemediationStep{step("restart", "", "{{ .Labels.deployment }}")}},
		Verify:   &v1alpha1.VerifySpec{},
		Escalation: []v1alpha1.EscalationStep{
			{Name: "scale", Template: &v1alpha1.RemediationTemplate{Steps: []v1alpha1.RemediationStep{step("scale", "", "web")}}},
			{Name: "oncall", Page: true},
		},
	}
	assert.Empty(t, Check("shop", spec))
	names := func(steps []v1alpha1.RemediationStep) []string {
		var out []string
		for _, s := range steps {
			out = append(out, s.Execution.Action)
		}
		return out
	}
	assert.Equal(t, []string{"restart", "scale"}, names(Steps(spec)))

	spec.Escalation = append(spec.Escalation,
		v1alpha1.EscalationStep{Name: "away", Template: &v1alpha1.RemediationTemplate{Steps: []v1alpha1.RemediationStep{step("restart", "kube-system", "coredns")}}},
		v1alpha1.EscalationStep{Name: "typo", Template: &v1alpha1.RemediationTemplate{Steps: []v1alpha1.RemediationStep{step("restart", "", "{{ .Labels.deployment ")}}})
	errs := Check("shop", spec)
	require.Len(t, errs, 2)
	assert.Equal(t, "spec.escalation[2].template.steps[0].execution.target.namespace", errs[0].Field)
	assert.Equal(t, "spec.escalation[3].template.steps[0].execution.target.name", errs[1].Field)
	assert.Equal(t, []string{"restart", "scale", "restart", "restart"}, names(Steps(spec)))
}
