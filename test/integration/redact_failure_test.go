package integration

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	admissionv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	ctrlclient "sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/remedy-dev/remedy/api/v1alpha1"
	"github.com/remedy-dev/remedy/test/harness"
)

// quotingPolicy refuses updates of a ConfigMap in ns with a message that
// quotes its live password, as an admission policy or webhook may: every
// update, or with writesOnly the real ones (a dry-run passes).
func quotingPolicy(t *testing.T, ns string, writesOnly bool) {
	t.Helper()
	ctx := context.Background()
	name := "quote-" + ns
	vap := &admissionv1.ValidatingAdmissionPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: admissionv1.ValidatingAdmissionPolicySpec{
			FailurePolicy: ptr.To(admissionv1.Fail),
			MatchConstraints: &admissionv1.MatchResources{ResourceRules: []admissionv1.NamedRuleWithOperations{{
				RuleWithOperations: admissionv1.RuleWithOperations{Operations: []admissionv1.OperationType{admissionv1.Update},
					Rule: admissionv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"configmaps"}}},
			}}},
			Validations: []admissionv1.Validation{{Expression: map[bool]string{false: "false", true: "request.dryRun == true"}[writesOnly],
				MessageExpression: "'password ' + oldObject.data.password + ' may not be replaced'"}},
		},
	}
	binding := &admissionv1.ValidatingAdmissionPolicyBinding{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: admissionv1.ValidatingAdmissionPolicyBindingSpec{PolicyName: name, ValidationActions: []admissionv1.ValidationAction{admissionv1.Deny},
			MatchResources: &admissionv1.MatchResources{NamespaceSelector: &metav1.LabelSelector{
				MatchLabels: map[string]string{"kubernetes.io/metadata.name": ns}}}},
	}
	require.NoError(t, harness.Kube().Create(ctx, vap))
	require.NoError(t, harness.Kube().Create(ctx, binding))
	t.Cleanup(func() {
		_ = harness.Kube().Delete(ctx, binding)
		_ = harness.Kube().Delete(ctx, vap)
	})
	// The policy is in force once an update it refuses is refused.
	var opts []ctrlclient.UpdateOption
	if !writesOnly {
		opts = append(opts, ctrlclient.DryRunAll)
	}
	require.Eventually(t, func() bool {
		var cm corev1.ConfigMap
		if harness.Kube().Get(ctx, ctrlclient.ObjectKey{Namespace: ns, Name: "settings"}, &cm) != nil {
			return false
		}
		cm.Data["mode"] = "probe"
		err := harness.Kube().Update(ctx, &cm, opts...)
		return err != nil && strings.Contains(err.Error(), configPassword)
	}, 30*time.Second, 200*time.Millisecond, "the quoting policy never took effect")
}

// The API server's refusal of a dry-run or a write may quote the target's
// values (here an admission policy quotes the live password). A requester
// with `execute` on patch but no `get` on the ConfigMap, and whoever reads
// their execution, see the refusal's code and reason only; a requester who
// may get it reads the text.
func TestRefusedWriteQuotesNothingToARequesterWhoMayNotRead(t *testing.T) {
	for _, tc := range []struct {
		name       string
		writesOnly bool
		reason     string
	}{{"dry-run", false, v1alpha1.ReasonDryRunFailed}, {"write", true, v1alpha1.ReasonExecutionFailed}} {
		t.Run(tc.name, func(t *testing.T) {
			ns := harness.Namespace(t)
			valuedTargets(t, ns)
			grantRules(t, ns, "patcher-pia", createExecutions, execute("patch"))
			grantRules(t, ns, "reader-rory", createExecutions, execute("patch"),
				rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"get"}})
			quotingPolicy(t, ns, tc.writesOnly)
			spec := patchSpecOf(settingsRef(ns), rotateSettings, 0)

			k := waitPhase(t, runAs(t, "patcher-pia", ns, "pia", spec), v1alpha1.PhaseFailed)
			assert.Equal(t, tc.reason, k.Status.Reason, k.Status.Message)
			assert.Contains(t, k.Status.Message, "its message is not shown")
			assert.Contains(t, k.Status.Message, "<redacted: patcher-pia may not get configmaps/settings>")
			if !tc.writesOnly {
				require.NotNil(t, k.Status.ValidationResults.DryRunResults)
				assert.Equal(t, []string{k.Status.Message}, k.Status.ValidationResults.DryRunResults.Warnings)
			}
			requireNoValues(t, k)

			k = waitPhase(t, runAs(t, "reader-rory", ns, "rory", spec), v1alpha1.PhaseFailed)
			assert.Equal(t, tc.reason, k.Status.Reason, k.Status.Message)
			assert.Contains(t, k.Status.Message, "password "+configPassword+" may not be replaced", "one who may get the ConfigMap reads the refusal")
			assert.Equal(t, configPassword, livePassword(t, ns), "nothing was written")
		})
	}
}
