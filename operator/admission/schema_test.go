package admission

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

func TestSchemasCoverEveryKindTheWebhookAdmits(t *testing.T) {
	all, err := schemas()
	require.NoError(t, err)
	for _, kind := range []string{"KubernetesExecution", "RemediationRequest", "ConfigReloadPolicy", "RemediationRule"} {
		assert.Contains(t, all, kind+"/v1alpha1")
	}
}

// schemaErrors names what the API server's schema and CEL rules would: all
// of them, each with its field, and nothing the webhook's own patch fixes.
func TestSchemaErrorsListEveryProblem(t *testing.T) {
	selector := map[string]any{"matchLabels": map[string]any{"reload": "true"}}
	step := func(target map[string]any) map[string]any {
		return map[string]any{"name": "restart", "execution": map[string]any{"action": "restart", "target": target}}
	}
	deployment := map[string]any{"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"}
	for _, tc := range []struct {
		name, kind string
		spec       map[string]any
		want       []string // "field: detail"
	}{
		{"a good policy", "ConfigReloadPolicy", map[string]any{"configMapSelector": selector, "workloadSelector": selector, "scopeLabel": "env"}, nil},
		{"two bad durations of a policy", "ConfigReloadPolicy", map[string]any{"configMapSelector": selector, "workloadSelector": selector,
			"scopeLabel": "env", "debounce": "5 s", "maxWait": "2h"}, []string{
			"spec.debounce: must be a duration such as 30s, 5m or 1h30m: a number and a unit (h, m, s, ms, us, ns) with no spaces",
			"spec.maxWait: must be at most 1h"}},
		{"a retry whose start exceeds its cap", "ConfigReloadPolicy", map[string]any{"configMapSelector": selector, "workloadSelector": selector,
			"scopeLabel": "env", "retry": map[string]any{"initialInterval": "1m", "maxInterval": "1s"}}, []string{
			"spec.retry: retry.initialInterval must not exceed retry.maxInterval"}},
		{"a wrong type stops CEL, as in the API server", "ConfigReloadPolicy", map[string]any{"configMapSelector": selector, "workloadSelector": selector,
			"scopeLabel": 3, "debounce": "5 s"}, []string{
			`spec.scopeLabel: spec.scopeLabel in body must be of type string: "integer"`,
			"<nil>: some validation rules were not checked because the object was invalid; correct the existing errors to complete validation"}},
		{"a rule whose target namespace the webhook fills", "RemediationRule", map[string]any{"matchers": []any{`alertname="Down"`},
			"template": map[string]any{"steps": []any{step(deployment)}}}, nil},
		{"a rule's bad cooldown and window", "RemediationRule", map[string]any{"matchers": []any{`alertname="Down"`}, "cooldown": "ten minutes", "circuitBreaker": map[string]any{"window": "-1m"},
			"template": map[string]any{"steps": []any{step(deployment)}}}, []string{
			"spec.cooldown: must be a duration such as 30s, 5m or 1h30m: a number and a unit (h, m, s, ms, us, ns) with no spaces",
			"spec.circuitBreaker.window: must be a duration such as 30s, 5m or 1h30m: a number and a unit (h, m, s, ms, us, ns) with no spaces"}},
		{"two template steps of one name, and a bad cooldown", "RemediationRule", map[string]any{"matchers": []any{`alertname="Down"`}, "cooldown": "5 s",
			"template": map[string]any{"steps": []any{step(deployment), step(deployment)}}}, []string{
			"spec.template.steps[1]: Duplicate value",
			"spec.cooldown: must be a duration such as 30s, 5m or 1h30m: a number and a unit (h, m, s, ms, us, ns) with no spaces"}},
		{"a body's requester is the webhook's to write", "KubernetesExecution", map[string]any{"action": "restart",
			"target":    map[string]any{"apiVersion": "apps/v1", "kind": "Deployment", "namespace": "team", "name": "web"},
			"requester": map[string]any{"groups": "not a list"}}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			raw, err := json.Marshal(map[string]any{"apiVersion": "remedy.dev/v1alpha1", "kind": tc.kind,
				"metadata": map[string]any{"name": "x", "namespace": "team"}, "spec": tc.spec})
			require.NoError(t, err)
			var got []string
			for _, e := range schemaErrors(context.Background(), tc.kind, "v1alpha1", "team", raw, nil) {
				if e.Detail == "" {
					e.Detail = e.Type.String() // a duplicate says only that
				}
				got = append(got, e.Field+": "+e.Detail)
			}
			assert.ElementsMatch(t, tc.want, got)
		})
	}
}

func TestSchemaErrorsOfAnUnknownKindAreLeftToTheAPIServer(t *testing.T) {
	assert.Empty(t, schemaErrors(context.Background(), "Deployment", "v1", "team", []byte(`{"spec":1}`), nil))
	assert.Empty(t, schemaErrors(context.Background(), "RemediationRule", "v1alpha1", "team", []byte(`not json`), nil))
}

// The schema's errors come first; a wrong type the webhook already names
// for the same field is left out, so it is not named twice.
func TestWithSchemaErrors(t *testing.T) {
	p := field.NewPath("spec")
	for _, tc := range []struct {
		name              string
		schema, own, want field.ErrorList
	}{
		{"only the webhook's", nil, field.ErrorList{field.Invalid(p.Child("a"), 1, "own")}, field.ErrorList{field.Invalid(p.Child("a"), 1, "own")}},
		{"schema first", field.ErrorList{field.Invalid(p.Child("b"), 2, "schema")}, field.ErrorList{field.Invalid(p.Child("a"), 1, "own")},
			field.ErrorList{field.Invalid(p.Child("b"), 2, "schema"), field.Invalid(p.Child("a"), 1, "own")}},
		{"sorted by field, the unchecked-rules note last", field.ErrorList{field.Invalid(nil, nil, "not checked"), field.Invalid(p.Child("b"), 2, "schema"), field.Invalid(p.Child("a"), 1, "schema")}, nil,
			field.ErrorList{field.Invalid(p.Child("a"), 1, "schema"), field.Invalid(p.Child("b"), 2, "schema"), field.Invalid(nil, nil, "not checked")}},
		{"a wrong type named once", field.ErrorList{field.TypeInvalid(p.Child("a"), 1, "schema"), field.Required(p.Child("c"), "")},
			field.ErrorList{field.TypeInvalid(p.Child("a"), 1, "own")},
			field.ErrorList{field.Required(p.Child("c"), ""), field.TypeInvalid(p.Child("a"), 1, "own")}},
		{"another problem of the same field kept", field.ErrorList{field.Invalid(p.Child("a"), 1, "schema")},
			field.ErrorList{field.Forbidden(p.Child("a"), "own")},
			field.ErrorList{field.Invalid(p.Child("a"), 1, "schema"), field.Forbidden(p.Child("a"), "own")}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.want, withSchemaErrors(tc.schema, tc.own))
		})
	}
}

// An update that leaves a stored bad value as it was is not refused for it,
// as the API server ratchets; a changed bad value is named.
func TestSchemaErrorsOfAnUpdateRatchet(t *testing.T) {
	policy := func(debounce, maxWait string) []byte {
		selector := map[string]any{"matchLabels": map[string]any{"reload": "true"}}
		raw, err := json.Marshal(map[string]any{"apiVersion": "remedy.dev/v1alpha1", "kind": "ConfigReloadPolicy",
			"metadata": map[string]any{"name": "x", "namespace": "team"},
			"spec":     map[string]any{"configMapSelector": selector, "workloadSelector": selector, "scopeLabel": "env", "debounce": debounce, "maxWait": maxWait}})
		require.NoError(t, err)
		return raw
	}
	var got []string
	for _, e := range schemaErrors(context.Background(), "ConfigReloadPolicy", "v1alpha1", "team", policy("5 s", "3h"), policy("5 s", "5m")) {
		got = append(got, e.Field+": "+e.Detail)
	}
	assert.Equal(t, []string{"spec.maxWait: must be at most 1h"}, got)
}
