package alertrule

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/remedy-dev/remedy/api/v1alpha1"
)

func workloadTemplate(name string) v1alpha1.RemediationTemplate {
	return v1alpha1.RemediationTemplate{Steps: []v1alpha1.RemediationStep{{Name: "undo", Execution: v1alpha1.KubernetesExecutionSpec{
		Action: "rollout-undo", Target: v1alpha1.ObjectRef{APIVersion: "apps/v1", Kind: "Deployment", Name: name},
	}}}}
}

func TestRenderForFillsTheWorkload(t *testing.T) {
	crash := Alert{Labels: map[string]string{"alertname": "KubePodCrashLooping", "namespace": "demo", "pod": "web-7d4b9-x2x", "container": "web"}}
	web := &Workload{APIVersion: "apps/v1", Kind: "Deployment", Name: "web"}
	for _, tc := range []struct {
		name, tpl, want string
	}{
		{"name", "{{ .Workload.Name }}", "web"},
		{"all three", "{{ .Workload.APIVersion }}:{{ .Workload.Kind }}:{{ .Workload.Name }}", "apps/v1:Deployment:web"},
		{"beside the labels", "{{ .Workload.Name }}-{{ .Labels.container }}", "web-web"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			steps, err := RenderFor("demo", workloadTemplate(tc.tpl), crash, web, "")
			require.NoError(t, err)
			assert.Equal(t, tc.want, steps[0].Execution.Target.Name)
			assert.Equal(t, "demo", steps[0].Execution.Target.Namespace)
		})
	}
}

// Without a workload a template that uses one fails with the reason, never
// with an empty name; one that does not use it renders as before.
func TestRenderWithoutTheWorkloadSaysWhy(t *testing.T) {
	a := Alert{Labels: map[string]string{"namespace": "demo", "deployment": "web"}}
	_, err := RenderFor("demo", workloadTemplate("{{ .Workload.Name }}"), a, nil, `the alert has no "pod" label`)
	require.ErrorContains(t, err, `the template uses .Workload.Name, but the alert has no "pod" label`)
	assert.EqualError(t, err, `steps[0].execution.target.name: the template uses .Workload.Name, but the alert has no "pod" label`, "the error names the field and the reason only")

	_, err = Render("demo", workloadTemplate("{{ .Workload.Kind }}"), a)
	require.ErrorContains(t, err, "the template uses .Workload.Kind, but no workload was resolved for this alert")

	_, err = RenderFor("demo", workloadTemplate("{{ .Workload.Nmae }}"), a, &Workload{Name: "web"}, "")
	require.ErrorContains(t, err, "Nmae", "a typo is an error")

	steps, err := Render("demo", workloadTemplate("{{ .Labels.deployment }}"), a)
	require.NoError(t, err)
	assert.Equal(t, "web", steps[0].Execution.Target.Name)
}

func TestUsesWorkload(t *testing.T) {
	assert.True(t, UsesWorkload(workloadTemplate("{{ .Workload.Name }}")))
	assert.True(t, UsesWorkload(workloadTemplate("{{.Workload.Name|lower}}")))
	assert.False(t, UsesWorkload(workloadTemplate("{{ .Labels.deployment }}")))
	assert.False(t, UsesWorkload(workloadTemplate(`{{ index .Labels "x.Workload" }}`)), "a label's name is not the field")
}

// Admission accepts a template that uses .Workload.
func TestCheckAcceptsWorkload(t *testing.T) {
	spec := &v1alpha1.RemediationRuleSpec{Matchers: []string{`alertname="KubePodCrashLooping"`}, Template: workloadTemplate("{{ .Workload.Name }}")}
	assert.Empty(t, Check("demo", spec))
}
