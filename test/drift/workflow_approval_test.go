package drift

import (
	"context"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrlclient "sigs.k8s.io/controller-runtime/pkg/client"

	kv1 "github.com/remedy-dev/remedy/api/kausality/v1alpha1"
	"github.com/remedy-dev/remedy/api/v1alpha1"
	"github.com/remedy-dev/remedy/test/harness"
	"github.com/remedy-dev/remedy/workflows"
)

// askingDrift starts a drift run that asks for approval and returns its request.
func askingDrift(t *testing.T) (*receiver, drifted, *v1alpha1.RemediationApprovalRequest) {
	t.Helper()
	rcv := newReceiver(t)
	d := newDrift(t, kv1.DriftReporting{CallbackURLs: []string{rcv.URL}, RequestApproval: true})
	d.signalWithStart(t)
	return rcv, d, d.approvalRequest(t)
}

func TestDriftWorkflowApprovalWritesOnceApproval(t *testing.T) {
	rcv, d, rar := askingDrift(t)
	assert.Regexp(t, "^drift-"+d.signal.ID+"-[0-9]+$", rar.Name)
	assert.Equal(t, v1alpha1.ObjectRef{APIVersion: "apps/v1", Kind: "Deployment", Namespace: d.dep.Namespace, Name: "web"}, rar.Spec.SubjectRef)
	require.Len(t, rar.OwnerReferences, 1)
	assert.Equal(t, d.dep.UID, rar.OwnerReferences[0].UID, "the parent owns the request")
	assert.Equal(t, d.rs.Name, rar.Spec.ApprovalContext.Target.Name)

	require.NoError(t, harness.Temporal().SignalWorkflow(context.Background(), d.workflowID(), "", workflows.SignalApprove,
		workflows.ApprovalSignal{Approver: "alice", Request: rar.Name}))
	rcv.waitPhases(t, kv1.DriftReportDetected, kv1.DriftReportResolved)
	harness.WaitClosed(t, d.workflowID(), driftTimeout)

	approvals, err := kv1.ParseApprovals(d.parentAnnotation(t, kv1.AnnotationApprovals))
	require.NoError(t, err)
	assert.Equal(t, []kv1.Approval{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: d.rs.Name, Generation: 1, Mode: kv1.ApprovalOnce}}, approvals)
	got := &v1alpha1.RemediationApprovalRequest{}
	require.NoError(t, harness.Kube().Get(context.Background(), ctrlclient.ObjectKeyFromObject(rar), got))
	assert.Equal(t, v1alpha1.DecisionApproved, got.Status.Decision)
	assert.Equal(t, "alice", got.Status.DecidedBy)
	harness.ReplayHistory(t, d.workflowID(), "drift-approved.json")
}

// A kubectl decision on a drift's request reaches the drift run: the relay
// knows drift/<parent-uid> from the request's owner, the drifted parent.
func TestDriftApprovalByKubectlIsRelayedToTheDriftRun(t *testing.T) {
	rcv, d, rar := askingDrift(t)
	require.NoError(t, harness.Kube().Status().Patch(context.Background(), rar,
		ctrlclient.RawPatch(types.MergePatchType, []byte(`{"status":{"decision":"Approved","decisionMessage":"expected"}}`))))
	rcv.waitPhases(t, kv1.DriftReportDetected, kv1.DriftReportResolved)
	harness.WaitClosed(t, d.workflowID(), driftTimeout)
	got := &v1alpha1.RemediationApprovalRequest{}
	require.NoError(t, harness.Kube().Get(context.Background(), ctrlclient.ObjectKeyFromObject(rar), got))
	assert.Equal(t, v1alpha1.DecisionApproved, got.Status.Decision)
	assert.Equal(t, v1alpha1.DecidedViaKubectl, got.Status.DecidedVia)
	assert.Equal(t, "expected", got.Status.DecisionMessage)
}

func TestDriftWorkflowRejectionWritesRejection(t *testing.T) {
	rcv, d, rar := askingDrift(t)
	require.NoError(t, harness.Temporal().SignalWorkflow(context.Background(), d.workflowID(), "", workflows.SignalReject,
		workflows.ApprovalSignal{Approver: "bob", Reason: "the cloud is fine", Request: rar.Name}))
	require.Eventually(t, func() bool { return d.parentAnnotation(t, kv1.AnnotationRejections) != "" }, driftTimeout, 50*time.Millisecond)
	rejections, err := kv1.ParseRejections(d.parentAnnotation(t, kv1.AnnotationRejections))
	require.NoError(t, err)
	assert.Equal(t, []kv1.Rejection{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: d.rs.Name, Generation: 1,
		Reason: "rejected by bob: the cloud is fine"}}, rejections)

	// A rejected drift stays open until the parent changes.
	st := d.status(t)
	require.Len(t, st.Open, 1)
	assert.Equal(t, string(v1alpha1.DecisionRejected), st.Open[0].Decision)
	d.changeParent(t)
	rcv.waitPhases(t, kv1.DriftReportDetected, kv1.DriftReportResolved)
	harness.WaitClosed(t, d.workflowID(), driftTimeout)
	harness.ReplayHistory(t, d.workflowID(), "drift-rejected.json")
}

// rejecting is a callback URL that refuses every report (404): they are
// recorded as undelivered, not retried.
func rejecting(t *testing.T) string {
	s := httptest.NewServer(http.NotFoundHandler())
	t.Cleanup(s.Close)
	return s.URL
}

// ackingLate is a callback URL whose first answer does not acknowledge the
// report (retried), and which acknowledges from then on.
func ackingLate(t *testing.T) string {
	var mu sync.Mutex
	first := true
	s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		if first {
			first = false
			_, _ = w.Write([]byte(`{"acknowledged":false,"error":"slack is down"}`))
			return
		}
		_, _ = w.Write([]byte(`{"acknowledged":true}`))
	}))
	t.Cleanup(s.Close)
	return s.URL
}

// The namespace's remedy-config gives the request 2s: it expires, the drift
// stays open as it was, and resolves when the parent changes. A receiver that
// refuses reports has them recorded as undelivered; one that does not
// acknowledge at first gets the report again.
func TestDriftWorkflowApprovalExpiryLeavesTheDriftOpen(t *testing.T) {
	ctx := context.Background()
	rcv := newReceiver(t)
	refusing := rejecting(t)
	d := newDrift(t, kv1.DriftReporting{CallbackURLs: []string{rcv.URL, refusing, ackingLate(t)}, RequestApproval: true})
	require.NoError(t, harness.Kube().Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "remedy-config", Namespace: d.dep.Namespace},
		Data: map[string]string{"approvalTimeout": "2s"}}))
	d.signalWithStart(t)
	rar := harness.Eventually(t, d.approvalRequest(t), driftTimeout, func(r *v1alpha1.RemediationApprovalRequest) bool {
		return r.Status.Decision != ""
	})
	assert.Equal(t, v1alpha1.DecisionExpired, rar.Status.Decision)
	assert.Equal(t, v1alpha1.DecidedViaTimer, rar.Status.DecidedVia)
	st := d.status(t)
	require.Len(t, st.Open, 1)
	assert.Equal(t, string(v1alpha1.DecisionExpired), st.Open[0].Decision)
	assert.Empty(t, d.parentAnnotation(t, kv1.AnnotationApprovals), "an expired request approves nothing")
	assert.Empty(t, d.parentAnnotation(t, kv1.AnnotationRejections), "nor rejects anything")

	d.changeParent(t)
	rcv.waitPhases(t, kv1.DriftReportDetected, kv1.DriftReportResolved)
	harness.WaitClosed(t, d.workflowID(), driftTimeout)
	var res workflows.DriftResult
	require.NoError(t, harness.Temporal().GetWorkflow(ctx, d.workflowID(), "").Get(ctx, &res))
	require.Len(t, res.Status.Undelivered, 2, "the refusing receiver's Detected and Resolved reports")
	assert.Equal(t, refusing, res.Status.Undelivered[0].URL)
	harness.ReplayHistory(t, d.workflowID(), "drift-approval-expired.json")
}
