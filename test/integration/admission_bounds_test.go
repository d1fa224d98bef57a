package integration

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/rest"
	ctrlclient "sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/remedy-dev/remedy/api/v1alpha1"
	"github.com/remedy-dev/remedy/internal/reloadrule"
	"github.com/remedy-dev/remedy/operator"
	"github.com/remedy-dev/remedy/test/harness"
)

var executeScale = execute("scale")

// regoOfSize is a valid condition module of about n bytes that passes.
func regoOfSize(name string, n int) string {
	var b strings.Builder
	fmt.Fprintf(&b, "package %s\n\npass := true\n", name)
	for i := 0; b.Len() < n; i++ {
		fmt.Fprintf(&b, "r%d := %d\n", i, i)
	}
	return b.String()
}

func withCondition(spec v1alpha1.KubernetesExecutionSpec, name, rego string) v1alpha1.KubernetesExecutionSpec {
	spec.PostConditions = []v1alpha1.Condition{{Name: name, Rego: rego, Required: true}}
	return spec
}

// The finding's shape: a tenant who may create executions but not run the
// action sends a 1.5 MiB condition. Before, the shared webhook compiled it
// first (7+ s, ~150 MiB); now it is refused at once, naming the bound, and a
// condition within the bound is never compiled for someone who may not run
// the action: a broken one is refused for the grant, not for its Rego.
func TestAdmissionRefusesAnUnauthorizedConditionBeforeCompiling(t *testing.T) {
	ctx := context.Background()
	ns := namespaceWith(t, "web", 1)
	grantRules(t, ns, "tenant-tia", createExecutions)
	tia := impersonating(t, "tenant-tia")

	huge := &v1alpha1.KubernetesExecution{ObjectMeta: metav1.ObjectMeta{Name: "huge", Namespace: ns},
		Spec: withCondition(scaleSpec(ns, "web", 3), "huge", regoOfSize("huge", 3<<19))}
	start := time.Now()
	err := tia.Create(ctx, huge)
	took := time.Since(start)
	requireInvalid(t, err, `condition "huge" is`, "over Remedy's limit of 65536 bytes (64 KiB) per condition")
	requireAbsent(t, huge)
	t.Logf("a 1.5 MiB condition was refused in %s", took)
	assert.Less(t, took, 3*time.Second, "refused without compiling")

	broken := &v1alpha1.KubernetesExecution{ObjectMeta: metav1.ObjectMeta{Name: "broken", Namespace: ns},
		Spec: withCondition(scaleSpec(ns, "web", 3), "broken", "package broken\npass if {")}
	err = tia.Create(ctx, broken)
	requireForbidden(t, err, `user "tenant-tia" cannot execute resource "actions"`)
	assert.NotContains(t, err.Error(), "rego", "never compiled")
	requireAbsent(t, broken)
}

// An authorized requester's condition over the bound is refused naming it;
// one within the bound runs.
func TestAdmissionBoundsAnAuthorizedCondition(t *testing.T) {
	ctx := context.Background()
	ns := namespaceWith(t, "web", 1)
	// Conditions read the target and its pods as the requester.
	grantRules(t, ns, "oncall-otto", createExecutions, executeScale,
		rbacv1.PolicyRule{APIGroups: []string{"apps"}, Resources: []string{"deployments"}, Verbs: []string{"get"}},
		rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"list"}})
	otto := impersonating(t, "oncall-otto")

	over := &v1alpha1.KubernetesExecution{ObjectMeta: metav1.ObjectMeta{Name: "over", Namespace: ns},
		Spec: withCondition(scaleSpec(ns, "web", 3), "over", regoOfSize("over", 64<<10+1))}
	requireInvalid(t, otto.Create(ctx, over), "spec.postConditions[0].rego", `condition "over" is`, "over Remedy's limit of 65536 bytes (64 KiB) per condition")
	requireAbsent(t, over)

	within := &v1alpha1.KubernetesExecution{ObjectMeta: metav1.ObjectMeta{Name: "within", Namespace: ns},
		Spec: withCondition(scaleSpec(ns, "web", 3), "within", regoOfSize("within", 16<<10))}
	require.NoError(t, otto.Create(ctx, within))
	waitPhase(t, within, v1alpha1.PhaseCompleted)
	assert.Equal(t, int32(3), replicasOf(t, ns, "web"))
}

// evilDeployments installs a CRD of kind Deployment in group
// evil.example.com and one of its objects, web, in ns.
func evilDeployments(t *testing.T, ns string) *unstructured.Unstructured {
	t.Helper()
	ctx := context.Background()
	crd := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
		"metadata": map[string]any{"name": "deployments.evil.example.com"},
		"spec": map[string]any{
			"group": "evil.example.com", "scope": "Namespaced",
			"names": map[string]any{"plural": "deployments", "singular": "deployment", "kind": "Deployment", "listKind": "DeploymentList"},
			"versions": []any{map[string]any{"name": "v1", "served": true, "storage": true,
				"schema": map[string]any{"openAPIV3Schema": map[string]any{"type": "object", "x-kubernetes-preserve-unknown-fields": true}}}},
		},
	}}
	err := harness.Kube().Create(ctx, crd)
	if !apierrors.IsAlreadyExists(err) {
		require.NoError(t, err)
	}
	obj := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "evil.example.com/v1", "kind": "Deployment",
		"metadata": map[string]any{"name": "web", "namespace": ns},
		"spec":     map[string]any{"replicas": int64(1)},
	}}
	require.Eventually(t, func() bool { return harness.Kube().Create(ctx, obj.DeepCopy()) == nil }, 30*time.Second, 200*time.Millisecond,
		"the API server serves evil.example.com/v1 Deployment")
	return obj
}

// evilTarget is the same-named kind of another group.
func evilTarget(ns string) v1alpha1.ObjectRef {
	return v1alpha1.ObjectRef{APIVersion: "evil.example.com/v1", Kind: "Deployment", Namespace: ns, Name: "web"}
}

// The finding's shape: a Deployment of a CRD group, targeted by someone
// without execute. Matched by name alone, the action's rules named no verb
// on it and "may perform every verb" held vacuously. It is refused at
// admission, and at validation when admission is out of the way.
func TestAKindOfAnotherGroupIsRefused(t *testing.T) {
	ctx := context.Background()
	ns := harness.Namespace(t)
	evilDeployments(t, ns)
	grantRules(t, ns, "tenant-nox", createExecutions)
	nox := impersonating(t, "tenant-nox")

	spec := scaleSpec(ns, "web", 5)
	spec.Target = evilTarget(ns)
	k := &v1alpha1.KubernetesExecution{ObjectMeta: metav1.ObjectMeta{Name: "evil", Namespace: ns}, Spec: spec}
	// The operator's mapper learns the new group on its first miss.
	var err error
	require.Eventually(t, func() bool {
		err = nox.Create(ctx, k.DeepCopy(), ctrlclient.DryRunAll)
		return err != nil && strings.Contains(err.Error(), "only in apiVersion apps/v1")
	}, 30*time.Second, 200*time.Millisecond, "refused for the kind's group: %v", err)
	requireInvalid(t, nox.Create(ctx, k), `spec.target.apiVersion: Invalid value: "evil.example.com/v1"`, "action scale supports kind Deployment only in apiVersion apps/v1")
	requireAbsent(t, k)

	withoutRequesterWebhook(t)
	k.Spec.Requester = &v1alpha1.Requester{Username: "tenant-nox", Groups: []string{"system:authenticated"}}
	require.NoError(t, harness.Kube().Create(ctx, k))
	k = waitPhase(t, k, v1alpha1.PhaseFailed)
	assert.Equal(t, v1alpha1.ReasonInvalidParameters, k.Status.Reason)
	assert.Contains(t, k.Status.Message, "only in apiVersion apps/v1")

	obj := &unstructured.Unstructured{}
	obj.SetAPIVersion("evil.example.com/v1")
	obj.SetKind("Deployment")
	require.NoError(t, harness.Kube().Get(ctx, ctrlclient.ObjectKey{Namespace: ns, Name: "web"}, obj))
	replicas, _, _ := unstructured.NestedInt64(obj.Object, "spec", "replicas")
	assert.Equal(t, int64(1), replicas, "nothing written")
}

// withoutRequesterWebhook deletes the remedy-requester webhook until the test
// ends, as a bypassed admission would have it, and waits until the API
// server stops calling it (a dry-run create keeps a body requester).
func withoutRequesterWebhook(t *testing.T) {
	t.Helper()
	withoutWebhook(t, &admissionregistrationv1.MutatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: "remedy-requester"}}, waitRequesterWebhook)
}

// withoutWebhook deletes the webhook configuration cfg (named) until the
// test ends, waiting with wait until the API server learned of each change.
func withoutWebhook(t *testing.T, cfg ctrlclient.Object, wait func(t *testing.T, called bool)) {
	t.Helper()
	ctx := context.Background()
	require.NoError(t, harness.Kube().Get(ctx, ctrlclient.ObjectKeyFromObject(cfg), cfg))
	require.NoError(t, harness.Kube().Delete(ctx, cfg))
	wait(t, false)
	t.Cleanup(func() {
		cfg.SetResourceVersion("")
		cfg.SetUID("")
		require.NoError(t, harness.Kube().Create(ctx, cfg))
		wait(t, true)
	})
}

func waitRequesterWebhook(t *testing.T, called bool) {
	t.Helper()
	ns := harness.Namespace(t)
	harness.Deployment(t, ns, "probe", 1)
	probe := &v1alpha1.KubernetesExecution{ObjectMeta: metav1.ObjectMeta{Name: "probe", Namespace: ns}, Spec: scaleSpec(ns, "probe", 1)}
	probe.Spec.Requester = &v1alpha1.Requester{Username: "probe-body"}
	require.Eventually(t, func() bool {
		k := probe.DeepCopy()
		if err := harness.Kube().Create(context.Background(), k, ctrlclient.DryRunAll); err != nil {
			return false
		}
		return (k.Spec.Requester.Username != "probe-body") == called
	}, 30*time.Second, 100*time.Millisecond, "the API server should call the requester webhook: %v", called)
}

// The finding's shape: the requester's extra (a scoped token's scopes) was
// dropped, so every review judged the full user. It is recorded in
// spec.requester and carried by every SubjectAccessReview made for them, at
// admission and in the worker's validation.
func TestRequesterExtraReachesEveryReview(t *testing.T) {
	ctx := context.Background()
	ns := namespaceWith(t, "web", 1)
	const user = "scoped-sam"
	grantRules(t, ns, user, createExecutions, executeScale)
	extra := map[string][]string{"scopes.remedy.dev/test": {"scale-only", ns}}
	cfg := rest.CopyConfig(harness.Config())
	cfg.Impersonate = rest.ImpersonationConfig{UserName: user, Groups: []string{"system:authenticated"}, Extra: extra}
	sam, err := ctrlclient.New(cfg, ctrlclient.Options{Scheme: operator.Scheme()})
	require.NoError(t, err)

	k := &v1alpha1.KubernetesExecution{ObjectMeta: metav1.ObjectMeta{Name: "scoped", Namespace: ns}, Spec: scaleSpec(ns, "web", 2)}
	require.NoError(t, sam.Create(ctx, k))
	require.NotNil(t, k.Spec.Requester)
	assert.Equal(t, extra, k.Spec.Requester.Extra, "recorded at admission")
	waitPhase(t, k, v1alpha1.PhaseCompleted)

	reviews := harness.SubjectAccessReviews(user)
	// Admission asks once (execute), the worker's validation once more, the gate at the write.
	require.GreaterOrEqual(t, len(reviews), 2, "the operator and the worker asked for %s (%d reviews recorded in all)", user, len(harness.SubjectAccessReviews("")))
	for _, r := range reviews {
		got := map[string][]string{}
		for k, v := range r.Extra {
			got[k] = v
		}
		assert.Equal(t, extra, got, "review %+v carries the requester's extra", r.ResourceAttributes)
	}
}

// The finding's shape: a KubernetesExecution squats a step's name, with no
// owner references, before the request runs. Creating the step once read the
// squatter's first owner reference (a panic, retried until the request timed
// out); now the request fails at once naming it, and never adopts it.
func TestASquattedStepFailsItsRequestClearly(t *testing.T) {
	ctx := context.Background()
	ns := harness.Namespace(t)
	harness.Deployment(t, ns, "web", 1)
	harness.Deployment(t, ns, "decoy", 1)
	squat := createExecution(t, ns, "recover-scale", scaleSpec(ns, "decoy", 1))
	squat = waitPhase(t, squat, v1alpha1.PhaseCompleted)

	rr := createRemediation(t, ns, "recover", v1alpha1.RemediationStep{Name: "scale", Execution: scaleSpec(ns, "web", 2)})
	rr = harness.Eventually(t, rr, runTimeout, func(rr *v1alpha1.RemediationRequest) bool { return rr.Status.Phase.Terminal() })
	assert.Equal(t, v1alpha1.PhaseFailed, rr.Status.Phase)
	assert.Equal(t, v1alpha1.ReasonStepFailed, rr.Status.Reason)
	assert.Contains(t, rr.Status.Message, "KubernetesExecution "+ns+"/recover-scale already exists and is not this request's step (it has no controller)")
	assert.Equal(t, int32(1), replicasOf(t, ns, "web"), "the step never ran")

	var now v1alpha1.KubernetesExecution
	require.NoError(t, harness.Kube().Get(ctx, ctrlclient.ObjectKeyFromObject(squat), &now))
	assert.Empty(t, now.OwnerReferences, "the squatter is not adopted")
	assert.Equal(t, squat.Spec.Target, now.Spec.Target)
}

// The finding's shape: a data-less ConfigMap carrying the operator cache's
// old annotation, remedy.dev/data-hash, with a value of the user's choosing.
// The operator took it as the data's hash; now it computes the hash of the
// (empty) data, and a change of the annotation alone changes nothing.
func TestReloadNeverTrustsADataHashAnnotation(t *testing.T) {
	ctx := context.Background()
	ns := harness.Namespace(t)
	reloadPolicy(t, ns, time.Second)
	web := reloadDeployment(t, ns, "web", "prod")
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "app", Namespace: ns,
		Labels: map[string]string{"reload": "true", "env": "prod"}, Annotations: map[string]string{"remedy.dev/data-hash": "forged"}}}
	require.NoError(t, harness.Kube().Create(ctx, cm))
	want := reloadrule.ConfigMapHash(&corev1.ConfigMap{})

	gen := waitBaseline(t, web, "app")
	assert.Equal(t, want, currentHash(t, web, "app"), "the baseline is the data's hash")

	cm.Annotations["remedy.dev/data-hash"] = "forged-again"
	require.NoError(t, harness.Kube().Update(ctx, cm))
	reconciledAfter(t, ns, "reload", "probe")
	assert.Zero(t, harness.SignalsReceived(t, v1alpha1.ReloadWorkflowID(ns, "Deployment", "web"), ""), "no change signalled")
	requireGeneration(t, web, gen)
	assert.Equal(t, want, currentHash(t, web, "app"))
}
