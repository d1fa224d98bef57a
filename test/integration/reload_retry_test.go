package integration

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	admissionv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	ctrlclient "sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/remedy-dev/remedy/api/v1alpha1"
	"github.com/remedy-dev/remedy/internal/metrics"
	"github.com/remedy-dev/remedy/test/harness"
	"github.com/remedy-dev/remedy/workflows"
)

// denyRestarts installs a ValidatingAdmissionPolicy that rejects any
// Deployment update in ns carrying the restartedAt annotation, and waits
// until the API server enforces it. It returns a function that lifts it.
func denyRestarts(t *testing.T, ns string) (lift func()) {
	ctx := context.Background()
	lift = denyInNamespace(t, ns, "deny-restarts-"+ns, []admissionv1.OperationType{admissionv1.Update},
		admissionv1.Rule{APIGroups: []string{"apps"}, APIVersions: []string{"v1"}, Resources: []string{"deployments"}},
		`!has(object.spec.template.metadata.annotations) || !('`+v1alpha1.RestartedAtAnnotation+`' in object.spec.template.metadata.annotations)`,
		"restarts are frozen")

	probe := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: ns}}
	patch := ctrlclient.RawPatch(types.MergePatchType, []byte(`{"spec":{"template":{"metadata":{"annotations":{"`+v1alpha1.RestartedAtAnnotation+`":"probe"}}}}}`))
	require.Eventually(t, func() bool { return harness.Kube().Patch(ctx, probe, patch, ctrlclient.DryRunAll) != nil },
		reloadTimeout, 100*time.Millisecond, "admission policy never enforced")
	return lift
}

// denyInNamespace installs a ValidatingAdmissionPolicy, bound to ns, that
// refuses ops on rule's resources wherever expression is false, with message.
// It returns the function that lifts it, which also runs when the test ends;
// the caller waits until the API server enforces it.
func denyInNamespace(t *testing.T, ns, name string, ops []admissionv1.OperationType, rule admissionv1.Rule, expression, message string) (lift func()) {
	ctx := context.Background()
	vap := &admissionv1.ValidatingAdmissionPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: admissionv1.ValidatingAdmissionPolicySpec{
			FailurePolicy: ptr.To(admissionv1.Fail),
			MatchConstraints: &admissionv1.MatchResources{ResourceRules: []admissionv1.NamedRuleWithOperations{{
				RuleWithOperations: admissionv1.RuleWithOperations{Operations: ops, Rule: rule},
			}}},
			Validations: []admissionv1.Validation{{Expression: expression, Message: message}},
		},
	}
	binding := &admissionv1.ValidatingAdmissionPolicyBinding{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: admissionv1.ValidatingAdmissionPolicyBindingSpec{
			PolicyName:        name,
			ValidationActions: []admissionv1.ValidationAction{admissionv1.Deny},
			MatchResources: &admissionv1.MatchResources{NamespaceSelector: &metav1.LabelSelector{
				MatchLabels: map[string]string{"kubernetes.io/metadata.name": ns}}},
		},
	}
	require.NoError(t, harness.Kube().Create(ctx, vap))
	require.NoError(t, harness.Kube().Create(ctx, binding))
	lift = func() {
		_ = harness.Kube().Delete(ctx, binding)
		_ = harness.Kube().Delete(ctx, vap)
	}
	t.Cleanup(lift)
	return lift
}

// waitFailedAttempts waits until the workflow's restart activity has failed at least n times.
func waitFailedAttempts(t *testing.T, id string, n int32) {
	t.Helper()
	pa := harness.WaitPendingActivity(t, id, "RestartWorkload", n, reloadTimeout)
	assert.Contains(t, harness.FailureMessage(pa.GetLastFailure()), "restarts are frozen")
}

func TestReloadRetriesTransientFailureWithBackoff(t *testing.T) {
	tests := []struct {
		name      string
		supersede bool
		history   string
	}{
		{"denied patch is retried until admitted", false, "reload-retried.json"},
		{"newer change supersedes a failing intent", true, "reload-superseded.json"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ns := harness.Namespace(t)
			env := "retry-" + ns
			web := reloadDeployment(t, ns, "web", env)
			cm := reloadConfigMap(t, ns, "app", env, "v0")
			reloadPolicy(t, ns, time.Second)
			gen := waitBaseline(t, web, "app")
			baseline := currentHash(t, web, "app")
			lift := denyRestarts(t, ns)

			setData(t, cm, "v1")
			id := v1alpha1.ReloadWorkflowID(ns, "Deployment", "web")
			waitFailedAttempts(t, id, 2)
			requireGeneration(t, web, gen)
			assert.GreaterOrEqual(t, counterValue(metrics.ReloadErrors.WithLabelValues(env)), 2.0)
			assert.GreaterOrEqual(t, counterValue(metrics.ReloadRetries.WithLabelValues(env)), 1.0)
			if tt.supersede {
				var stale workflows.ReloadStatus
				require.NoError(t, queryReload(id, &stale))
				require.Len(t, stale.Pending, 1)
				setData(t, cm, "v2")
				waitPending(t, id, func(st workflows.ReloadStatus) bool {
					return len(st.Pending) == 1 && st.Pending[0].Hash != stale.Pending[0].Hash
				})
			}
			lift()

			web = harness.Eventually(t, web, reloadTimeout, func(d *appsv1.Deployment) bool {
				h := d.Spec.Template.Annotations[hashKey("app")]
				return h != "" && h != baseline
			})
			final := web.Spec.Template.Annotations[hashKey("app")]
			settledGeneration(t, web, gen+1)
			harness.ReplayHistory(t, id, tt.history)
			if tt.supersede {
				// The applied hash is the newest one: the stale intent never landed.
				cmHash := currentHash(t, web, "app")
				assert.Equal(t, final, cmHash)
				var st workflows.ReloadStatus
				require.NoError(t, queryReload(id, &st))
				assert.Equal(t, 1, st.TotalRestarts)
			}
		})
	}
}
