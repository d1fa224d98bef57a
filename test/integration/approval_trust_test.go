package integration

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/client"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/retry"
	ctrlclient "sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/remedy-dev/remedy/api/v1alpha1"
	"github.com/remedy-dev/remedy/internal/devenv"
	"github.com/remedy-dev/remedy/operator"
	"github.com/remedy-dev/remedy/test/harness"
	"github.com/remedy-dev/remedy/workflows"
)

// workerUser is the identity of Remedy's worker, the only creator of approval requests.
var workerUser = "system:serviceaccount:" + devenv.Namespace + ":remedy-worker"

// asWorker returns a client acting as Remedy's worker, for tests that need
// an approval request no run asked for.
func asWorker(t *testing.T) ctrlclient.Client {
	t.Helper()
	cfg := rest.CopyConfig(harness.Config())
	cfg.Impersonate = rest.ImpersonationConfig{UserName: workerUser,
		Groups: []string{"system:serviceaccounts", "system:serviceaccounts:" + devenv.Namespace, "system:authenticated"}}
	c, err := ctrlclient.New(cfg, ctrlclient.Options{Scheme: operator.Scheme()})
	require.NoError(t, err)
	return c
}

// forgedRequest is an approval request in ns, about the Deployment web there,
// that names the workflow id: what an approver of ns would create to decide a
// run elsewhere.
func forgedRequest(ns, name, id string, requiredBy time.Time) *v1alpha1.RemediationApprovalRequest {
	web := v1alpha1.ObjectRef{APIVersion: "apps/v1", Kind: "Deployment", Namespace: ns, Name: "web"}
	return &v1alpha1.RemediationApprovalRequest{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: v1alpha1.RemediationApprovalRequestSpec{SubjectRef: web, WorkflowID: id, RequiredBy: metav1.NewTime(requiredBy),
			ApprovalContext: v1alpha1.ApprovalContext{Reason: "looks routine", Action: "restart", Target: web}},
	}
}

func TestOnlyTheWorkerCreatesApprovalRequests(t *testing.T) {
	ctx := context.Background()
	ns := harness.Namespace(t)
	grant(t, ns, "mallory", "create", "approve")
	rar := forgedRequest(ns, "mine", v1alpha1.ReloadWorkflowID(ns, "Deployment", "web"), time.Now().Add(time.Hour))

	for user, c := range map[string]ctrlclient.Client{"mallory": impersonating(t, "mallory"), "cluster-admin": harness.Kube()} {
		err := c.Create(ctx, rar.DeepCopy())
		require.Error(t, err, "%s created an approval request", user)
		assert.True(t, apierrors.IsForbidden(err), "want 403 for %s, got %v", user, err)
		assert.Contains(t, err.Error(), "only Remedy's worker ("+workerUser+") creates RemediationApprovalRequests")
	}
	// Schema validation comes first: an invalid request still says what is wrong with it.
	invalid := rar.DeepCopy()
	invalid.Spec.WorkflowID = ""
	err := impersonating(t, "mallory").Create(ctx, invalid)
	require.Error(t, err)
	assert.True(t, apierrors.IsInvalid(err), "want 422, got %v", err)
	assert.Contains(t, err.Error(), "spec.workflowID")

	require.NoError(t, asWorker(t).Create(ctx, rar, ctrlclient.DryRunAll))
}

// An approver of one namespace cannot decide a run in another, even when an
// approval request naming that run exists in their namespace (as if the
// admission policy were missing): the relay does not signal it, and a
// decision that names the request from the other namespace is ignored by the
// workflow itself.
func TestApprovalRelayFromAnotherNamespace(t *testing.T) {
	ctx := context.Background()
	payments := harness.Namespace(t)
	k, rar := awaitingApproval(t, payments, "scale-pay", time.Hour, 0)
	id := k.Status.WorkflowID
	tenant := harness.Namespace(t)
	grant(t, tenant, "mallory", "create", "approve")

	// The same name as the payments request, so only the namespace tells them apart.
	forged := forgedRequest(tenant, rar.Name, id, time.Now().Add(time.Hour))
	err := impersonating(t, "mallory").Create(ctx, forged.DeepCopy())
	require.Error(t, err)
	assert.True(t, apierrors.IsForbidden(err), "want 403, got %v", err)

	require.NoError(t, asWorker(t).Create(ctx, forged))
	forged = harness.Eventually(t, forged, runTimeout, func(r *v1alpha1.RemediationApprovalRequest) bool {
		c := meta.FindStatusCondition(r.Status.Conditions, v1alpha1.ConditionReady)
		return c != nil && c.Reason == "WorkflowMismatch"
	})
	assertEvents(t, tenant, forged.Name, "WorkflowMismatch")
	// Closed by the mismatch, the request refuses the decision outright (the
	// relay would not have signalled it either: TestPlanApproval).
	err = impersonating(t, "mallory").Status().Patch(ctx, forged.DeepCopy(), decisionPatch("Approved", "trust me", ""))
	require.Error(t, err)
	assert.True(t, apierrors.IsConflict(err), "want 409, got %v", err)
	assert.Contains(t, err.Error(), "is closed (WorkflowMismatch: spec.workflowID "+id)
	var evs eventsv1.EventList
	require.NoError(t, harness.Kube().List(ctx, &evs, ctrlclient.InNamespace(tenant)))
	for _, e := range evs.Items {
		if e.Reason == "WorkflowMismatch" {
			assert.Contains(t, e.Note, "spec.workflowID "+id+" is not a workflow of this request's namespace and subject")
		}
	}
	// The relay had its chance: the look that wrote WorkflowMismatch is the
	// one that would have relayed, and the decision it could relay was refused.
	assert.Zero(t, harness.SignalsReceived(t, id, ""), "nothing was relayed to the payments run")

	// Had the relay been fooled: the workflow matches namespace and name.
	require.NoError(t, harness.Temporal().SignalWorkflow(ctx, id, "", workflows.SignalApprove,
		workflows.ApprovalSignal{Approver: "mallory", Via: "kubectl", Request: rar.Name, Namespace: tenant}))
	h, err := harness.Temporal().UpdateWorkflow(ctx, client.UpdateWorkflowOptions{WorkflowID: id, UpdateName: workflows.UpdateDecide,
		WaitForStage: client.WorkflowUpdateStageCompleted,
		Args:         []any{workflows.DecideRequest{Approved: true, Approver: "mallory", Request: rar.Name, Namespace: tenant}}})
	if err == nil {
		err = h.Get(ctx, nil)
	}
	require.Error(t, err)
	assert.Contains(t, err.Error(), "approval request "+tenant+"/"+rar.Name+" is not open (the open one is "+payments+"/"+rar.Name+")")
	assert.Equal(t, 1, harness.SignalsReceived(t, id, ""))
	assert.Equal(t, v1alpha1.PhaseWaitingApproval, queryPhase(t, id), "the signal from the other namespace was ignored")

	require.NoError(t, harness.Temporal().SignalWorkflow(ctx, id, "", workflows.SignalReject,
		workflows.ApprovalSignal{Approver: "alice", Request: rar.Name, Namespace: payments}))
	k = waitPhase(t, k, v1alpha1.PhaseFailed)
	assert.Equal(t, v1alpha1.ReasonApprovalRejected, k.Status.Reason)
	require.NoError(t, harness.Kube().Get(ctx, ctrlclient.ObjectKeyFromObject(rar), rar))
	assert.Equal(t, "alice", rar.Status.DecidedBy)
}

func TestKubectlDecisionAfterRequiredByIsRefused(t *testing.T) {
	ctx := context.Background()
	ns := harness.Namespace(t)
	grant(t, ns, "carol", "approve")
	requiredBy := time.Now().Add(-time.Minute).Truncate(time.Second)
	id := v1alpha1.ReloadWorkflowID(ns, "Deployment", "web")
	// The request's workflow still runs (its timer has yet to record Expired):
	// a workflow that is gone would let the operator expire the request first.
	runIdle(t, id)
	rar := forgedRequest(ns, "late", id, requiredBy)
	require.NoError(t, asWorker(t).Create(ctx, rar))

	err := impersonating(t, "carol").Status().Patch(ctx, rar.DeepCopy(), decisionPatch("Approved", "sorry I'm late", ""))
	require.Error(t, err)
	assert.True(t, apierrors.IsConflict(err), "want 409, got %v", err)
	assert.Contains(t, err.Error(), "expired at "+requiredBy.UTC().Format(time.RFC3339)+" (spec.requiredBy): no decision is accepted after it")
	require.NoError(t, harness.Kube().Get(ctx, ctrlclient.ObjectKeyFromObject(rar), rar))
	assert.Nil(t, rar.Status.RequestedDecision)
	assert.Empty(t, rar.Status.Decision)
}

// The worker may read a request just before a kubectl decision lands on it:
// its record then meets 409 Conflict, which it retries, and never drops the
// requested decision.
func TestStaleRecordOfADecisionIsAConflict(t *testing.T) {
	ctx := context.Background()
	ns := harness.Namespace(t)
	grant(t, ns, "carol", "approve")
	worker := asWorker(t)
	rar := forgedRequest(ns, "stale", v1alpha1.ReloadWorkflowID(ns, "Deployment", "web"), time.Now().Add(time.Hour))
	require.NoError(t, worker.Create(ctx, rar))
	stale := rar.DeepCopy()
	require.NoError(t, impersonating(t, "carol").Status().Patch(ctx, rar, decisionPatch("Approved", "ship it", "")))

	stale.Status.Decision, stale.Status.DecidedBy, stale.Status.DecidedVia = v1alpha1.DecisionRejected, "bob", v1alpha1.DecidedViaSignal
	err := worker.Status().Update(ctx, stale)
	require.Error(t, err)
	assert.True(t, apierrors.IsConflict(err), "want 409 for the retry loop, got %v", err)

	require.NoError(t, retry.RetryOnConflict(retry.DefaultBackoff, func() error {
		if err := worker.Get(ctx, ctrlclient.ObjectKeyFromObject(rar), rar); err != nil {
			return err
		}
		rar.Status.Decision, rar.Status.DecidedBy, rar.Status.DecidedVia = v1alpha1.DecisionRejected, "bob", v1alpha1.DecidedViaSignal
		return worker.Status().Update(ctx, rar)
	}))
	assert.Equal(t, v1alpha1.DecisionRejected, rar.Status.Decision)
	require.NotNil(t, rar.Status.RequestedDecision)
	assert.Equal(t, "carol", rar.Status.RequestedDecision.RequestedBy)
}

// A Temporal reject reaches the workflow first; carol's kubectl approve lands
// on the request before the worker records the reject. The reject stands, on
// the run and on the request; carol's approve is kept as requested and
// reported as not counted.
func TestKubectlApproveRacingTemporalRejectFirstWins(t *testing.T) {
	ctx := context.Background()
	var (
		k   *v1alpha1.KubernetesExecution
		rar *v1alpha1.RemediationApprovalRequest
		ns  string
	)
	// The approve must land before the reject is recorded; the worker records
	// within milliseconds, so try again with a fresh run when it was faster.
	for attempt := 0; ; attempt++ {
		require.Less(t, attempt, 3, "the reject was recorded before every kubectl approve; the race was never run")
		ns = harness.Namespace(t)
		grant(t, ns, "carol", "approve")
		k, rar = awaitingApproval(t, ns, "scale-race", time.Hour, 0)
		require.NoError(t, harness.Temporal().SignalWorkflow(ctx, k.Status.WorkflowID, "", workflows.SignalReject,
			workflows.ApprovalSignal{Approver: "bob", Reason: "change freeze"}))
		err := impersonating(t, "carol").Status().Patch(ctx, rar, decisionPatch("Approved", "ship it", ""))
		if err == nil {
			t.Logf("kubectl approve landed before the reject was recorded (attempt %d)", attempt+1)
			break
		}
		require.True(t, apierrors.IsConflict(err), "want 409 already decided, got %v", err)
		assert.Contains(t, err.Error(), "already decided (Rejected by bob via temporal-signal)")
	}

	k = waitPhase(t, k, v1alpha1.PhaseFailed)
	assert.Equal(t, v1alpha1.ReasonApprovalRejected, k.Status.Reason)
	assert.Equal(t, "rejected by bob via temporal-signal: change freeze", k.Status.Message)
	assert.Nil(t, k.Status.ExecutionResults, "nothing was executed")
	require.NoError(t, harness.Kube().Get(ctx, ctrlclient.ObjectKeyFromObject(rar), rar))
	assert.Equal(t, v1alpha1.DecisionRejected, rar.Status.Decision, "the request shows the decision the workflow took")
	assert.Equal(t, "bob", rar.Status.DecidedBy)
	assert.Equal(t, v1alpha1.DecidedViaSignal, rar.Status.DecidedVia)
	require.NotNil(t, rar.Status.RequestedDecision)
	assert.Equal(t, v1alpha1.DecisionApproved, rar.Status.RequestedDecision.Decision)
	assert.Equal(t, "carol", rar.Status.RequestedDecision.RequestedBy)
	assertEvents(t, ns, rar.Name, "Rejected", "DecisionIgnored")
	awaitApprovalStatus(t, k.Status.WorkflowID, string(v1alpha1.DecisionRejected))
}

// The reverse order: carol's kubectl approve reaches the workflow before a
// Temporal reject, which is then ignored.
func TestKubectlApproveBeforeTemporalRejectWins(t *testing.T) {
	ctx := context.Background()
	ns := harness.Namespace(t)
	grant(t, ns, "carol", "approve")
	k, rar := awaitingApproval(t, ns, "scale-first", time.Hour, 0)
	id := k.Status.WorkflowID
	require.NoError(t, impersonating(t, "carol").Status().Patch(ctx, rar, decisionPatch("Approved", "ship it", "")))
	// The relay marks the request once its signal is in the workflow's history.
	harness.Eventually(t, rar, runTimeout, func(r *v1alpha1.RemediationApprovalRequest) bool {
		c := meta.FindStatusCondition(r.Status.Conditions, v1alpha1.ConditionReady)
		return c != nil && c.Reason != "Pending"
	})
	require.NoError(t, harness.Temporal().SignalWorkflow(ctx, id, "", workflows.SignalReject, workflows.ApprovalSignal{Approver: "bob"}))

	k = waitPhase(t, k, v1alpha1.PhaseCompleted)
	assert.Equal(t, v1alpha1.ReasonSucceeded, k.Status.Reason)
	require.NoError(t, harness.Kube().Get(ctx, ctrlclient.ObjectKeyFromObject(rar), rar))
	assert.Equal(t, v1alpha1.DecisionApproved, rar.Status.Decision)
	assert.Equal(t, "carol", rar.Status.DecidedBy)
	assert.Equal(t, v1alpha1.DecidedViaKubectl, rar.Status.DecidedVia)
	assert.Equal(t, 2, harness.SignalsReceived(t, id, ""), "the relayed approve, then bob's reject, which was ignored")
}

func queryPhase(t *testing.T, id string) v1alpha1.Phase {
	t.Helper()
	v, err := harness.Temporal().QueryWorkflow(context.Background(), id, "", workflows.QueryStatus)
	require.NoError(t, err)
	var s v1alpha1.KubernetesExecutionStatus
	require.NoError(t, v.Get(&s))
	return s.Phase
}
