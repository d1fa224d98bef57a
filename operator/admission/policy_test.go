package admission

import (
	"context"
	"net/http"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/remedy-dev/remedy/internal/policy"
)

func TestPolicyDecide(t *testing.T) {
	const (
		good    = "package remedy.safety\n\nrequire_approval if input.parameters.replicas > 10\n"
		broken  = "package remedy.safety\n\ndeny contains msg if {"
		helpers = "package remedy.helpers\n\nlimit := 10\n"
	)
	p := &Policy{Namespace: "remedy-system", CheckSafety: policy.NewEngine().CheckSafety}
	for _, tc := range []struct {
		name         string
		own, others  map[string]string
		wantCode     int32
		wantContains string
	}{
		{name: "a good policy", own: map[string]string{"safety/policy.rego": good}},
		{name: "a helper module beside a good policy", own: map[string]string{"helpers/h.rego": helpers}, others: map[string]string{"safety/policy.rego": good}},
		{name: "no rego keys", own: map[string]string{}},
		{
			name: "bad Rego", own: map[string]string{"safety/policy.rego": broken},
			wantCode: http.StatusUnprocessableEntity, wantContains: "with them the policy is broken: rego:",
		},
		{
			name: "a module that conflicts with another ConfigMap's",
			own:  map[string]string{"extra/p.rego": "package remedy.safety\n\nrequire_approval contains x if { x := 1 }\n"}, others: map[string]string{"safety/policy.rego": good},
			wantCode: http.StatusUnprocessableEntity, wantContains: "is broken",
		},
		{
			name: "an edit elsewhere while another ConfigMap breaks the policy passes, with a warning",
			own:  map[string]string{"helpers/h.rego": helpers}, others: map[string]string{"safety/policy.rego": broken},
			wantContains: "stays broken by another policy ConfigMap (safety/policy.rego)",
		},
		{
			name: "a broken edit while another ConfigMap breaks the policy is refused",
			own:  map[string]string{"helpers/h.rego": "package remedy.helpers\n\nx := "}, others: map[string]string{"safety/policy.rego": broken},
			wantCode: http.StatusUnprocessableEntity, wantContains: "is broken",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v := p.decide(context.Background(), "remedy-system/p", tc.own, tc.others)
			assert.Equal(t, tc.wantCode == 0, v.Allowed, v.Message)
			assert.Equal(t, tc.wantCode, v.Code)
			assert.Contains(t, v.Message, tc.wantContains)
		})
	}
}
