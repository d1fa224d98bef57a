package policy

import (
	"context"
	"os"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"
)

// The shipped default policy compiles and says what its comments promise.
func TestDefaultPolicy(t *testing.T) {
	raw, err := os.ReadFile("../../deploy/policies/safety.yaml")
	require.NoError(t, err)
	var cm corev1.ConfigMap
	require.NoError(t, yaml.Unmarshal(raw, &cm))
	mods := map[string]string{"safety.rego": cm.Data["safety.rego"]}
	e := NewEngine()
	ctx := context.Background()

	v, err := e.EvalSafety(ctx, mods, SafetyInput{Action: "scale", Parameters: map[string]any{"replicas": 0},
		Target: map[string]any{"namespace": "shop", "name": "web"}, Namespace: NamespaceInput{Name: "shop", Labels: map[string]string{"env": "prod"}}})
	require.NoError(t, err)
	assert.Equal(t, []string{"scaling shop/web to zero replicas is not allowed in a prod namespace"}, v.Deny)

	v, err = e.EvalSafety(ctx, mods, SafetyInput{Action: "scale", Parameters: map[string]any{"replicas": 0}, Namespace: NamespaceInput{Name: "dev"}})
	require.NoError(t, err)
	assert.Empty(t, v.Deny)

	v, err = e.EvalSafety(ctx, mods, SafetyInput{Action: "patch"})
	require.NoError(t, err)
	assert.True(t, v.RequireDryRun)
}
