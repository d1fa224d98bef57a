package alertrule

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/remedy-dev/remedy/api/v1alpha1"
)

func TestMatchesUsesAlertmanagerSemanticsAndTheNamespaceLabel(t *testing.T) {
	spec := &v1alpha1.RemediationRuleSpec{Matchers: []string{`alertname="HighLatency"`, `severity=~"warn|crit"`, `team!="db"`, `env!~"dev.*"`}}
	ms, err := Matchers(spec)
	require.NoError(t, err)
	base := map[string]string{"alertname": "HighLatency", "severity": "crit", "team": "web", "env": "prod", "namespace": "shop"}
	with := func(k, v string) map[string]string {
		m := map[string]string{}
		for a, b := range base {
			m[a] = b
		}
		if v == "" {
			delete(m, k)
		} else {
			m[k] = v
		}
		return m
	}
	for _, tc := range []struct {
		name   string
		labels map[string]string
		want   bool
	}{
		{"all hold", base, true},
		{"equal fails", with("alertname", "Other"), false},
		{"regexp is anchored", with("severity", "critical"), false},
		{"not-equal fails", with("team", "db"), false},
		{"not-regexp fails", with("env", "dev-1"), false},
		{"another tenant's namespace", with("namespace", "bank"), false},
		{"no namespace label", with("namespace", ""), false},
	} {
		t.Run(tc.name, func(t *testing.T) { assert.Equal(t, tc.want, Matches("shop", ms, tc.labels)) })
	}
}

func TestRenderFillsStringsAndPinsTheNamespace(t *testing.T) {
	tpl := v1alpha1.RemediationTemplate{Steps: []v1alpha1.RemediationStep{{Name: "restart", Execution: v1alpha1.KubernetesExecutionSpec{
		Action: "restart", Target: v1alpha1.ObjectRef{APIVersion: "apps/v1", Kind: "Deployment", Name: `{{ .Labels.deployment | lower }}`},
	}}}}
	steps, err := Render("shop", tpl, Alert{Labels: map[string]string{"deployment": "Web"}})
	require.NoError(t, err)
	assert.Equal(t, v1alpha1.ObjectRef{APIVersion: "apps/v1", Kind: "Deployment", Namespace: "shop", Name: "web"}, steps[0].Execution.Target)

	_, err = Render("shop", tpl, Alert{Labels: map[string]string{}})
	assert.ErrorContains(t, err, "deployment", "a missing label is an error, not an empty name")
}

func TestCheckRefusesWhatCouldLeaveTheNamespace(t *testing.T) {
	step := func(ns, kind, action, name string) v1alpha1.RemediationStep {
		return v1alpha1.RemediationStep{Name: "s", Execution: v1alpha1.KubernetesExecutionSpec{Action: action,
			Target: v1alpha1.ObjectRef{APIVersion: "apps/v1", Kind: kind, Namespace: ns, Name: name}}}
	}
	for _, tc := range []struct {
		name  string
		step  v1alpha1.RemediationStep
		match string
		want  string
	}{
		{"own namespace", step("shop", "Deployment", "restart", "{{ .Labels.deployment }}"), `a="b"`, ""},
		{"empty namespace", step("", "Deployment", "restart", "web"), `a="b"`, ""},
		{"another namespace", step("bank", "Deployment", "restart", "web"), `a="b"`, "target.namespace"},
		{"templated namespace", step("{{ .Labels.namespace }}", "Deployment", "restart", "web"), `a="b"`, "target.namespace"},
		{"node", step("", "Node", "cordon", "n1"), `a="b"`, "Nodes"},
		{"unknown function", step("", "Deployment", "restart", "{{ env \"HOME\" }}"), `a="b"`, "function \"env\" not defined"},
		{"bad matcher", step("", "Deployment", "restart", "web"), `a=~"("`, "matchers[0]"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			errs := Check("shop", &v1alpha1.RemediationRuleSpec{Matchers: []string{tc.match},
				Template: v1alpha1.RemediationTemplate{Steps: []v1alpha1.RemediationStep{tc.step}}})
			if tc.want == "" {
				assert.Empty(t, errs)
				return
			}
			require.NotEmpty(t, errs)
			assert.Contains(t, errs.ToAggregate().Error(), tc.want)
		})
	}
}
