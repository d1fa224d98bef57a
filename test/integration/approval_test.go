package integration

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.temporal.io/api/workflowservice/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	ctrlclient "sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/remedy-dev/remedy/api/v1alpha1"
	"github.com/remedy-dev/remedy/operator"
	"github.com/remedy-dev/remedy/test/harness"
	"github.com/remedy-dev/remedy/workflows"
)

// awaitingApproval creates a scale execution that needs approval and waits
// until it is in WaitingApproval with its RAR created.
func awaitingApproval(t *testing.T, ns, name string, timeout, window time.Duration) (*v1alpha1.KubernetesExecution, *v1alpha1.RemediationApprovalRequest) {
	t.Helper()
	harness.Deployment(t, ns, "web", 1)
	k := createExecution(t, ns, name, v1alpha1.KubernetesExecutionSpec{
		Action: "scale", Target: target(ns, "web"), Parameters: &v1alpha1.ActionParameters{Replicas: ptr.To[int32](2)},
		Approval:       &v1alpha1.ApprovalSpec{Required: true, Timeout: v1alpha1.DurationOf(timeout)},
		RollbackWindow: v1alpha1.DurationOf(window),
	})
	k = waitPhase(t, k, v1alpha1.PhaseWaitingApproval)
	require.Equal(t, &v1alpha1.LocalRef{Name: v1alpha1.ApprovalRequestName(name)}, k.Status.ApprovalRequestRef)
	rar := &v1alpha1.RemediationApprovalRequest{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: k.Status.ApprovalRequestRef.Name}}
	require.NoError(t, harness.Kube().Get(context.Background(), ctrlclient.ObjectKeyFromObject(rar), rar))
	return k, rar
}

// temporalCLI runs the real temporal binary against the dev server.
func temporalCLI(t *testing.T, args ...string) (string, error) {
	t.Helper()
	args = append(args, "--address", harness.TemporalAddress(), "--namespace", "default")
	out, err := exec.Command(os.Getenv("TEMPORAL_CLI"), args...).CombinedOutput()
	return string(out), err
}

// temporalCLIAs runs the real temporal binary through Remedy's codec server
// as user (one of harness.TokenUsers, with their token), who may approve in
// ns and decode payloads (to read the answer to an update); "" sends no token.
func temporalCLIAs(t *testing.T, ns, user string, args ...string) (string, error) {
	t.Helper()
	token := ""
	if user != "" {
		mayApproveAndDecode(t, ns, user)
		token = harness.UserToken(t, user)
	}
	return temporalCodec(t, token, args...)
}

// awaitApprovalStatus waits until the Web UI query finds the run with that ApprovalStatus.
func awaitApprovalStatus(t *testing.T, id, status string) {
	t.Helper()
	q := fmt.Sprintf("WorkflowId='%s' AND ApprovalStatus='%s'", id, status)
	require.Eventually(t, func() bool {
		resp, err := harness.Temporal().ListWorkflow(context.Background(), &workflowservice.ListWorkflowExecutionsRequest{Query: q})
		require.NoError(t, err)
		return len(resp.Executions) == 1
	}, 10*time.Second, 100*time.Millisecond, "no run matches %s", q)
}

func historyLength(t testing.TB, id string) int64 {
	t.Helper()
	d, err := harness.Temporal().DescribeWorkflowExecution(context.Background(), id, "")
	require.NoError(t, err)
	return d.WorkflowExecutionInfo.GetHistoryLength()
}

// settledHistoryLength is the history length once the run has no workflow
// task pending: a phase shows in .status from inside a workflow task, whose
// events are written when the task completes, a moment later.
func settledHistoryLength(t testing.TB, id string) int64 {
	t.Helper()
	var n int64
	require.Eventually(t, func() bool {
		d, err := harness.Temporal().DescribeWorkflowExecution(context.Background(), id, "")
		require.NoError(t, err)
		n = d.GetWorkflowExecutionInfo().GetHistoryLength()
		return d.GetPendingWorkflowTask() == nil
	}, 10*time.Second, 100*time.Millisecond, "history of %s: a workflow task stayed pending for 10s", id)
	return n
}

func TestApproveBySignalThroughCLI(t *testing.T) {
	ns := harness.Namespace(t)
	k, rar := awaitingApproval(t, ns, "scale-approved", time.Hour, 0)
	id := k.Status.WorkflowID
	assert.Equal(t, id, rar.Spec.WorkflowID)
	assert.Equal(t, "KubernetesExecution", rar.Spec.SubjectRef.Kind)
	assert.Equal(t, "scale-approved", rar.Spec.SubjectRef.Name)
	owner := metav1.GetControllerOf(rar)
	require.NotNil(t, owner)
	assert.Equal(t, k.UID, owner.UID, "owned by the execution, so deleting it collects the request")
	assert.WithinDuration(t, time.Now().Add(time.Hour), rar.Spec.RequiredBy.Time, time.Minute)
	awaitApprovalStatus(t, id, workflows.ApprovalPending)
	assertEvents(t, ns, rar.Name, "Requested")

	out, err := temporalCLIAs(t, ns, "alice", "workflow", "signal", "--workflow-id", id, "--name", "approve", "--input", `{"approver":"alice","reason":"looks fine"}`)
	require.NoError(t, err, out)

	k = waitPhase(t, k, v1alpha1.PhaseCompleted)
	assert.Equal(t, v1alpha1.ReasonSucceeded, k.Status.Reason)
	require.NoError(t, harness.Kube().Get(context.Background(), ctrlclient.ObjectKeyFromObject(rar), rar))
	assert.Equal(t, v1alpha1.DecisionApproved, rar.Status.Decision)
	assert.Equal(t, "alice", rar.Status.DecidedBy)
	assert.Equal(t, v1alpha1.DecidedViaSignal, rar.Status.DecidedVia)
	assert.Equal(t, "looks fine", rar.Status.DecisionMessage)
	require.NotNil(t, rar.Status.DecidedAt)
	awaitApprovalStatus(t, id, string(v1alpha1.DecisionApproved))
	assertEvents(t, ns, rar.Name, "Requested", "Approved")
	harness.ReplayHistory(t, id, "execution-approval-local-record.json")
}

func TestRejectByUpdateAfterARefusedUpdate(t *testing.T) {
	ns := harness.Namespace(t)
	k, rar := awaitingApproval(t, ns, "scale-rejected", time.Hour, 0)
	id := k.Status.WorkflowID

	before := settledHistoryLength(t, id)
	// Without a token nobody is named: the codec server refuses it, nothing reaches the run.
	out, err := temporalCLIAs(t, ns, "", "workflow", "update", "execute", "--workflow-id", id, "--name", "decide", "--input", `{"approved":true}`, "--command-timeout", "5s")
	require.Error(t, err, out)
	assert.Equal(t, before, historyLength(t, id), "a refused update leaves no trace in history")

	out, err = temporalCLIAs(t, ns, "bob", "workflow", "update", "execute", "--workflow-id", id, "--name", "decide",
		"--input", `{"approved":false,"approver":"bob","reason":"change freeze"}`)
	require.NoError(t, err, out)
	k = waitPhase(t, k, v1alpha1.PhaseFailed)
	assert.Equal(t, v1alpha1.ReasonApprovalRejected, k.Status.Reason)
	assert.Equal(t, "rejected by bob via temporal-update: change freeze", k.Status.Message)
	assert.Nil(t, k.Status.ExecutionResults, "nothing was executed")
	require.NoError(t, harness.Kube().Get(context.Background(), ctrlclient.ObjectKeyFromObject(rar), rar))
	assert.Equal(t, v1alpha1.DecisionRejected, rar.Status.Decision)
	assert.Equal(t, v1alpha1.DecidedViaUpdate, rar.Status.DecidedVia)
	assertEvents(t, ns, rar.Name, "Rejected")
	harness.ReplayHistory(t, id, "execution-approval-rejected.json")
}

func TestApprovalExpiresOnTime(t *testing.T) {
	ns := harness.Namespace(t)
	k, rar := awaitingApproval(t, ns, "scale-expired", 3*time.Second, 0)
	k = harness.Eventually(t, k, runTimeout, func(k *v1alpha1.KubernetesExecution) bool { return k.Status.Phase == v1alpha1.PhaseFailed })
	assert.Equal(t, v1alpha1.ReasonApprovalExpired, k.Status.Reason)
	require.NoError(t, harness.Kube().Get(context.Background(), ctrlclient.ObjectKeyFromObject(rar), rar))
	assert.Equal(t, v1alpha1.DecisionExpired, rar.Status.Decision)
	assert.Equal(t, v1alpha1.DecidedViaTimer, rar.Status.DecidedVia)
	require.NotNil(t, rar.Status.DecidedAt)
	// Both are whole seconds; the timer fires at requiredBy.
	assert.WithinDuration(t, rar.Spec.RequiredBy.Time, rar.Status.DecidedAt.Time, time.Second)
	assertEvents(t, ns, rar.Name, "Requested", "Expired")
	// The timer is named once, not "Expired by timer via timer".
	assertWarning(t, ns, rar.Name, "Expired", "Expired by timer")
	ready := meta.FindStatusCondition(rar.Status.Conditions, v1alpha1.ConditionReady)
	require.NotNil(t, ready)
	assert.NotContains(t, ready.Message, "via timer")
	harness.ReplayHistory(t, k.Status.WorkflowID, "execution-approval-expired.json")
}

// impersonating returns a client acting as user, as `kubectl --as` would.
func impersonating(t *testing.T, user string) ctrlclient.Client {
	t.Helper()
	cfg := rest.CopyConfig(harness.Config())
	cfg.Impersonate = rest.ImpersonationConfig{UserName: user, Groups: []string{"system:authenticated"}}
	c, err := ctrlclient.New(cfg, ctrlclient.Options{Scheme: operator.Scheme()})
	require.NoError(t, err)
	return c
}

// grant gives user a namespaced Role on approval requests with verbs.
func grant(t *testing.T, ns, user string, verbs ...string) {
	t.Helper()
	ctx := context.Background()
	role := &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: user}, Rules: []rbacv1.PolicyRule{
		{APIGroups: []string{"remedy.dev"}, Resources: []string{"remediationapprovalrequests"}, Verbs: append([]string{"get"}, verbs...)},
		{APIGroups: []string{"remedy.dev"}, Resources: []string{"remediationapprovalrequests/status"}, Verbs: []string{"get", "patch", "update"}},
	}}
	require.NoError(t, harness.Kube().Create(ctx, role))
	require.NoError(t, harness.Kube().Create(ctx, &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: user},
		RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "Role", Name: user},
		Subjects:   []rbacv1.Subject{{APIGroup: "rbac.authorization.k8s.io", Kind: "User", Name: user}},
	}))
}

func decisionPatch(decision, message, forgedBy string) ctrlclient.Patch {
	return ctrlclient.RawPatch(types.MergePatchType, []byte(fmt.Sprintf(
		`{"status":{"decision":%q,"decisionMessage":%q,"decidedBy":%q,"decidedVia":"temporal-signal"}}`, decision, message, forgedBy)))
}

// kubectl patch rar --subresource=status: refused without the approve verb,
// attributed to the authenticated user with it, whatever the body claims.
func TestKubectlApprovalNeedsTheApproveVerb(t *testing.T) {
	ctx := context.Background()
	ns := harness.Namespace(t)
	k, rar := awaitingApproval(t, ns, "scale-kubectl", time.Hour, 0)
	grant(t, ns, "carol", "approve")
	grant(t, ns, "eve")

	err := impersonating(t, "eve").Status().Patch(ctx, rar.DeepCopy(), decisionPatch("Approved", "let me", "carol"))
	require.Error(t, err)
	assert.True(t, apierrors.IsForbidden(err), "want 403, got %v", err)
	assert.Contains(t, err.Error(), `user "eve" may not decide RemediationApprovalRequest `+ns+"/"+rar.Name)
	assert.Contains(t, err.Error(), `needs the verb "approve"`)

	require.NoError(t, impersonating(t, "carol").Status().Patch(ctx, rar, decisionPatch("Approved", "ship it", "mallory")))
	req := rar.Status.RequestedDecision
	require.NotNil(t, req, "the webhook turns the person's decision into a request for the workflow")
	assert.Equal(t, "carol", req.RequestedBy, "attributed to the authenticated user, not the body")
	assert.Equal(t, v1alpha1.DecisionApproved, req.Decision)
	assert.Equal(t, "ship it", req.Message)
	assert.WithinDuration(t, time.Now(), req.RequestedAt.Time, 5*time.Second)
	assert.Empty(t, rar.Status.DecidedBy, "only the workflow's record sets the decision")

	k = waitPhase(t, k, v1alpha1.PhaseCompleted)
	assert.Equal(t, v1alpha1.ReasonSucceeded, k.Status.Reason)
	require.NoError(t, harness.Kube().Get(ctx, ctrlclient.ObjectKeyFromObject(rar), rar))
	assert.Equal(t, v1alpha1.DecisionApproved, rar.Status.Decision)
	assert.Equal(t, "carol", rar.Status.DecidedBy, "the workflow keeps the kubectl attribution")
	assert.Equal(t, v1alpha1.DecidedViaKubectl, rar.Status.DecidedVia)
	assert.Equal(t, "ship it", rar.Status.DecisionMessage)
	require.NotNil(t, rar.Status.DecidedAt)
	assertEvents(t, ns, rar.Name, "Requested", "Approved")
}

func TestDoubleDecisionFirstWins(t *testing.T) {
	ctx := context.Background()
	ns := harness.Namespace(t)
	k, rar := awaitingApproval(t, ns, "scale-twice", time.Hour, time.Hour)
	id := k.Status.WorkflowID
	require.NoError(t, harness.Temporal().SignalWorkflow(ctx, id, "", workflows.SignalApprove, workflows.ApprovalSignal{Approver: "alice"}))
	k = waitPhase(t, k, v1alpha1.PhaseRollbackReady)

	out, err := temporalCLIAs(t, ns, "bob", "workflow", "update", "execute", "--workflow-id", id, "--name", "decide", "--input", `{"approved":false,"approver":"bob"}`)
	require.Error(t, err, out)
	assert.Contains(t, out, "already taken")
	require.NoError(t, harness.Temporal().SignalWorkflow(ctx, id, "", workflows.SignalReject, workflows.ApprovalSignal{Approver: "bob"}))
	err = harness.Kube().Status().Patch(ctx, rar, ctrlclient.RawPatch(types.MergePatchType, []byte(`{"status":{"decision":"Rejected"}}`)))
	require.Error(t, err)
	assert.Contains(t, err.Error(), "decision is final once set")

	require.NoError(t, harness.Kube().Get(ctx, ctrlclient.ObjectKeyFromObject(rar), rar))
	assert.Equal(t, v1alpha1.DecisionApproved, rar.Status.Decision)
	assert.Equal(t, "alice", rar.Status.DecidedBy)
	assert.Equal(t, v1alpha1.PhaseRollbackReady, queryPhase(t, id), "the late reject signal was ignored")
}

func TestDeletingTheSubjectWhileWaiting(t *testing.T) {
	ctx := context.Background()
	ns := harness.Namespace(t)
	k, rar := awaitingApproval(t, ns, "scale-deleted", time.Hour, 0)
	id := k.Status.WorkflowID
	require.NoError(t, harness.Kube().Delete(ctx, k))

	harness.WaitClosed(t, id, runTimeout)
	awaitApprovalStatus(t, id, workflows.ApprovalCanceled)
	require.Eventually(t, func() bool {
		return apierrors.IsNotFound(harness.Kube().Get(ctx, ctrlclient.ObjectKeyFromObject(rar), rar))
	}, runTimeout, 100*time.Millisecond, "approval request %s orphaned", rar.Name)
}
