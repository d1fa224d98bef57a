package admission

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	authenticationv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/remedy-dev/remedy/api/v1alpha1"
)

func TestReloadAuthor(t *testing.T) {
	alice := authenticationv1.UserInfo{Username: "alice", Groups: []string{"dev"}}
	bob := v1alpha1.Requester{Username: "bob"}
	policy := func(author *v1alpha1.Requester, scope string) *v1alpha1.ConfigReloadPolicy {
		return &v1alpha1.ConfigReloadPolicy{Spec: v1alpha1.ConfigReloadPolicySpec{ScopeLabel: scope, Author: author}}
	}
	forged := &v1alpha1.Requester{Username: "system:admin", Groups: []string{"system:masters"}}
	cases := []struct {
		name          string
		old, cur      *v1alpha1.ConfigReloadPolicy
		want          string
		wantAuthorize bool
	}{
		{"create: the user, whatever the body says", nil, policy(forged, "env"), "alice", true},
		{"a spec change: the user, authorized afresh", policy(&bob, "env"), policy(&bob, "tier"), "alice", true},
		{"a metadata-only update keeps the stored author", policy(&bob, "env"), policy(forged, "env"), "bob", false},
		{"a metadata-only update of a policy stored without an author keeps none", policy(nil, "env"), policy(forged, "env"), "", false},
		{"a spec change of a policy stored without an author gets the user", policy(nil, "env"), policy(nil, "tier"), "alice", true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, authorize := ReloadAuthor(alice, tc.old, tc.cur)
			if tc.want == "" {
				assert.Nil(t, got)
			} else {
				require.NotNil(t, got)
				assert.Equal(t, tc.want, got.Username)
			}
			assert.Equal(t, tc.wantAuthorize, authorize)
		})
	}
}

func TestValidateReloadSelectors(t *testing.T) {
	ok := metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}}
	equals := metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "app", Operator: "Equals", Values: []string{"web"}}}}
	assert.Empty(t, validateReloadSelectors(&v1alpha1.ConfigReloadPolicySpec{ConfigMapSelector: ok, WorkloadSelector: ok}))
	assert.Empty(t, validateReloadSelectors(&v1alpha1.ConfigReloadPolicySpec{ConfigMapSelector: ok}), "an empty workloadSelector selects every workload")
	errs := validateReloadSelectors(&v1alpha1.ConfigReloadPolicySpec{ConfigMapSelector: ok, WorkloadSelector: equals})
	require.Len(t, errs, 1)
	assert.Equal(t, "spec.workloadSelector.matchExpressions[0].operator", errs[0].Field)
	assert.Contains(t, errs.ToAggregate().Error(), `"Equals"`)
}
