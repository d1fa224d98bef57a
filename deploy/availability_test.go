package deploy_test

import (
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// Every Deployment with more than one replica spreads them over nodes and
// has a PodDisruptionBudget, so a drain never takes all of them at once.
func TestReplicatedDeploymentsStayAvailable(t *testing.T) {
	var pdbs []policyv1.PodDisruptionBudget
	for _, o := range objects(t, filepath.Join("manager", "*.yaml"), "PodDisruptionBudget") {
		var p policyv1.PodDisruptionBudget
		require.NoError(t, runtime.DefaultUnstructuredConverter.FromUnstructuredWithValidation(o, &p, true))
		pdbs = append(pdbs, p)
	}
	replicated := 0
	for _, d := range deployments(t, filepath.Join("manager", "*.yaml")) {
		if d.Spec.Replicas == nil || *d.Spec.Replicas < 2 {
			continue
		}
		replicated++
		podLabels := d.Spec.Template.Labels
		spread := map[string]bool{}
		for _, c := range d.Spec.Template.Spec.TopologySpreadConstraints {
			require.NotNil(t, c.LabelSelector, d.Name)
			if selects(t, *c.LabelSelector, podLabels) {
				spread[c.TopologyKey] = true
			}
		}
		assert.True(t, spread["kubernetes.io/hostname"], "%s spreads its replicas over nodes", d.Name)
		covered := 0
		for _, p := range pdbs {
			if p.Namespace == d.Namespace && p.Spec.Selector != nil && selects(t, *p.Spec.Selector, podLabels) {
				covered++
				require.NotNil(t, p.Spec.MinAvailable, p.Name)
				assert.Positive(t, p.Spec.MinAvailable.IntValue(), "%s keeps one replica", p.Name)
				assert.Less(t, p.Spec.MinAvailable.IntValue(), int(*d.Spec.Replicas), "%s still lets a drain evict one", p.Name)
			}
		}
		assert.Equal(t, 1, covered, "%s has one PodDisruptionBudget", d.Name)
	}
	assert.Equal(t, 3, replicated, "operator, worker and drift webhook")
}
