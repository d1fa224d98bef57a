package integration

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	ctrlclient "sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/remedy-dev/remedy/api/v1alpha1"
	"github.com/remedy-dev/remedy/internal/policy/sandboxtest"
	"github.com/remedy-dev/remedy/test/harness"
)

// requireInvalid asserts a 422 whose message contains each of want and
// whose causes kubectl prints, never a Go decoder message.
func requireInvalid(t *testing.T, err error, want ...string) {
	t.Helper()
	require.Error(t, err)
	require.True(t, apierrors.IsInvalid(err), "want 422 Invalid, got %v", err)
	for _, w := range want {
		assert.Contains(t, err.Error(), w)
	}
	var status apierrors.APIStatus
	require.True(t, errors.As(err, &status))
	require.NotNil(t, status.Status().Details)
	assert.NotEmpty(t, status.Status().Details.Causes)
	assert.NotContains(t, err.Error(), "Go struct")
	assert.NotContains(t, err.Error(), "json: ")
}

// requireAbsent asserts that obj was never created.
func requireAbsent(t *testing.T, obj ctrlclient.Object) {
	t.Helper()
	err := harness.Kube().Get(context.Background(), ctrlclient.ObjectKeyFromObject(obj), obj)
	assert.True(t, apierrors.IsNotFound(err), "%s was created: %v", obj.GetName(), err)
}

// namespaceWith is a fresh namespace holding Deployment name with replicas.
func namespaceWith(t *testing.T, name string, replicas int32) string {
	t.Helper()
	ns := harness.Namespace(t)
	harness.Deployment(t, ns, name, replicas)
	return ns
}

var (
	patchExecutions = rbacv1.PolicyRule{APIGroups: []string{"remedy.dev"}, Resources: []string{"kubernetesexecutions"}, Verbs: []string{"get", "patch"}}
	bodyAdmin       = &v1alpha1.Requester{Username: "system:admin", Groups: []string{"system:masters"}}
)

// The exploit: a user who may only patch KubernetesExecutions sets the
// rollback annotation with a status in the body whose rollbackAction is
// unknown, and a requester record of their choosing. The webhook reads the
// inverse action from the stored status, so the user is refused for the
// scale they may not run, and nothing is rolled back.
func TestAdmissionRollbackReadsTheStoredStatus(t *testing.T) {
	ctx := context.Background()
	ns := harness.Namespace(t)
	k := rollbackReady(t, ns, "scale", 3, time.Minute)
	forged := []byte(`{"metadata":{"annotations":{"remedy.dev/rollback":"undo","remedy.dev/rollback-requester":"system:admin"}},` +
		`"status":{"rollbackInformation":{"available":true,"rollbackAction":"explode"}}}`)
	obj := func() *v1alpha1.KubernetesExecution {
		return &v1alpha1.KubernetesExecution{ObjectMeta: metav1.ObjectMeta{Name: k.Name, Namespace: ns}}
	}

	grantRules(t, ns, "patcher-pam", patchExecutions)
	err := impersonating(t, "patcher-pam").Patch(ctx, obj(), ctrlclient.RawPatch(types.MergePatchType, forged))
	requireForbidden(t, err, `rollback: user "patcher-pam" cannot execute resource "actions" in API group "remedy.dev" in the namespace `+ns+` (resourceName "scale")`)
	cur := obj()
	require.NoError(t, harness.Kube().Get(ctx, ctrlclient.ObjectKeyFromObject(cur), cur))
	assert.NotContains(t, cur.Annotations, v1alpha1.RollbackAnnotation)
	assert.NotContains(t, cur.Annotations, v1alpha1.RollbackRequesterAnnotation)
	assert.Equal(t, "scale", cur.Status.RollbackInformation.RollbackAction)
	assert.Never(t, func() bool {
		require.NoError(t, harness.Kube().Get(ctx, ctrlclient.ObjectKeyFromObject(cur), cur))
		return cur.Status.Phase != v1alpha1.PhaseRollbackReady || replicasOf(t, ns, "web") != 3
	}, 3*time.Second, 500*time.Millisecond, "nothing was rolled back")

	// The same body from someone who may scale: the stored inverse action
	// runs, and the record is who sent it, whatever the body said.
	grantRules(t, ns, "oncall-omar", patchExecutions, execute("scale"))
	patched := obj()
	require.NoError(t, impersonating(t, "oncall-omar").Patch(ctx, patched, ctrlclient.RawPatch(types.MergePatchType, forged)))
	assert.Equal(t, "oncall-omar", patched.Annotations[v1alpha1.RollbackRequesterAnnotation])
	k = waitPhase(t, k, v1alpha1.PhaseCompleted)
	assert.Equal(t, v1alpha1.ReasonRolledBack, k.Status.Reason)
	assert.Contains(t, k.Status.PhaseTransitions[len(k.Status.PhaseTransitions)-2].Message, "requested by oncall-omar")
	assert.Equal(t, int32(1), replicasOf(t, ns, "web"))
}

// A rollback annotation on an execution whose stored status has no
// rollback information is refused, even for cluster-admin and even when the
// body brings its own.
func TestAdmissionRollbackWithoutRollbackInformationIsRefused(t *testing.T) {
	ctx := context.Background()
	ns := harness.Namespace(t)
	k := waitPhase(t, createExecution(t, ns, "ghost", scaleSpec(ns, "ghost", 2)), v1alpha1.PhaseFailed)
	require.Nil(t, k.Status.RollbackInformation)
	forged := []byte(`{"metadata":{"annotations":{"remedy.dev/rollback":"undo"}},"status":{"rollbackInformation":{"available":true,"rollbackAction":"scale"}}}`)
	err := harness.Kube().Patch(ctx, k, ctrlclient.RawPatch(types.MergePatchType, forged))
	requireInvalid(t, err, "metadata.annotations[remedy.dev/rollback]: Forbidden: KubernetesExecution ghost has nothing to roll back: "+
		"its status has no rollbackInformation (it is Failed (NotFound))")
}

// The exploit: a target with a lower-case kind or an unserved apiVersion,
// and a body requester of system:admin. It is refused naming the field and
// what the API server serves, and never stored.
func TestAdmissionRefusesAnUnservedTargetWithABodyRequester(t *testing.T) {
	ns := namespaceWith(t, "web", 1)
	grantRules(t, ns, "typo-tim", createExecutions, execute("scale", "patch"))
	for _, tc := range []struct {
		name       string
		action     string
		apiVersion string
		kind       string
		want       []string
	}{
		{"lower-case-kind", "scale", "apps/v1", "deployment",
			[]string{`spec.target.kind: Invalid value: "deployment": the API server serves no kind deployment in apps/v1 (kinds are case-sensitive): did you mean apiVersion apps/v1, kind Deployment?`}},
		{"unserved-api-version", "scale", "apps/v2", "Deployment",
			[]string{`spec.target.apiVersion: Invalid value: "apps/v2": the API server does not serve kind Deployment in apps/v2; it serves it in apps/v1`}},
		{"unserved-group", "patch", "example.com/v1", "Widget",
			[]string{`spec.target.kind: Invalid value: "Widget": the API server serves no kind Widget in example.com/v1`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			spec := scaleSpec(ns, "web", 3)
			spec.Action, spec.Target.APIVersion, spec.Target.Kind, spec.Requester = tc.action, tc.apiVersion, tc.kind, bodyAdmin
			if tc.action == "patch" {
				spec.Parameters = &v1alpha1.ActionParameters{Patch: &apiextensionsv1.JSON{Raw: []byte(`{"metadata":{"labels":{"a":"b"}}}`)}}
			}
			k := &v1alpha1.KubernetesExecution{ObjectMeta: metav1.ObjectMeta{Name: tc.name, Namespace: ns}, Spec: spec}
			requireInvalid(t, impersonating(t, "typo-tim").Create(context.Background(), k), tc.want...)
			requireAbsent(t, k)
		})
	}
	assert.Equal(t, int32(1), replicasOf(t, ns, "web"))
}

// A wrong type is a 422 naming the field and the type it takes, not a 403
// carrying the Go decoder's message.
func TestAdmissionRefusesAWrongParameterType(t *testing.T) {
	ns := harness.Namespace(t)
	grantRules(t, ns, "typo-tess", createExecutions, execute("scale"))
	target := map[string]any{"apiVersion": "apps/v1", "kind": "Deployment", "namespace": ns, "name": "web"}
	k := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "remedy.dev/v1alpha1", "kind": "KubernetesExecution",
		"metadata": map[string]any{"name": "three", "namespace": ns},
		"spec": map[string]any{"action": "scale", "target": target, "parameters": map[string]any{"replicas": "three"},
			"requester": map[string]any{"username": "system:admin"}},
	}}
	requireInvalid(t, impersonating(t, "typo-tess").Create(context.Background(), k),
		`spec.parameters.replicas: Invalid value: "three": must be of type integer (int32)`)
	requireAbsent(t, k)

	rr := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "remedy.dev/v1alpha1", "kind": "RemediationRequest",
		"metadata": map[string]any{"name": "three", "namespace": ns},
		"spec": map[string]any{"steps": []any{
			map[string]any{"name": "up", "execution": map[string]any{"action": "scale", "target": target, "parameters": map[string]any{"replicas": int64(2)}}},
			map[string]any{"name": "more", "execution": map[string]any{"action": "scale", "target": target, "parameters": map[string]any{"replicas": "three"}}},
		}},
	}}
	requireInvalid(t, impersonating(t, "typo-tess").Create(context.Background(), rr),
		`spec.steps[1].execution.parameters.replicas: Invalid value: "three": must be of type integer (int32)`)
	requireAbsent(t, rr)
}

// The exploit: a RemediationRequest whose first step is malformed and whose
// second the user may not run. Every step is checked and authorized, and the
// refusal names both.
func TestAdmissionChecksEveryRemediationStep(t *testing.T) {
	ctx := context.Background()
	ns := namespaceWith(t, "web", 1)
	grantRules(t, ns, "oncall-otto", createExecutions, execute("scale"))
	first := scaleSpec(ns, "web", 2)
	first.Target.Kind = "deployment"
	second := v1alpha1.KubernetesExecutionSpec{Action: "set-image", Target: target(ns, "web"),
		Parameters: &v1alpha1.ActionParameters{Container: "web", Image: "evil:1"}}
	rr := &v1alpha1.RemediationRequest{ObjectMeta: metav1.ObjectMeta{Name: "two-wrongs", Namespace: ns}, Spec: v1alpha1.RemediationRequestSpec{
		Steps:     []v1alpha1.RemediationStep{{Name: "up", Execution: first}, {Name: "image", Execution: second}},
		Requester: bodyAdmin,
	}}
	requireInvalid(t, impersonating(t, "oncall-otto").Create(ctx, rr),
		`spec.steps[0].execution.target.kind: Invalid value: "deployment"`,
		`spec.steps[1].execution: Forbidden: step image: user "oncall-otto" cannot execute resource "actions"`,
		`grant the verb "execute" on actions.remedy.dev/set-image`)
	requireAbsent(t, rr)

	// With the first step fixed, the second is still refused, by name.
	rr.Spec.Steps[0].Execution = scaleSpec(ns, "web", 2)
	requireForbidden(t, impersonating(t, "oncall-otto").Create(ctx, rr), "step image: ")
	requireAbsent(t, rr)
	assert.Equal(t, int32(1), replicasOf(t, ns, "web"))
}

// An execution or a step in a protected namespace is refused at admission,
// not created to fail later.
func TestAdmissionRefusesAProtectedNamespace(t *testing.T) {
	ctx := context.Background()
	ns := namespaceWith(t, "core", 2)
	labelNamespace(t, ns, map[string]string{"remedy.dev/protected": "true"})
	k := &v1alpha1.KubernetesExecution{ObjectMeta: metav1.ObjectMeta{Name: "touch-core", Namespace: ns}, Spec: scaleSpec(ns, "core", 0)}
	// The webhook reads namespaces from the operator's cache: wait until it has the label.
	require.Eventually(t, func() bool {
		return apierrors.IsForbidden(harness.Kube().Create(ctx, k.DeepCopy(), ctrlclient.DryRunAll))
	}, 10*time.Second, 100*time.Millisecond)
	want := "namespace " + ns + " is protected (kube-system, or labelled remedy.dev/protected=true): Remedy changes nothing there"
	requireForbidden(t, harness.Kube().Create(ctx, k), want)
	requireAbsent(t, k)

	rr := &v1alpha1.RemediationRequest{ObjectMeta: metav1.ObjectMeta{Name: "touch-core", Namespace: ns}, Spec: v1alpha1.RemediationRequestSpec{
		Steps: []v1alpha1.RemediationStep{{Name: "down", Execution: scaleSpec(ns, "core", 0)}}}}
	requireForbidden(t, harness.Kube().Create(ctx, rr), "step down: "+want)
	requireAbsent(t, rr)
	assert.Equal(t, int32(2), replicasOf(t, ns, "core"))
}

// A condition whose Rego does not compile, or uses a built-in the sandbox
// leaves out, is refused at admission naming the condition's field.
func TestAdmissionRefusesConditionRegoThatDoesNotCompile(t *testing.T) {
	ctx := context.Background()
	ns := namespaceWith(t, "web", 1)
	url, hits := sandboxtest.Listener(t)
	probe := fmt.Sprintf("package post.probe\n\nresp := http.send({\"method\": \"POST\", \"url\": %q, \"body\": input.target})\n\npass := true\n", url)

	spec := scaleSpec(ns, "web", 2)
	spec.PreConditions = []v1alpha1.Condition{{Name: "typo", Rego: "package pre\npass if {", Required: true}}
	spec.PostConditions = []v1alpha1.Condition{{Name: "up", Rego: "package up\npass := true"}, {Name: "probe", Rego: probe}}
	k := &v1alpha1.KubernetesExecution{ObjectMeta: metav1.ObjectMeta{Name: "bad-rego", Namespace: ns}, Spec: spec}
	requireInvalid(t, harness.Kube().Create(ctx, k),
		"spec.preConditions[0].rego: Invalid value: condition typo: rego: ",
		`spec.postConditions[1].rego: Invalid value: condition "probe" uses built-in http.send (line 3), which Remedy's sandbox does not allow`)
	requireAbsent(t, k)

	rr := &v1alpha1.RemediationRequest{ObjectMeta: metav1.ObjectMeta{Name: "bad-rego", Namespace: ns}, Spec: v1alpha1.RemediationRequestSpec{
		Steps: []v1alpha1.RemediationStep{{Name: "ok", Execution: scaleSpec(ns, "web", 2)}, {Name: "bad", Execution: spec}}}}
	requireInvalid(t, harness.Kube().Create(ctx, rr), "spec.steps[1].execution.preConditions[0].rego: Invalid value: condition typo: rego: ")
	requireAbsent(t, rr)
	assert.Zero(t, hits.Load(), "the listener received nothing")
	assert.Equal(t, int32(1), replicasOf(t, ns, "web"))
}
