package gate

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"

	"github.com/remedy-dev/remedy/api/v1alpha1"
	"github.com/remedy-dev/remedy/internal/actions"
	"github.com/remedy-dev/remedy/internal/policy"
)

// CheckSpec names every problem of a spec in one permanent failure, as
// admission does, rather than one per attempt.
func TestCheckSpecNamesEveryProblem(t *testing.T) {
	target := v1alpha1.ObjectRef{APIVersion: "apps/v1", Kind: "Deployment", Namespace: "shop", Name: "web"}
	broken := func(name string) v1alpha1.Condition {
		return v1alpha1.Condition{Name: name, Rego: "package " + name + "\n\npass := {"}
	}
	for _, tc := range []struct {
		name   string
		action string
		spec   v1alpha1.KubernetesExecutionSpec
		want   []string
	}{
		{"an unknown action and two broken conditions", "teleport",
			v1alpha1.KubernetesExecutionSpec{PreConditions: []v1alpha1.Condition{broken("before")}, PostConditions: []v1alpha1.Condition{broken("after")}},
			[]string{`action "teleport" is not in this worker's catalog`, "condition before", "condition after"}},
		{"two broken conditions", "restart",
			v1alpha1.KubernetesExecutionSpec{PreConditions: []v1alpha1.Condition{broken("one"), broken("two")}},
			[]string{"condition one", "condition two"}},
		{"an unknown action alone", "teleport", v1alpha1.KubernetesExecutionSpec{}, []string{`action "teleport" is not in this worker's catalog`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var suite testsuite.WorkflowTestSuite
			env := suite.NewTestActivityEnvironment()
			env.RegisterActivity(&Validation{Policy: policy.NewEngine()})
			_, err := env.ExecuteActivity((&Validation{}).CheckSpec, tc.spec, actions.Request{Action: tc.action, Target: target})
			require.Error(t, err)
			var app *temporal.ApplicationError
			require.True(t, errors.As(err, &app), "a permanent failure: %v", err)
			assert.True(t, app.NonRetryable())
			assert.Equal(t, v1alpha1.ReasonInvalidParameters, app.Type())
			for _, w := range tc.want {
				assert.Contains(t, err.Error(), w)
			}
		})
	}
}
