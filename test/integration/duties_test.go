package integration

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/client"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	ctrlclient "sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/remedy-dev/remedy/api/v1alpha1"
	"github.com/remedy-dev/remedy/operator"
	"github.com/remedy-dev/remedy/operator/admission"
	"github.com/remedy-dev/remedy/test/harness"
	"github.com/remedy-dev/remedy/workflows"
)

// selfRequested has alice, who may scale in ns and also holds approve there,
// request a scale the safety policy requires approval for (in ns only), and
// waits until it asks.
func selfRequested(t *testing.T, ns string) (*v1alpha1.KubernetesExecution, *v1alpha1.RemediationApprovalRequest) {
	t.Helper()
	installPolicy(t, "duties-"+ns, fmt.Sprintf("package remedy.safety\n\nrequire_approval if input.namespace.name == %q\n", ns))
	harness.Deployment(t, ns, "web", 1)
	grantRules(t, ns, "alice", createExecutions, execute("scale"))
	grant(t, ns, "alice", "approve")
	k := &v1alpha1.KubernetesExecution{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "self-approved"}, Spec: v1alpha1.KubernetesExecutionSpec{
		Action: "scale", Target: target(ns, "web"), Parameters: &v1alpha1.ActionParameters{Replicas: ptr.To[int32](2)},
		RollbackWindow: v1alpha1.DurationOf(0),
	}}
	require.NoError(t, impersonating(t, "alice").Create(context.Background(), k))
	require.Equal(t, "alice", k.Spec.Requester.Username)
	k = waitPhase(t, k, v1alpha1.PhaseWaitingApproval)
	rar := &v1alpha1.RemediationApprovalRequest{}
	require.NoError(t, harness.Kube().Get(context.Background(), ctrlclient.ObjectKey{Namespace: ns, Name: k.Status.ApprovalRequestRef.Name}, rar))
	return k, rar
}

// A requester who also holds approve cannot approve their own
// policy-required request by any path; another approver can.
func TestDutiesSelfApprovalIsRefusedOnEveryPath(t *testing.T) {
	ctx := context.Background()
	ns := harness.Namespace(t)
	k, rar := selfRequested(t, ns)
	id := k.Status.WorkflowID
	assert.Equal(t, "alice", rar.Spec.ApprovalContext.Requester)
	assert.True(t, rar.Spec.ApprovalContext.RequireDistinctApprover, "on by default for an approval the policy requires")
	assert.Contains(t, k.Status.Message, "; an approver other than the requester alice must approve")
	before := settledHistoryLength(t, id)

	selfApproval := `user "alice" requested this change and may not approve it: RemediationApprovalRequest ` + ns + "/" + rar.Name + ` needs an approver other than the requester`
	err := impersonating(t, "alice").Status().Patch(ctx, rar.DeepCopy(), decisionPatch("Approved", "mine", "bob"))
	requireForbidden(t, err, selfApproval)

	out, err := kubectlRemedy(t, ns, "approve", "kexec", k.Name, "-m", "mine", "--as", "alice")
	require.Error(t, err, out)
	assert.Contains(t, err.Error(), selfApproval)
	assert.NotContains(t, err.Error(), "deciding needs the verb", "the refusal is not about RBAC")

	out, err = temporalCLIAs(t, ns, "alice", "workflow", "update", "execute", "--workflow-id", id, "--name", "decide",
		"--input", `{"approved":true,"approver":"bob","reason":"mine"}`)
	require.Error(t, err, out)
	assert.Contains(t, out, "alice requested this change, and approval request "+ns+"/"+rar.Name+" needs an approver other than the requester")
	assert.Equal(t, before, historyLength(t, id), "a refused update leaves no trace in history")

	require.NoError(t, harness.Temporal().SignalWorkflow(ctx, id, "", workflows.SignalApprove, workflows.ApprovalSignal{Approver: "alice", Reason: "mine"}))
	settledHistoryLength(t, id)
	assert.Equal(t, v1alpha1.PhaseWaitingApproval, queryPhase(t, id), "the self-approval signal was ignored")
	require.NoError(t, harness.Kube().Get(ctx, ctrlclient.ObjectKeyFromObject(rar), rar))
	assert.Empty(t, rar.Status.Decision)
	assert.Nil(t, rar.Status.RequestedDecision)
	assert.Equal(t, int32(1), replicasOf(t, ns, "web"))

	grant(t, ns, "carol", "approve")
	require.NoError(t, impersonating(t, "carol").Status().Patch(ctx, rar, decisionPatch("Approved", "checked", "alice")))
	k = waitPhase(t, k, v1alpha1.PhaseCompleted)
	assert.Equal(t, v1alpha1.ReasonSucceeded, k.Status.Reason)
	require.NoError(t, harness.Kube().Get(ctx, ctrlclient.ObjectKeyFromObject(rar), rar))
	assert.Equal(t, "carol", rar.Status.DecidedBy)
	assert.Equal(t, v1alpha1.DecidedViaKubectl, rar.Status.DecidedVia)
	assert.Equal(t, int32(2), replicasOf(t, ns, "web"))
}

// asAnonymous is a client the API server authenticates as nobody.
func asAnonymous(t *testing.T) ctrlclient.Client {
	t.Helper()
	cfg := rest.CopyConfig(harness.Config())
	cfg.Impersonate = rest.ImpersonationConfig{UserName: admission.AnonymousUser, Groups: []string{admission.UnauthenticatedGroup}}
	c, err := ctrlclient.New(cfg, ctrlclient.Options{Scheme: operator.Scheme()})
	require.NoError(t, err)
	return c
}

// No path takes a decision from nobody: a reject signal with an empty
// payload is not recorded and the run keeps waiting, the update refuses a
// blank approver, and kubectl refuses the anonymous user even when RBAC
// grants it approve.
func TestDutiesAnonymousDecisionsAreRefused(t *testing.T) {
	ctx := context.Background()
	ns := harness.Namespace(t)
	k, rar := awaitingApproval(t, ns, "anonymous", time.Hour, 0)
	id := k.Status.WorkflowID

	require.NoError(t, harness.Temporal().SignalWorkflow(ctx, id, "", workflows.SignalReject, map[string]any{}))
	require.NoError(t, harness.Temporal().SignalWorkflow(ctx, id, "", workflows.SignalReject, workflows.ApprovalSignal{Approver: "  ", Reason: "who am I"}))
	require.NoError(t, harness.Temporal().SignalWorkflow(ctx, id, "", workflows.SignalReject, nil))
	require.Eventually(t, func() bool { return harness.SignalsReceived(t, id, "") == 3 }, 10*time.Second, 100*time.Millisecond)
	before := settledHistoryLength(t, id)
	assert.Equal(t, v1alpha1.PhaseWaitingApproval, queryPhase(t, id), "the anonymous rejects were not taken")

	// Through the CLI nobody is anonymous: without a token the codec server
	// refuses it. Sealed by Remedy's own parts, a blank approver is refused.
	out, err := temporalCLIAs(t, ns, "", "workflow", "update", "execute", "--workflow-id", id, "--name", "decide", "--input", `{"approved":false,"approver":" "}`, "--command-timeout", "5s")
	require.Error(t, err, out)
	h, err := harness.Temporal().UpdateWorkflow(ctx, client.UpdateWorkflowOptions{WorkflowID: id, UpdateName: workflows.UpdateDecide,
		Args: []any{map[string]any{"approved": false, "approver": " "}}, WaitForStage: client.WorkflowUpdateStageCompleted})
	if err == nil {
		err = h.Get(ctx, nil)
	}
	require.Error(t, err)
	assert.Contains(t, err.Error(), "approver is required: an anonymous decision is not taken")
	assert.Equal(t, before, historyLength(t, id), "a refused update leaves no trace in history")

	// As a cluster that lets anonymous users in and granted them too much would.
	grant(t, ns, admission.AnonymousUser, "approve")
	discovery := &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "duties-anonymous-discovery-" + ns},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "system:discovery"},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: admission.AnonymousUser}}}
	require.NoError(t, harness.Kube().Create(ctx, discovery))
	t.Cleanup(func() { require.NoError(t, harness.Kube().Delete(context.Background(), discovery)) })
	err = asAnonymous(t).Status().Patch(ctx, rar.DeepCopy(), decisionPatch("Rejected", "", ""))
	requireForbidden(t, err, `an anonymous user ("system:anonymous") may not decide RemediationApprovalRequest `+ns+"/"+rar.Name)

	out, err = kubectlRemedy(t, ns, "reject", "kexec", k.Name, "--as", admission.AnonymousUser)
	require.Error(t, err, out)
	assert.Contains(t, err.Error(), `an anonymous user ("system:anonymous") may not decide`)
	require.NoError(t, harness.Kube().Get(ctx, ctrlclient.ObjectKeyFromObject(rar), rar))
	assert.Empty(t, rar.Status.Decision, "nothing was recorded")
	assert.Nil(t, rar.Status.RequestedDecision)
	assert.Equal(t, v1alpha1.PhaseWaitingApproval, queryPhase(t, id))

	require.NoError(t, harness.Temporal().SignalWorkflow(ctx, id, "", workflows.SignalApprove, workflows.ApprovalSignal{Approver: "bob", Reason: "named"}))
	k = waitPhase(t, k, v1alpha1.PhaseCompleted)
	require.NoError(t, harness.Kube().Get(ctx, ctrlclient.ObjectKeyFromObject(rar), rar))
	assert.Equal(t, v1alpha1.DecisionApproved, rar.Status.Decision)
	assert.Equal(t, "bob", rar.Status.DecidedBy, "the first named decision is the one the run took")
}

// A reload has no requester to keep from approving: a ConfigReloadPolicy
// that asks for a distinct approver is refused rather than ignored.
func TestDutiesReloadPolicyRefusesDistinctApprover(t *testing.T) {
	ns := harness.Namespace(t)
	p := &v1alpha1.ConfigReloadPolicy{ObjectMeta: metav1.ObjectMeta{Name: "reload", Namespace: ns}, Spec: v1alpha1.ConfigReloadPolicySpec{
		ConfigMapSelector: metav1.LabelSelector{MatchLabels: map[string]string{"reload": "true"}},
		WorkloadSelector:  metav1.LabelSelector{MatchLabels: map[string]string{"reload": "true"}},
		Approval:          &v1alpha1.ApprovalSpec{Required: true, RequireDistinctApprover: true},
	}}
	err := harness.Kube().Create(context.Background(), p)
	require.Error(t, err)
	assert.True(t, apierrors.IsInvalid(err), "want 422, got %v", err)
	assert.Contains(t, err.Error(), "spec.approval: Invalid value")
	assert.Contains(t, err.Error(), "requireDistinctApprover applies to KubernetesExecutions and RemediationRequests: a reload has no requester")
}
