package deploy

import (
	"context"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/yaml"

	"github.com/remedy-dev/remedy/internal/devenv"
	"github.com/remedy-dev/remedy/test/procs"
)

// rightsFile holds every Remedy identity's expected rights: per
// ServiceAccount, what it may do in any namespace ("cluster", from its
// ClusterRoleBindings) and what it may do beyond that in remedy-system.
// Keys are resource[.group][/subresource][ name], a URL for a
// non-resource rule; values are sorted verbs. The entry anyServiceAccount
// is what every ServiceAccount may do (Kubernetes' own bindings), which
// is left out of the others.
const rightsFile = "testdata/identity-rights.yaml"

const anyServiceAccount = "(any ServiceAccount)"

type rights map[string][]string

type identityRights struct {
	Cluster      rights `json:"cluster"`
	RemedySystem rights `json:"remedy-system,omitempty"`
}

// TestIdentityRights asks the API server, as each of Remedy's
// ServiceAccounts, what it may do (SelfSubjectRulesReview) in a namespace
// of workloads and in remedy-system, and compares the answer exactly with
// testdata/identity-rights.yaml; and every ServiceAccount deploy/ creates
// is a row of the identity table, and every ServiceAccount row is one
// deploy/ creates.
func TestIdentityRights(t *testing.T) {
	ctx := context.Background()
	raw, err := os.ReadFile(rightsFile)
	require.NoError(t, err)
	var want map[string]identityRights
	require.NoError(t, yaml.UnmarshalStrict(raw, &want))

	sas, err := procs.Clientset(t).CoreV1().ServiceAccounts(devenv.Namespace).List(ctx, metav1.ListOptions{LabelSelector: "app.kubernetes.io/part-of=remedy"})
	require.NoError(t, err)
	var accounts []string
	for _, sa := range sas.Items {
		accounts = append(accounts, sa.Name)
	}
	slices.Sort(accounts)
	require.Contains(t, accounts, "remedy-operator")
	require.Contains(t, accounts, "remedy-action-scale")

	t.Run("the expected rights name exactly Remedy's ServiceAccounts", func(t *testing.T) {
		assert.Equal(t, append([]string{anyServiceAccount}, accounts...), slices.Sorted(maps.Keys(want)))
	})
	t.Run("the identity table names exactly Remedy's ServiceAccounts", func(t *testing.T) {
		patterns := readmeIdentities(t)
		for _, sa := range accounts {
			n := 0
			for p, re := range patterns {
				if re.MatchString(sa) {
					n++
					t.Logf("%s: identity row %s", sa, p)
				}
			}
			assert.Equal(t, 1, n, "ServiceAccount %s should match exactly one identity of README's table %v", sa, slices.Sorted(maps.Keys(patterns)))
		}
		for p, re := range patterns {
			assert.True(t, slices.ContainsFunc(accounts, re.MatchString), "the identity table names %s, which deploy/ does not create", p)
		}
	})

	ns := "identity-rights"
	_, err = procs.Clientset(t).CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{})
	createdOrExists(t, err)
	// A ServiceAccount of another namespace that nothing binds: what any ServiceAccount may do.
	base := rulesOf(t, "default", "remedy-rights-baseline", ns)
	assert.Equal(t, want[anyServiceAccount].Cluster, base, "what every ServiceAccount may do (%s, %q)\n%s", rightsFile, anyServiceAccount, dump(base))
	for _, sa := range accounts {
		t.Run(sa, func(t *testing.T) {
			got := without(rulesOf(t, devenv.Namespace, sa, ns), base)
			assert.Equal(t, want[sa].Cluster, got, "%s in any namespace (%s, cluster):\n%s", sa, rightsFile, dump(got))
			inSystem := without(without(rulesOf(t, devenv.Namespace, sa, devenv.Namespace), base), got)
			assert.Equal(t, want[sa].RemedySystem, inSystem, "%s in %s beyond that (%s, remedy-system):\n%s", sa, devenv.Namespace, rightsFile, dump(inSystem))
		})
	}
}

// rulesOf is what the API server answers the ServiceAccount namespace/name
// asking what it may do in ns, flattened to one entry per resource (and
// resource name) or URL. Cluster-scoped resources granted cluster-wide are
// in every namespace's answer.
func rulesOf(t *testing.T, namespace, name, ns string) rights {
	t.Helper()
	cfg := rest.CopyConfig(procs.Env().Config)
	cfg.Impersonate = rest.ImpersonationConfig{
		UserName: "system:serviceaccount:" + namespace + ":" + name,
		Groups:   []string{"system:serviceaccounts", "system:serviceaccounts:" + namespace, "system:authenticated"},
	}
	cs, err := kubernetes.NewForConfig(cfg)
	require.NoError(t, err)
	r, err := cs.AuthorizationV1().SelfSubjectRulesReviews().Create(context.Background(),
		&authorizationv1.SelfSubjectRulesReview{Spec: authorizationv1.SelfSubjectRulesReviewSpec{Namespace: ns}}, metav1.CreateOptions{})
	require.NoError(t, err)
	require.False(t, r.Status.Incomplete, "the API server could not list every rule of %s: %s", name, r.Status.EvaluationError)
	out := rights{}
	add := func(key string, verbs []string) {
		for _, v := range verbs {
			if !slices.Contains(out[key], v) {
				out[key] = append(out[key], v)
			}
		}
		slices.Sort(out[key])
	}
	for _, rule := range r.Status.ResourceRules {
		for _, g := range rule.APIGroups {
			for _, res := range rule.Resources {
				key := res
				if g != "" {
					resource, sub, _ := strings.Cut(res, "/")
					key = resource + "." + g
					if sub != "" {
						key += "/" + sub
					}
				}
				if len(rule.ResourceNames) == 0 {
					add(key, rule.Verbs)
				}
				for _, n := range rule.ResourceNames {
					add(key+" "+n, rule.Verbs)
				}
			}
		}
	}
	for _, rule := range r.Status.NonResourceRules {
		for _, u := range rule.NonResourceURLs {
			add(u, rule.Verbs)
		}
	}
	return out
}

// without is r less every verb base grants on the same key.
func without(r, base rights) rights {
	out := rights{}
	for k, verbs := range r {
		for _, v := range verbs {
			if !slices.Contains(base[k], v) {
				out[k] = append(out[k], v)
			}
		}
	}
	if len(out) == 0 {
		return nil
	}
	return out
}

func dump(r rights) string {
	b, _ := yaml.Marshal(r)
	return string(b)
}

// readmeIdentities are the ServiceAccounts the first column of the identity
// table in docs/security.md names (`remedy-...`), as patterns: a <placeholder>
// stands for any name part.
func readmeIdentities(t *testing.T) map[string]*regexp.Regexp {
	raw, err := os.ReadFile(filepath.Join(procs.Root, "docs", "security.md"))
	require.NoError(t, err)
	lines := strings.Split(string(raw), "\n")
	start := slices.IndexFunc(lines, func(l string) bool { return strings.HasPrefix(l, "| identity | can do |") })
	require.GreaterOrEqual(t, start, 0, "docs/security.md has no identity table")
	out := map[string]*regexp.Regexp{}
	for _, l := range lines[start+2:] {
		if !strings.HasPrefix(l, "|") {
			break
		}
		first := strings.Split(l, "|")[1]
		for _, m := range regexp.MustCompile("`(remedy-[a-z<>-]+)`").FindAllStringSubmatch(first, -1) {
			p := regexp.QuoteMeta(m[1])
			p = regexp.MustCompile(`<[a-z]+>`).ReplaceAllString(p, `[a-z0-9-]+`)
			out[m[1]] = regexp.MustCompile(fmt.Sprintf("^%s$", p))
		}
	}
	require.NotEmpty(t, out, "the identity table names no ServiceAccount")
	return out
}
