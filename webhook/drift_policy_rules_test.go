package webhook

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	kv1 "github.com/remedy-dev/remedy/api/kausality/v1alpha1"
)

func TestDriftRules(t *testing.T) {
	discovered := map[string][]string{
		"apps": {"deployments", "replicasets", "statefulsets", "daemonsets", "controllerrevisions"},
		"":     {"pods", "configmaps", "secrets"},
	}
	discover := func(g string) ([]string, error) { return discovered[g], nil }
	pol := func(name string, rules ...kv1.ResourceRule) kv1.Kausality {
		return kv1.Kausality{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: kv1.KausalitySpec{Resources: rules}}
	}
	type want struct {
		group          string
		resources      []string
		statusResource []string // nil: no status rule
	}
	for _, tc := range []struct {
		name     string
		policies []kv1.Kausality
		want     []want
	}{
		{name: "no policies, no rules"},
		{name: "explicit resources, merged and sorted across policies", policies: []kv1.Kausality{
			pol("a", kv1.ResourceRule{APIGroups: []string{"apps"}, Resources: []string{"replicasets", "deployments"}}),
			pol("b", kv1.ResourceRule{APIGroups: []string{"apps", "batch"}, Resources: []string{"deployments"}}),
		}, want: []want{
			{"apps", []string{"deployments", "replicasets"}, []string{"deployments/status", "replicasets/status"}},
			{"batch", []string{"deployments"}, []string{"deployments/status"}},
		}},
		{name: "pods have no status rule", policies: []kv1.Kausality{
			pol("a", kv1.ResourceRule{APIGroups: []string{""}, Resources: []string{"pods", "configmaps"}}),
		}, want: []want{{"", []string{"configmaps", "pods"}, []string{"configmaps/status"}}}},
		{name: "a bare wildcard stays a wildcard", policies: []kv1.Kausality{
			pol("a", kv1.ResourceRule{APIGroups: []string{"example.com"}, Resources: []string{"*"}}),
			pol("b", kv1.ResourceRule{APIGroups: []string{"example.com"}, Resources: []string{"widgets"}}),
		}, want: []want{{"example.com", []string{"*"}, []string{"*/status"}}}},
		{name: "a wildcard with exclusions is expanded", policies: []kv1.Kausality{
			pol("a", kv1.ResourceRule{APIGroups: []string{"apps"}, Resources: []string{"*"}, Excluded: []string{"controllerrevisions"}}),
		}, want: []want{{"apps", []string{"daemonsets", "deployments", "replicasets", "statefulsets"},
			[]string{"daemonsets/status", "deployments/status", "replicasets/status", "statefulsets/status"}}}},
		{name: "the core wildcard is expanded, so Pods keep no status rule", policies: []kv1.Kausality{
			pol("a", kv1.ResourceRule{APIGroups: []string{""}, Resources: []string{"*"}}),
		}, want: []want{{"", []string{"configmaps", "pods"}, []string{"configmaps/status"}}}},
		{name: "Secrets are never routed, even when named", policies: []kv1.Kausality{
			pol("a", kv1.ResourceRule{APIGroups: []string{""}, Resources: []string{"secrets", "configmaps"}}),
		}, want: []want{{"", []string{"configmaps"}, []string{"configmaps/status"}}}},
		{name: "a deleting policy adds nothing", policies: []kv1.Kausality{func() kv1.Kausality {
			p := pol("a", kv1.ResourceRule{APIGroups: []string{"apps"}, Resources: []string{"deployments"}})
			p.DeletionTimestamp = &metav1.Time{}
			return p
		}()}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rules, err := DriftRules(tc.policies, discover)
			require.NoError(t, err)
			var got []want
			for i := 0; i < len(rules); i++ {
				r := rules[i]
				assert.Equal(t, []admissionregistrationv1.OperationType{"CREATE", "UPDATE", "DELETE"}, r.Operations)
				assert.Equal(t, []string{"*"}, r.APIVersions)
				w := want{group: r.APIGroups[0], resources: r.Resources}
				if i+1 < len(rules) && rules[i+1].APIGroups[0] == w.group && len(rules[i+1].Operations) == 1 {
					assert.Equal(t, admissionregistrationv1.Update, rules[i+1].Operations[0])
					w.statusResource = rules[i+1].Resources
					i++
				}
				got = append(got, w)
			}
			assert.Equal(t, tc.want, got)
		})
	}

	_, err := DriftRules([]kv1.Kausality{pol("a", kv1.ResourceRule{APIGroups: []string{""}, Resources: []string{"*"}})},
		func(string) ([]string, error) { return nil, errors.New("discovery down") })
	assert.ErrorContains(t, err, "discovery down")
}
