package admission

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/remedy-dev/remedy/api/v1alpha1"
)

func TestDecodeObjectNamesTheField(t *testing.T) {
	cases := []struct {
		name, raw, want string
		into            any
	}{
		{name: "replicas as a word", into: &v1alpha1.KubernetesExecution{},
			raw:  `{"spec":{"action":"scale","target":{"kind":"Deployment"},"parameters":{"replicas":"three"}}}`,
			want: `spec.parameters.replicas: Invalid value: "three": must be of type integer (int32)`},
		{name: "a step's replicas", into: &v1alpha1.RemediationRequest{},
			raw:  `{"spec":{"steps":[{"name":"a","execution":{"action":"scale"}},{"name":"b","execution":{"parameters":{"replicas":true}}}]}}`,
			want: `spec.steps[1].execution.parameters.replicas: Invalid value: true: must be of type integer (int32)`},
		{name: "a condition's rego as an object", into: &v1alpha1.KubernetesExecution{},
			raw:  `{"spec":{"preConditions":[{"name":"a","rego":"package a"},{"name":"b","rego":{"x":1}}]}}`,
			want: `spec.preConditions[1].rego: Invalid value: must be of type string, not object`},
		{name: "a number for a string", into: &v1alpha1.KubernetesExecution{},
			raw:  `{"spec":{"target":{"apiVersion":"apps/v1","kind":2}}}`,
			want: `spec.target.kind: Invalid value: 2: must be of type string`},
		{name: "parameters as a string", into: &v1alpha1.KubernetesExecution{},
			raw:  `{"spec":{"parameters":"replicas=3"}}`,
			want: `spec.parameters: Invalid value: "replicas=3": must be of type object`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := decodeObject([]byte(tc.raw), tc.into)
			var inv *invalidError
			require.True(t, errors.As(err, &inv), "%v", err)
			require.Len(t, inv.errs, 1)
			assert.Equal(t, tc.want, inv.errs[0].Error())
			assert.NotContains(t, err.Error(), "Go struct")
		})
	}
	require.NoError(t, decodeObject([]byte(`{"spec":{"parameters":{"replicas":3}}}`), &v1alpha1.KubernetesExecution{}))
}
