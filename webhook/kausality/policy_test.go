package kausality

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	kv1 "github.com/remedy-dev/remedy/api/kausality/v1alpha1"
)

// The policy cases are kausality's pkg/policy tests (store_test.go,
// precedence_test.go) restated as data.

func policy(name string, mode kv1.Mode, mutate ...func(*kv1.KausalitySpec)) kv1.Kausality {
	p := kv1.Kausality{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: kv1.KausalitySpec{
		Resources: []kv1.ResourceRule{{APIGroups: []string{"apps"}, Resources: []string{"*"}}}, Mode: mode,
	}}
	for _, m := range mutate {
		m(&p.Spec)
	}
	return p
}

func resources(group string, rs ...string) func(*kv1.KausalitySpec) {
	return func(s *kv1.KausalitySpec) {
		s.Resources = []kv1.ResourceRule{{APIGroups: []string{group}, Resources: rs}}
	}
}

func nsNames(names ...string) func(*kv1.KausalitySpec) {
	return func(s *kv1.KausalitySpec) { s.Namespaces = &kv1.NamespaceSelector{Names: names} }
}

func nsLabels(l map[string]string) func(*kv1.KausalitySpec) {
	return func(s *kv1.KausalitySpec) {
		s.Namespaces = &kv1.NamespaceSelector{Selector: &metav1.LabelSelector{MatchLabels: l}}
	}
}

func objLabels(l map[string]string) func(*kv1.KausalitySpec) {
	return func(s *kv1.KausalitySpec) { s.ObjectSelector = &metav1.LabelSelector{MatchLabels: l} }
}

func overrides(os ...kv1.ModeOverride) func(*kv1.KausalitySpec) {
	return func(s *kv1.KausalitySpec) { s.Overrides = os }
}

func deployments(ns string) PolicyTarget {
	return PolicyTarget{Group: "apps", Resource: "deployments", Namespace: ns}
}

var (
	explicitNames = policy("explicit-names", kv1.ModeEnforce, nsNames("production"))
	selectorPol   = policy("selector", kv1.ModeLog, nsLabels(map[string]string{"env": "production"}))
	allNamespaces = policy("all-namespaces", kv1.ModeLog)
	production    = PolicyTarget{Group: "apps", Resource: "deployments", Namespace: "production",
		NamespaceLabels: map[string]string{"env": "production"}}
	platformBaseline = policy("platform-baseline", kv1.ModeLog)
	teamPayments     = policy("team-payments", kv1.ModeEnforce, resources("apps", "deployments"), nsNames("payments-prod"))
	teamOrders       = policy("team-orders", kv1.ModeEnforce, nsLabels(map[string]string{"team": "orders"}))
)

func TestResolvePolicy(t *testing.T) {
	for _, tc := range []struct {
		name     string
		policies []kv1.Kausality
		target   PolicyTarget
		want     kv1.Mode
		policy   string // "" = no policy matches
	}{
		// TestPrecedence_NamespaceSpecificity
		{name: "explicit names wins over selector", policies: []kv1.Kausality{selectorPol, explicitNames}, target: production, want: kv1.ModeEnforce, policy: "explicit-names"},
		{name: "explicit names wins over all-namespaces", policies: []kv1.Kausality{allNamespaces, explicitNames}, target: production, want: kv1.ModeEnforce, policy: "explicit-names"},
		{name: "selector wins over all-namespaces", policies: []kv1.Kausality{allNamespaces, selectorPol}, target: production, want: kv1.ModeLog, policy: "selector"},
		{name: "all three: explicit names wins", policies: []kv1.Kausality{allNamespaces, selectorPol, explicitNames}, target: production, want: kv1.ModeEnforce, policy: "explicit-names"},
		// TestPrecedence_ResourceSpecificity
		{name: "explicit resource wins over wildcard", target: deployments("default"), want: kv1.ModeEnforce, policy: "explicit-resource",
			policies: []kv1.Kausality{policy("wildcard-resource", kv1.ModeLog), policy("explicit-resource", kv1.ModeEnforce, resources("apps", "deployments"))}},
		{name: "explicit resource wins in either order", target: deployments("default"), want: kv1.ModeEnforce, policy: "explicit-resource",
			policies: []kv1.Kausality{policy("explicit-resource", kv1.ModeEnforce, resources("apps", "deployments")), policy("wildcard-resource", kv1.ModeLog)}},
		// TestPrecedence_AlphabeticalTieBreaker. kausality's store sorts by
		// name before resolving; Resolve sorts itself, so the order given
		// never matters (kausality's unsorted-slice case is an artefact of
		// calling its resolver without the store).
		{name: "tie: alphabetically first wins", target: deployments("default"), want: kv1.ModeEnforce, policy: "aaa-policy",
			policies: []kv1.Kausality{policy("aaa-policy", kv1.ModeEnforce), policy("zzz-policy", kv1.ModeLog)}},
		{name: "tie: alphabetically first wins in any order", target: deployments("default"), want: kv1.ModeEnforce, policy: "aaa-policy",
			policies: []kv1.Kausality{policy("zzz-policy", kv1.ModeLog), policy("aaa-policy", kv1.ModeEnforce)}},
		// TestPrecedence_OverrideEvaluationOrder
		{name: "first matching override wins", target: deployments("production"), want: kv1.ModeEnforce, policy: "overrides",
			policies: []kv1.Kausality{policy("overrides", kv1.ModeLog, overrides(
				kv1.ModeOverride{APIGroups: []string{"apps"}, Resources: []string{"deployments"}, Namespaces: []string{"production"}, Mode: kv1.ModeEnforce},
				kv1.ModeOverride{Namespaces: []string{"production"}, Mode: kv1.ModeLog},
				kv1.ModeOverride{APIGroups: []string{"apps"}, Resources: []string{"deployments"}, Mode: kv1.ModeLog},
			))}},
		{name: "no override matches: the policy's mode", target: PolicyTarget{Group: "apps", Resource: "statefulsets", Namespace: "staging"}, want: kv1.ModeLog, policy: "overrides",
			policies: []kv1.Kausality{policy("overrides", kv1.ModeLog, overrides(
				kv1.ModeOverride{APIGroups: []string{"apps"}, Resources: []string{"deployments"}, Namespaces: []string{"production"}, Mode: kv1.ModeEnforce},
			))}},
		// TestPrecedence_CombinedScenarios
		{name: "payments deployment in payments-prod", policies: []kv1.Kausality{platformBaseline, teamPayments, teamOrders},
			target: deployments("payments-prod"), want: kv1.ModeEnforce, policy: "team-payments"},
		{name: "payments statefulset in payments-prod", policies: []kv1.Kausality{platformBaseline, teamPayments, teamOrders},
			target: PolicyTarget{Group: "apps", Resource: "statefulsets", Namespace: "payments-prod"}, want: kv1.ModeLog, policy: "platform-baseline"},
		{name: "orders deployment by namespace selector", policies: []kv1.Kausality{platformBaseline, teamPayments, teamOrders},
			target: PolicyTarget{Group: "apps", Resource: "deployments", Namespace: "orders-prod", NamespaceLabels: map[string]string{"team": "orders"}},
			want:   kv1.ModeEnforce, policy: "team-orders"},
		{name: "random namespace: the baseline", policies: []kv1.Kausality{platformBaseline, teamPayments, teamOrders},
			target: deployments("random-namespace"), want: kv1.ModeLog, policy: "platform-baseline"},
		{name: "other group: no policy", policies: []kv1.Kausality{platformBaseline, teamPayments, teamOrders},
			target: PolicyTarget{Group: "batch", Resource: "jobs", Namespace: "payments-prod"}},
		// TestPrecedence_ObjectSelectorAddsSpecificity
		{name: "object selector adds specificity", target: PolicyTarget{Group: "apps", Resource: "deployments", Namespace: "default", ObjectLabels: map[string]string{"protected": "true"}},
			policies: []kv1.Kausality{policy("no-selector", kv1.ModeLog), policy("with-selector", kv1.ModeEnforce, objLabels(map[string]string{"protected": "true"}))},
			want:     kv1.ModeEnforce, policy: "with-selector"},
		{name: "object selector does not match unlabelled objects", target: deployments("default"),
			policies: []kv1.Kausality{policy("no-selector", kv1.ModeLog), policy("with-selector", kv1.ModeEnforce, objLabels(map[string]string{"protected": "true"}))},
			want:     kv1.ModeLog, policy: "no-selector"},
		// Remedy: a policy without a mode leaves it to --default-mode;
		// a deleting policy and one whose selector does not parse match nothing.
		{name: "policy without mode", policies: []kv1.Kausality{policy("quiet", "")}, target: deployments("default"), policy: "quiet"},
		{name: "deleting policy is ignored", target: deployments("default"), want: kv1.ModeLog, policy: "b",
			policies: []kv1.Kausality{func() kv1.Kausality {
				p := policy("a", kv1.ModeEnforce)
				p.DeletionTimestamp = &metav1.Time{}
				return p
			}(), policy("b", kv1.ModeLog)}},
		{name: "unparseable selector matches nothing", target: PolicyTarget{Group: "apps", Resource: "deployments", Namespace: "default", ObjectLabels: map[string]string{"a": "b"}},
			policies: []kv1.Kausality{policy("bad", kv1.ModeEnforce, func(s *kv1.KausalitySpec) {
				s.ObjectSelector = &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "a", Operator: "Sometimes"}}}
			})}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ps, _ := CompilePolicies(tc.policies)
			m, ok := ps.Resolve(tc.target)
			if tc.policy == "" {
				require.False(t, ok, "matched %s", m.Policy)
				return
			}
			require.True(t, ok)
			assert.Equal(t, tc.policy, m.Policy)
			assert.Equal(t, tc.want, m.Mode)
		})
	}
}

func TestCompilePoliciesNamesBadSelectors(t *testing.T) {
	_, errs := CompilePolicies([]kv1.Kausality{policy("bad", kv1.ModeLog, func(s *kv1.KausalitySpec) {
		s.Namespaces = &kv1.NamespaceSelector{Selector: &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "a", Operator: "In"}}}}
	}), policy("good", kv1.ModeLog)})
	require.Len(t, errs, 1)
	assert.ErrorContains(t, errs["bad"], "namespaces.selector")
}

// TestRuleMatches is kausality's TestRuleMatches.
func TestRuleMatches(t *testing.T) {
	for _, tc := range []struct {
		name            string
		rule            kv1.ResourceRule
		group, resource string
		want            bool
	}{
		{"exact match", kv1.ResourceRule{APIGroups: []string{"apps"}, Resources: []string{"deployments"}}, "apps", "deployments", true},
		{"wildcard resource", kv1.ResourceRule{APIGroups: []string{"apps"}, Resources: []string{"*"}}, "apps", "statefulsets", true},
		{"wrong group", kv1.ResourceRule{APIGroups: []string{"apps"}, Resources: []string{"deployments"}}, "batch", "deployments", false},
		{"wrong resource", kv1.ResourceRule{APIGroups: []string{"apps"}, Resources: []string{"deployments"}}, "apps", "statefulsets", false},
		{"excluded resource", kv1.ResourceRule{APIGroups: []string{"apps"}, Resources: []string{"*"}, Excluded: []string{"replicasets"}}, "apps", "replicasets", false},
		{"core group", kv1.ResourceRule{APIGroups: []string{""}, Resources: []string{"configmaps"}}, "", "configmaps", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.want, ruleMatches(tc.rule, tc.group, tc.resource))
		})
	}
}

// TestNamespacesMatch is kausality's TestNamespacesMatch.
func TestNamespacesMatch(t *testing.T) {
	sel := func(l map[string]string) *metav1.LabelSelector { return &metav1.LabelSelector{MatchLabels: l} }
	for _, tc := range []struct {
		name      string
		ns        *kv1.NamespaceSelector
		namespace string
		labels    map[string]string
		want      bool
	}{
		{name: "nil selector matches all", namespace: "production", want: true},
		{name: "explicit name match", ns: &kv1.NamespaceSelector{Names: []string{"production", "staging"}}, namespace: "production", want: true},
		{name: "explicit name no match", ns: &kv1.NamespaceSelector{Names: []string{"production", "staging"}}, namespace: "development", want: false},
		{name: "excluded namespace", ns: &kv1.NamespaceSelector{Excluded: []string{"kube-system"}}, namespace: "kube-system", want: false},
		{name: "excluded takes precedence over names", ns: &kv1.NamespaceSelector{Names: []string{"production", "kube-system"}, Excluded: []string{"kube-system"}}, namespace: "kube-system", want: false},
		{name: "label selector match", ns: &kv1.NamespaceSelector{Selector: sel(map[string]string{"env": "production"})}, namespace: "my-namespace", labels: map[string]string{"env": "production"}, want: true},
		{name: "label selector no match", ns: &kv1.NamespaceSelector{Selector: sel(map[string]string{"env": "production"})}, namespace: "my-namespace", labels: map[string]string{"env": "staging"}, want: false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := policy("p", kv1.ModeLog, func(s *kv1.KausalitySpec) { s.Namespaces = tc.ns })
			ps, errs := CompilePolicies([]kv1.Kausality{p})
			require.Empty(t, errs)
			_, ok := ps.Resolve(PolicyTarget{Group: "apps", Resource: "deployments", Namespace: tc.namespace, NamespaceLabels: tc.labels})
			assert.Equal(t, tc.want, ok)
		})
	}
}

// TestSpecificity is kausality's TestCalculateSpecificity and
// TestPrecedence_SpecificityScoreCalculation.
func TestSpecificity(t *testing.T) {
	for _, tc := range []struct {
		name string
		p    kv1.Kausality
		want int
	}{
		{"wildcard everything", policy("p", ""), 0},
		{"explicit resource", policy("p", "", resources("apps", "deployments")), 10},
		{"namespace selector", policy("p", "", nsLabels(map[string]string{"env": "production"})), 50},
		{"explicit namespace", policy("p", "", nsNames("production")), 100},
		{"object selector", policy("p", "", objLabels(map[string]string{"protected": "true"})), 5},
		{"explicit resource + namespace", policy("p", "", resources("apps", "deployments"), nsNames("production")), 110},
		{"all specific", policy("p", "", resources("apps", "deployments"), nsNames("production"), objLabels(map[string]string{"protected": "true"})), 115},
	} {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.want, specificity(&tc.p.Spec, "apps", "deployments"))
		})
	}
}

// TestOverrideMatches is kausality's TestOverrideMatches: an override
// applies when each filter it gives matches.
func TestOverrideMatches(t *testing.T) {
	for _, tc := range []struct {
		name   string
		o      kv1.ModeOverride
		target PolicyTarget
		want   bool
	}{
		{"empty override matches all", kv1.ModeOverride{}, deployments("production"), true},
		{"namespace match", kv1.ModeOverride{Namespaces: []string{"production"}}, deployments("production"), true},
		{"namespace no match", kv1.ModeOverride{Namespaces: []string{"production"}}, deployments("staging"), false},
		{"resource match", kv1.ModeOverride{APIGroups: []string{"apps"}, Resources: []string{"statefulsets"}}, PolicyTarget{Group: "apps", Resource: "statefulsets", Namespace: "default"}, true},
		{"resource no match", kv1.ModeOverride{APIGroups: []string{"apps"}, Resources: []string{"statefulsets"}}, deployments("default"), false},
		{"namespace + resource match", kv1.ModeOverride{APIGroups: []string{"apps"}, Resources: []string{"deployments"}, Namespaces: []string{"production"}}, deployments("production"), true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.o.Mode = kv1.ModeEnforce
			p := policy("p", kv1.ModeLog, overrides(tc.o))
			got := overrideMode(&p.Spec, tc.target) == kv1.ModeEnforce
			assert.Equal(t, tc.want, got)
		})
	}
}

// TestModePrecedence is kausality's TestPrecedence_AnnotationOverridesPolicy
// and TestResolveMode_AnnotationPrecedence: the object's kausality.io/mode,
// then its namespace's, then the policy (the adapter passes the policy's
// mode as DefaultMode), then log.
func TestModePrecedence(t *testing.T) {
	ps, _ := CompilePolicies([]kv1.Kausality{policy("enforce-policy", kv1.ModeEnforce, resources("apps", "replicasets"), nsNames("demo"))})
	m, ok := ps.Resolve(PolicyTarget{Group: "apps", Resource: "replicasets", Namespace: "demo"})
	require.True(t, ok)
	for _, tc := range []struct {
		name          string
		object, space string
		policy        kv1.Mode
		want          kv1.Mode
	}{
		{name: "object annotation overrides policy", object: "log", policy: m.Mode, want: kv1.ModeLog},
		{name: "namespace annotation overrides policy", space: "log", policy: m.Mode, want: kv1.ModeLog},
		{name: "object wins over namespace", object: "enforce", space: "log", policy: m.Mode, want: kv1.ModeEnforce},
		{name: "policy when no annotations", policy: m.Mode, want: kv1.ModeEnforce},
		{name: "no annotations, no policy: log", want: kv1.ModeLog},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := update()
			if tc.object != "" {
				ann := childAnn()
				ann[kv1.AnnotationMode] = tc.object
				r.OldObject, r.Object = rs(1, ann), rs(2, ann)
			}
			r.NamespaceMode, r.DefaultMode = tc.space, tc.policy
			res := Decide(r)
			require.NotNil(t, res.Drift)
			assert.Equal(t, tc.want, res.Drift.Mode)
		})
	}
}

func TestInitialization(t *testing.T) {
	ps, _ := CompilePolicies([]kv1.Kausality{
		policy("b", "", func(s *kv1.KausalitySpec) {
			s.Initialization = []kv1.InitializationRule{{APIGroup: "example.com", Kind: "Widget", Conditions: []string{"Later"}}}
		}),
		policy("a", "", func(s *kv1.KausalitySpec) {
			s.Initialization = []kv1.InitializationRule{{APIGroup: "example.com", Kind: "Widget", Conditions: []string{"Synced"}}}
		}),
	})
	assert.Equal(t, &InitRule{Conditions: []string{"Synced"}}, ps.Initialization("example.com", "Widget"), "the alphabetically first policy's rule")
	assert.Nil(t, ps.Initialization("apps", "Deployment"))

	g3 := ptr(int64(3))
	for _, tc := range []struct {
		name   string
		rule   *InitRule
		og     *int64
		conds  []Condition
		phase  string
		ok     bool
		record bool
	}{
		{name: "default: Ready", conds: []Condition{{"Ready", "True"}}, ok: true, record: true},
		{name: "rule replaces the default: Ready alone is not enough", rule: &InitRule{Conditions: []string{"Synced"}}, conds: []Condition{{"Ready", "True"}}},
		{name: "rule condition True", rule: &InitRule{Conditions: []string{"Synced"}}, conds: []Condition{{"Synced", "True"}}, ok: true, record: true},
		{name: "rule condition False", rule: &InitRule{Conditions: []string{"Synced"}}, conds: []Condition{{"Synced", "False"}}},
		{name: "observedGeneration condition, caught up", rule: &InitRule{ObservedGenerationConditions: []string{"Healthy"}}, og: g3, conds: []Condition{{"Healthy", "True"}}, ok: true, record: true},
		{name: "observedGeneration condition, behind", rule: &InitRule{ObservedGenerationConditions: []string{"Healthy"}}, og: ptr(int64(2)), conds: []Condition{{"Healthy", "True"}}},
		{name: "observedGeneration alone, caught up", rule: &InitRule{ObservedGeneration: true}, og: g3, ok: true, record: true},
		{name: "observedGeneration alone, absent", rule: &InitRule{ObservedGeneration: true}},
		{name: "the phase high-water mark still wins", rule: &InitRule{Conditions: []string{"Synced"}}, phase: kv1.PhaseInitialized, ok: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := Parent{Generation: 3, ObservedGeneration: tc.og, Conditions: tc.conds, Init: tc.rule,
				Annotations: map[string]string{kv1.AnnotationPhase: tc.phase}}
			ok, record := initialized(p)
			assert.Equal(t, tc.ok, ok, "initialized")
			assert.Equal(t, tc.record, record, "record")
		})
	}
}

// BenchmarkResolvePolicy is the per-request cost the adapter adds before
// Decide: kausality's combined scenario, three policies, one with a
// namespace selector.
func BenchmarkResolvePolicy(b *testing.B) {
	ps, _ := CompilePolicies([]kv1.Kausality{platformBaseline, teamPayments, teamOrders})
	t := PolicyTarget{Group: "apps", Resource: "deployments", Namespace: "orders-prod", NamespaceLabels: map[string]string{"team": "orders"}}
	b.ReportAllocs()
	for b.Loop() {
		if m, _ := ps.Resolve(t); m.Policy != "team-orders" {
			b.Fatal(m.Policy)
		}
	}
}
