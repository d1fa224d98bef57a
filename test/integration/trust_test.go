package integration

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/client"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	ctrlclient "sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/remedy-dev/remedy/api/v1alpha1"
	"github.com/remedy-dev/remedy/internal/image"
	"github.com/remedy-dev/remedy/test/harness"
	"github.com/remedy-dev/remedy/workflows"
)

// grantRules gives user the rules in ns (a Role), or cluster-wide when ns is "".
func grantRules(t *testing.T, ns, user string, rules ...rbacv1.PolicyRule) {
	t.Helper()
	ctx := context.Background()
	name := "trust-" + user
	subject := []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: user}}
	if ns == "" {
		require.NoError(t, harness.Kube().Create(ctx, &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: name}, Rules: rules}))
		require.NoError(t, harness.Kube().Create(ctx, &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: name},
			RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: name}, Subjects: subject}))
		return
	}
	require.NoError(t, harness.Kube().Create(ctx, &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}, Rules: rules}))
	require.NoError(t, harness.Kube().Create(ctx, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: name}, Subjects: subject}))
}

var (
	createExecutions = rbacv1.PolicyRule{APIGroups: []string{"remedy.dev"}, Resources: []string{"kubernetesexecutions", "remediationrequests"}, Verbs: []string{"create", "get", "update", "patch"}}
	execute          = func(actions ...string) rbacv1.PolicyRule {
		return rbacv1.PolicyRule{APIGroups: []string{"remedy.dev"}, Resources: []string{"actions"}, ResourceNames: actions, Verbs: []string{"execute"}}
	}
)

// requireForbidden asserts a 403 whose message contains want.
func requireForbidden(t *testing.T, err error, want string) {
	t.Helper()
	require.Error(t, err)
	assert.True(t, apierrors.IsForbidden(err), "want 403, got %v", err)
	assert.Contains(t, err.Error(), want)
}

func TestExecuteGrantRestartsOwnDeploymentAndBodyRequesterIsIgnored(t *testing.T) {
	ns := harness.Namespace(t)
	harness.Deployment(t, ns, "web", 1)
	// The shipped example role, bound in one namespace as its comment shows.
	require.NoError(t, harness.Kube().Create(context.Background(), &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "oncall", Namespace: ns},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "remedy-oncall"},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: "oncall-alice"}}}))
	k := &v1alpha1.KubernetesExecution{ObjectMeta: metav1.ObjectMeta{Name: "restart", Namespace: ns}, Spec: v1alpha1.KubernetesExecutionSpec{
		Action: "restart", Target: target(ns, "web"),
		Requester: &v1alpha1.Requester{Username: "system:admin", Groups: []string{"system:masters"}},
	}}
	require.NoError(t, impersonating(t, "oncall-alice").Create(context.Background(), k))
	assert.Equal(t, &v1alpha1.Requester{Username: "oncall-alice", Groups: []string{"system:authenticated"}}, k.Spec.Requester, "the webhook overwrites the body")

	k = waitPhase(t, k, v1alpha1.PhaseCompleted)
	assert.Equal(t, "oncall-alice", k.Status.Requester)
	assert.Equal(t, ptr.To(true), k.Status.ValidationResults.RequesterValidation)
	var messages []string
	for _, tr := range k.Status.PhaseTransitions {
		messages = append(messages, tr.Message)
	}
	assert.Contains(t, messages, "verifying the KubernetesExecution requested by oncall-alice", "the Validating transition and its Event name the requester")
	harness.ReplayHistory(t, k.Status.WorkflowID, "execution-trust-restart.json")

	// Only restart and scale were granted: the same user may not set an image.
	err := impersonating(t, "oncall-alice").Create(context.Background(), &v1alpha1.KubernetesExecution{
		ObjectMeta: metav1.ObjectMeta{Name: "image", Namespace: ns}, Spec: v1alpha1.KubernetesExecutionSpec{Action: "set-image", Target: target(ns, "web"),
			Parameters: &v1alpha1.ActionParameters{Container: "web", Image: image.DemoReference()}}})
	requireForbidden(t, err, `grant the verb "execute" on actions.remedy.dev/set-image`)
}

func TestNamespaceEditorScalesOwnDeploymentWithoutExecuteGrant(t *testing.T) {
	ns := harness.Namespace(t)
	harness.Deployment(t, ns, "web", 1)
	grantRules(t, ns, "editor-erin", createExecutions,
		rbacv1.PolicyRule{APIGroups: []string{"apps"}, Resources: []string{"deployments"}, Verbs: []string{"get", "patch"}})
	k := &v1alpha1.KubernetesExecution{ObjectMeta: metav1.ObjectMeta{Name: "scale", Namespace: ns}, Spec: scaleSpec(ns, "web", 3)}
	require.NoError(t, impersonating(t, "editor-erin").Create(context.Background(), k))
	waitPhase(t, k, v1alpha1.PhaseCompleted)
	assert.Equal(t, int32(3), replicasOf(t, ns, "web"))
}

func TestCrossNamespaceTargetIsRefused(t *testing.T) {
	tenant, payments := harness.Namespace(t), harness.Namespace(t)
	harness.Deployment(t, payments, "api", 2)
	grantRules(t, tenant, "tenant-tom", createExecutions, execute("scale", "set-image", "patch"))
	err := impersonating(t, "tenant-tom").Create(context.Background(), &v1alpha1.KubernetesExecution{
		ObjectMeta: metav1.ObjectMeta{Name: "cross", Namespace: tenant}, Spec: scaleSpec(payments, "api", 0)})
	requireForbidden(t, err, "Remedy acts only in the requesting object's own namespace")

	// Not even cluster-admin may point an execution at another namespace.
	err = harness.Kube().Create(context.Background(), &v1alpha1.KubernetesExecution{
		ObjectMeta: metav1.ObjectMeta{Name: "cross", Namespace: tenant}, Spec: scaleSpec(payments, "api", 0)})
	requireForbidden(t, err, "own namespace")
	assert.Equal(t, int32(2), replicasOf(t, payments, "api"))
}

func TestOwnerReferencePatchOnAConfigMapIsRefused(t *testing.T) {
	ctx := context.Background()
	ns := harness.Namespace(t)
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "settings", Namespace: ns}, Data: map[string]string{"a": "b"}}
	require.NoError(t, harness.Kube().Create(ctx, cm))
	owner := `{"metadata":{"ownerReferences":[{"apiVersion":"v1","kind":"Namespace","name":"gone","uid":"00000000-0000-0000-0000-000000000000"}]}}`
	spec := v1alpha1.KubernetesExecutionSpec{Action: "patch",
		Target:     v1alpha1.ObjectRef{APIVersion: "v1", Kind: "ConfigMap", Namespace: ns, Name: "settings"},
		Parameters: &v1alpha1.ActionParameters{Patch: &apiextensionsv1.JSON{Raw: []byte(owner)}}}

	// Only the right to create executions: refused at admission.
	grantRules(t, ns, "creator-carl", createExecutions)
	err := impersonating(t, "creator-carl").Create(ctx, &v1alpha1.KubernetesExecution{ObjectMeta: metav1.ObjectMeta{Name: "own", Namespace: ns}, Spec: spec})
	requireForbidden(t, err, `cannot get, patch configmaps "settings" itself`)

	// Even with the patch grant, the action refuses to touch ownerReferences.
	k := createExecution(t, ns, "own", spec)
	k = waitPhase(t, k, v1alpha1.PhaseFailed)
	assert.Equal(t, "InvalidParameters", k.Status.Reason)
	assert.Contains(t, k.Status.Message, "metadata.ownerReferences")
	require.NoError(t, harness.Kube().Get(ctx, ctrlclient.ObjectKeyFromObject(cm), cm))
	assert.Empty(t, cm.OwnerReferences)
	// Admission refuses what it can see is malformed (admission_trust_test.go);
	// what only the action's own check sees fails here, in validation.
	harness.ReplayHistory(t, k.Status.WorkflowID, "execution-invalid-parameters.json")
}

func TestCordonNeedsAClusterGrant(t *testing.T) {
	ctx := context.Background()
	ns := harness.Namespace(t)
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-" + ns}}
	require.NoError(t, harness.Kube().Create(ctx, node))
	t.Cleanup(func() { _ = harness.Kube().Delete(ctx, node) })
	// execute on cordon inside the namespace is not a grant for Nodes.
	grantRules(t, ns, "tenant-nina", createExecutions, execute("cordon"))
	err := impersonating(t, "tenant-nina").Create(ctx, &v1alpha1.KubernetesExecution{ObjectMeta: metav1.ObjectMeta{Name: "cordon", Namespace: ns},
		Spec: v1alpha1.KubernetesExecutionSpec{Action: "cordon", Target: v1alpha1.ObjectRef{APIVersion: "v1", Kind: "Node", Name: node.Name}}})
	requireForbidden(t, err, "at cluster scope")
	require.NoError(t, harness.Kube().Get(ctx, ctrlclient.ObjectKeyFromObject(node), node))
	assert.False(t, node.Spec.Unschedulable)
}

func TestForgedWorkflowStartDoesNothing(t *testing.T) {
	ns := harness.Namespace(t)
	harness.Deployment(t, ns, "web", 1)
	real := waitPhase(t, createExecution(t, ns, "real", scaleSpec(ns, "web", 2)), v1alpha1.PhaseCompleted)
	admin := &v1alpha1.Requester{Username: "system:admin", Groups: []string{"system:masters"}}

	forged := map[string]workflows.ExecutionInput{
		"no such object": {Namespace: ns, Name: "ghost", UID: "11111111-1111-1111-1111-111111111111", Spec: scaleSpec(ns, "web", 9)},
		"another spec":   {Namespace: ns, Name: real.Name, UID: string(real.UID), Spec: scaleSpec(ns, "web", 9)},
	}
	for name, in := range forged {
		t.Run(name, func(t *testing.T) {
			in.Spec.Requester = admin
			id, res := forgedRun[workflows.ExecutionResult](t, v1alpha1.ExecutionWorkflowID(in.Namespace, in.Name, in.UID), workflows.ExecutionWorkflow, in)
			assert.Equal(t, v1alpha1.PhaseFailed, res.Status.Phase)
			assert.Equal(t, "SubjectMismatch", res.Status.Reason, res.Status.Message)
			if in.Name == "ghost" {
				harness.ReplayHistory(t, id, "execution-subject-mismatch.json")
			}
		})
	}
	assert.Equal(t, int32(2), replicasOf(t, ns, "web"), "the forged starts changed nothing")
}

// A RemediationRequest workflow started by hand for an object that does not
// exist fails SubjectMismatch before it creates any step.
func TestForgedRemediationStartDoesNothing(t *testing.T) {
	ns := harness.Namespace(t)
	harness.Deployment(t, ns, "web", 1)
	in := workflows.RemediationInput{Namespace: ns, Name: "ghost", UID: "22222222-2222-2222-2222-222222222222",
		Spec: v1alpha1.RemediationRequestSpec{
			Steps:     []v1alpha1.RemediationStep{{Name: "scale", Execution: scaleSpec(ns, "web", 9)}},
			Requester: &v1alpha1.Requester{Username: "system:admin", Groups: []string{"system:masters"}},
		}}
	id, res := forgedRun[workflows.RemediationResult](t, v1alpha1.RemediationWorkflowID(in.Namespace, in.Name, in.UID), workflows.RemediationWorkflow, in)
	assert.Equal(t, v1alpha1.PhaseFailed, res.Status.Phase)
	assert.Equal(t, "SubjectMismatch", res.Status.Reason, res.Status.Message)
	assert.Nil(t, res.Status.Steps[0].ExecutionRef, "no step was created")
	assert.Equal(t, int32(1), replicasOf(t, ns, "web"))
	harness.ReplayHistory(t, id, "remediation-subject-mismatch.json")
}

// forgedRun starts wf by hand under the ID the object's own run would have
// (plus "-forged"), as only someone with access to Temporal could, and
// returns the workflow ID and the result.
func forgedRun[R any](t *testing.T, id string, wf, in any) (string, R) {
	t.Helper()
	ctx := context.Background()
	run, err := harness.Temporal().ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: id + "-forged", TaskQueue: workflows.TaskQueue}, wf, in)
	require.NoError(t, err)
	var res R
	require.NoError(t, workflows.FinalResult(run.Get(ctx, &res), &res))
	return run.GetID(), res
}

func TestRemediationStepsCarryTheRequester(t *testing.T) {
	ctx := context.Background()
	ns := harness.Namespace(t)
	harness.Deployment(t, ns, "web", 1)
	grantRules(t, ns, "oncall-olga", createExecutions, execute("scale", "restart"))
	step := scaleSpec(ns, "web", 2)
	step.Requester = &v1alpha1.Requester{Username: "mallory"}
	rr := &v1alpha1.RemediationRequest{ObjectMeta: metav1.ObjectMeta{Name: "fix", Namespace: ns}, Spec: v1alpha1.RemediationRequestSpec{
		Steps: []v1alpha1.RemediationStep{{Name: "scale", Execution: step}, {Name: "restart", Execution: v1alpha1.KubernetesExecutionSpec{Action: "restart", Target: target(ns, "web")}}},
	}}
	require.NoError(t, impersonating(t, "oncall-olga").Create(ctx, rr))
	require.Equal(t, "oncall-olga", rr.Spec.Requester.Username)
	assert.Nil(t, rr.Spec.Steps[0].Execution.Requester, "a step's own requester is dropped")

	harness.Eventually(t, rr, runTimeout, func(rr *v1alpha1.RemediationRequest) bool { return rr.Status.Phase == v1alpha1.PhaseCompleted })
	harness.ReplayHistory(t, rr.Status.WorkflowID, "remediation-trust-completed.json")
	for _, s := range []string{"scale", "restart"} {
		var k v1alpha1.KubernetesExecution
		require.NoError(t, harness.Kube().Get(ctx, ctrlclient.ObjectKey{Namespace: ns, Name: "fix-" + s}, &k))
		require.NotNil(t, k.Spec.Requester, s)
		assert.Equal(t, "oncall-olga", k.Spec.Requester.Username, s)
	}

	// A step outside the request's grants refuses the whole request.
	err := impersonating(t, "oncall-olga").Create(ctx, &v1alpha1.RemediationRequest{ObjectMeta: metav1.ObjectMeta{Name: "too-far", Namespace: ns}, Spec: v1alpha1.RemediationRequestSpec{
		Steps: []v1alpha1.RemediationStep{{Name: "image", Execution: v1alpha1.KubernetesExecutionSpec{Action: "set-image", Target: target(ns, "web"),
			Parameters: &v1alpha1.ActionParameters{Container: "web", Image: "evil:1"}}}}}})
	requireForbidden(t, err, "step image: ")
}

func TestRollbackAnnotationNeedsTheInverseGrant(t *testing.T) {
	ctx := context.Background()
	ns := harness.Namespace(t)
	k := rollbackReady(t, ns, "scale", 3, time.Minute)

	// May annotate executions, but not scale: the rollback is refused.
	// (Merge patches, as kubectl annotate sends.)
	grantRules(t, ns, "viewer-vic", createExecutions)
	annotate := func(user string, ann map[string]string) (*v1alpha1.KubernetesExecution, error) {
		obj := &v1alpha1.KubernetesExecution{ObjectMeta: metav1.ObjectMeta{Name: k.Name, Namespace: ns}}
		body, err := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": ann}})
		require.NoError(t, err)
		return obj, impersonating(t, user).Patch(ctx, obj, ctrlclient.RawPatch(types.MergePatchType, body))
	}
	_, err := annotate("viewer-vic", map[string]string{v1alpha1.RollbackAnnotation: "undo", v1alpha1.RollbackRequesterAnnotation: "system:admin"})
	requireForbidden(t, err, "rollback: ")

	// Nobody writes the requester record by hand.
	obj, err := annotate("viewer-vic", map[string]string{v1alpha1.RollbackRequesterAnnotation: "system:admin"})
	require.NoError(t, err)
	assert.Empty(t, obj.Annotations[v1alpha1.RollbackRequesterAnnotation])

	grantRules(t, ns, "oncall-ollie", createExecutions, execute("scale"))
	obj, err = annotate("oncall-ollie", map[string]string{v1alpha1.RollbackAnnotation: "latency"})
	require.NoError(t, err)
	assert.Equal(t, "oncall-ollie", obj.Annotations[v1alpha1.RollbackRequesterAnnotation])
	k = waitPhase(t, k, v1alpha1.PhaseCompleted)
	assert.Equal(t, "RolledBack", k.Status.Reason)
	harness.ReplayHistory(t, k.Status.WorkflowID, "execution-trust-rolled-back.json")
	assert.Contains(t, k.Status.PhaseTransitions[len(k.Status.PhaseTransitions)-2].Message, "requested by oncall-ollie")
	assert.Equal(t, int32(1), replicasOf(t, ns, "web"))
}

func TestNoPolicyMeansPolicyMissing(t *testing.T) {
	ctx := context.Background()
	var cm corev1.ConfigMap
	require.NoError(t, harness.Kube().Get(ctx, ctrlclient.ObjectKey{Namespace: "remedy-system", Name: "remedy-safety-policy"}, &cm))
	delete(cm.Labels, "remedy.dev/policy")
	require.NoError(t, harness.Kube().Update(ctx, &cm))
	t.Cleanup(func() {
		require.NoError(t, harness.Kube().Get(ctx, ctrlclient.ObjectKeyFromObject(&cm), &cm))
		cm.Labels["remedy.dev/policy"] = "true"
		require.NoError(t, harness.Kube().Update(ctx, &cm))
	})
	ns := harness.Namespace(t)
	harness.Deployment(t, ns, "web", 1)
	k := waitPhase(t, createExecution(t, ns, "unpoliced", scaleSpec(ns, "web", 3)), v1alpha1.PhaseFailed)
	assert.Equal(t, "PolicyMissing", k.Status.Reason)
	assert.Contains(t, k.Status.Message, "install deploy/policies/safety.yaml")
	assert.Equal(t, int32(1), replicasOf(t, ns, "web"))
	harness.ReplayHistory(t, k.Status.WorkflowID, "execution-policy-missing.json")
}

func TestActionsResourceIsServedButHoldsNothing(t *testing.T) {
	// kubectl auth can-i resolves actions.remedy.dev through discovery, so the
	// type is served; no object of it can exist.
	m, err := harness.Kube().RESTMapper().RESTMapping(schema.GroupKind{Group: "remedy.dev", Kind: "Action"}, "v1alpha1")
	require.NoError(t, err)
	assert.Equal(t, "actions", m.Resource.Resource)
	err = harness.Kube().Create(context.Background(), &v1alpha1.Action{ObjectMeta: metav1.ObjectMeta{Name: "restart", Namespace: "default"}})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "no Action object can be created")
}
