package deploy_test

import (
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// No Role or ClusterRole under deploy/ grants a wildcard verb, resource or
// API group: each permission is named, so a new resource or verb in the
// cluster is never granted by accident.
func TestNoWildcardRules(t *testing.T) {
	seen := 0
	for _, glob := range []string{filepath.Join("*", "*.yaml"), filepath.Join("*", "*", "*.yaml")} {
		for _, kind := range []string{"Role", "ClusterRole"} {
			for _, o := range objects(t, glob, kind) {
				var r rbacv1.ClusterRole // a Role's fields are a subset
				o["kind"] = "ClusterRole"
				require.NoError(t, runtime.DefaultUnstructuredConverter.FromUnstructuredWithValidation(o, &r, true))
				seen++
				for i, rule := range r.Rules {
					for field, values := range map[string][]string{"verbs": rule.Verbs, "resources": rule.Resources, "apiGroups": rule.APIGroups, "resourceNames": rule.ResourceNames, "nonResourceURLs": rule.NonResourceURLs} {
						for _, v := range values {
							assert.NotContains(t, v, "*", "%s %s rule %d: wildcard in %s", kind, r.Name, i, field)
						}
					}
				}
			}
		}
	}
	assert.Greater(t, seen, 10, "the operator, worker, webhook, action and example roles were read")
}
