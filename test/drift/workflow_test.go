package drift

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	ctrlclient "sigs.k8s.io/controller-runtime/pkg/client"

	kv1 "github.com/remedy-dev/remedy/api/kausality/v1alpha1"
	"github.com/remedy-dev/remedy/api/v1alpha1"
	"github.com/remedy-dev/remedy/test/harness"
	"github.com/remedy-dev/remedy/workflows"
)

const driftTimeout = 30 * time.Second

// receiver is one test's callback URL: it records every DriftReport POSTed to it.
type receiver struct {
	*httptest.Server
	mu      sync.Mutex
	reports []kv1.DriftReport
}

func newReceiver(t *testing.T) *receiver {
	r := &receiver{}
	r.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		var rep kv1.DriftReport
		if err := json.NewDecoder(req.Body).Decode(&rep); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		r.mu.Lock()
		r.reports = append(r.reports, rep)
		r.mu.Unlock()
		w.WriteHeader(http.StatusOK)
	}))
	t.Cleanup(r.Close)
	return r
}

func (r *receiver) phases() []kv1.DriftReportPhase {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []kv1.DriftReportPhase
	for _, rep := range r.reports {
		out = append(out, rep.Spec.Phase)
	}
	return out
}

func (r *receiver) waitPhases(t *testing.T, want ...kv1.DriftReportPhase) []kv1.DriftReport {
	t.Helper()
	require.Eventually(t, func() bool { return assert.ObjectsAreEqual(want, r.phases()) }, driftTimeout, 50*time.Millisecond,
		"want reports %v", want)
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]kv1.DriftReport(nil), r.reports...)
}

// drifted is a Deployment and its ReplicaSet, as the webhook would report a
// drift of them.
type drifted struct {
	dep    *appsv1.Deployment
	rs     *appsv1.ReplicaSet
	signal workflows.DriftSignal
}

// newDrift creates a Deployment, waits for the Deployment controller's
// ReplicaSet, and builds the drift signal the webhook would send when the
// controller changes that ReplicaSet while the Deployment is unchanged.
// rep is the reporting of a Kausality policy for the test's namespace: the
// signal names no URL, the worker finds them there.
func newDrift(t *testing.T, rep kv1.DriftReporting) drifted {
	t.Helper()
	ns := harness.Namespace(t)
	reportTo(t, ns, rep)
	return driftIn(t, ns, "web")
}

// driftIn is newDrift of a Deployment name in namespace ns, whose reporting is left as it is.
func driftIn(t *testing.T, ns, name string) drifted {
	t.Helper()
	ctx := context.Background()
	d := drifted{dep: harness.Deployment(t, ns, name, 0)}
	require.Eventually(t, func() bool {
		var list appsv1.ReplicaSetList
		require.NoError(t, harness.Kube().List(ctx, &list, ctrlclient.InNamespace(ns)))
		for i := range list.Items {
			if metav1.IsControlledBy(&list.Items[i], d.dep) {
				d.rs = &list.Items[i]
				return true
			}
		}
		return false
	}, driftTimeout, 50*time.Millisecond, "no ReplicaSet for %s/%s", ns, name)

	parent := &unstructured.Unstructured{}
	parent.SetAPIVersion("apps/v1")
	parent.SetKind("Deployment")
	require.NoError(t, harness.Kube().Get(ctx, ctrlclient.ObjectKeyFromObject(d.dep), parent))
	oldRS, err := json.Marshal(d.rs)
	require.NoError(t, err)
	newRS := d.rs.DeepCopy()
	newRS.Spec.Replicas = ptr.To[int32](3)
	newJSON, err := json.Marshal(newRS)
	require.NoError(t, err)
	id := make([]byte, 8)
	_, _ = rand.Read(id)
	d.signal = workflows.DriftSignal{
		ID: hex.EncodeToString(id),
		Parent: workflows.DriftObjectRef{APIVersion: "apps/v1", Kind: "Deployment", Namespace: ns, Name: d.dep.Name,
			UID: string(d.dep.UID)},
		// The Deployment's spec changed only when it was created.
		ParentGeneration: 1,
		ParentSpecHash:   kv1.SpecHash(parent.Object),
		Child: workflows.DriftObjectRef{APIVersion: "apps/v1", Kind: "ReplicaSet", Namespace: ns, Name: d.rs.Name,
			UID: string(d.rs.UID)},
		Operation: "UPDATE", User: "system:serviceaccount:kube-system:deployment-controller",
		Groups:    []string{"system:serviceaccounts", "system:authenticated"},
		OldObject: oldRS, NewObject: newJSON, Mode: string(kv1.ModeEnforce), Denied: true,
		DetectedAt: time.Now().UTC(),
	}
	return d
}

// reportTo creates a Kausality policy whose reporting applies to namespace
// ns, removed when the test ends.
func reportTo(t *testing.T, ns string, rep kv1.DriftReporting) {
	t.Helper()
	c := policyClient(t)
	p := replicaSetPolicy("reports-"+ns, "", ns)
	p.Spec.Reporting = &rep
	require.NoError(t, c.Create(context.Background(), p))
	t.Cleanup(func() { _ = c.Delete(context.Background(), p) })
}

func to(urls ...string) kv1.DriftReporting { return kv1.DriftReporting{CallbackURLs: urls} }

func (d drifted) workflowID() string { return workflows.DriftWorkflowID(string(d.dep.UID)) }

// signal sends the drift as the webhook does: signal-with-start.
func (d drifted) signalWithStart(t *testing.T) {
	t.Helper()
	_, err := harness.Temporal().SignalWithStartWorkflow(context.Background(), d.workflowID(), workflows.SignalDrift, d.signal,
		client.StartWorkflowOptions{ID: d.workflowID(), TaskQueue: workflows.TaskQueue}, "DriftWorkflow", workflows.DriftInput{Parent: d.signal.Parent})
	require.NoError(t, err)
}

// changeParent changes the Deployment's spec, which resolves its drifts.
func (d drifted) changeParent(t *testing.T) {
	t.Helper()
	patch := []byte(`{"spec":{"template":{"metadata":{"labels":{"rev":"2"}}}}}`)
	require.NoError(t, harness.Kube().Patch(context.Background(), d.dep, ctrlclient.RawPatch("application/merge-patch+json", patch)))
}

func (d drifted) status(t *testing.T) workflows.DriftStatus {
	t.Helper()
	v, err := harness.Temporal().QueryWorkflow(context.Background(), d.workflowID(), "", workflows.QueryStatus)
	require.NoError(t, err)
	var st workflows.DriftStatus
	require.NoError(t, v.Get(&st))
	return st
}

// approvalRequest waits for the drift's RemediationApprovalRequest.
func (d drifted) approvalRequest(t *testing.T) *v1alpha1.RemediationApprovalRequest {
	t.Helper()
	var found *v1alpha1.RemediationApprovalRequest
	require.Eventually(t, func() bool {
		var list v1alpha1.RemediationApprovalRequestList
		require.NoError(t, harness.Kube().List(context.Background(), &list, ctrlclient.InNamespace(d.dep.Namespace)))
		for i := range list.Items {
			if list.Items[i].Spec.WorkflowID == d.workflowID() {
				found = &list.Items[i]
				return true
			}
		}
		return false
	}, driftTimeout, 50*time.Millisecond, "no approval request for %s", d.workflowID())
	return found
}

func (d drifted) parentAnnotation(t *testing.T, key string) string {
	t.Helper()
	dep := &appsv1.Deployment{}
	require.NoError(t, harness.Kube().Get(context.Background(), ctrlclient.ObjectKeyFromObject(d.dep), dep))
	return dep.Annotations[key]
}

func TestDriftWorkflowReportsDetectedThenResolvedWhenTheParentChanges(t *testing.T) {
	rcv := newReceiver(t)
	d := newDrift(t, to(rcv.URL))
	d.signalWithStart(t)
	// The webhook reports the same drift again while the controller retries: one report.
	d.signalWithStart(t)

	reports := rcv.waitPhases(t, kv1.DriftReportDetected)
	rep := reports[0]
	assert.Equal(t, kv1.DriftReportAPIVersion, rep.APIVersion)
	assert.Equal(t, kv1.DriftReportKind, rep.Kind)
	assert.Equal(t, d.signal.ID, rep.Spec.ID)
	assert.Equal(t, kv1.DriftObjectReference{APIVersion: "apps/v1", Kind: "Deployment", Namespace: d.dep.Namespace, Name: "web",
		UID: string(d.dep.UID), Generation: 1}, rep.Spec.Parent)
	assert.Equal(t, d.rs.Name, rep.Spec.Child.Name)
	assert.Equal(t, kv1.DriftRequestContext{User: d.signal.User, Groups: d.signal.Groups, Operation: "UPDATE"}, rep.Spec.Request)
	var newRS appsv1.ReplicaSet
	require.NoError(t, json.Unmarshal(rep.Spec.NewObject, &newRS))
	assert.Equal(t, int32(3), *newRS.Spec.Replicas)

	st := d.status(t)
	require.Len(t, st.Open, 1)
	assert.Equal(t, d.signal.ID, st.Open[0].Signal.ID)

	// Stays open while nothing changes: a poll fired, and was handled (the
	// next poll's timer starts after it).
	harness.WaitSequence(t, d.workflowID(), driftTimeout, enumspb.EVENT_TYPE_TIMER_FIRED, enumspb.EVENT_TYPE_TIMER_STARTED)
	assert.Equal(t, []kv1.DriftReportPhase{kv1.DriftReportDetected}, rcv.phases())

	d.changeParent(t)
	rcv.waitPhases(t, kv1.DriftReportDetected, kv1.DriftReportResolved)
	harness.WaitClosed(t, d.workflowID(), driftTimeout)
	var res workflows.DriftResult
	require.NoError(t, harness.Temporal().GetWorkflow(context.Background(), d.workflowID(), "").Get(context.Background(), &res))
	assert.Equal(t, []workflows.ResolvedDrift{{ID: d.signal.ID, Reason: "ParentChanged"}}, res.Closed)
	harness.ReplayHistory(t, d.workflowID(), "drift-resolved.json")
}

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

// A drift detected under a snooze is silent until the snooze expires, and
// reported Detected by the first poll after, as it is still open. A change an
// approval let through opens no drift and is reported Resolved at once.
func TestDriftWorkflowReportsASnoozedDriftWhenTheSnoozeExpires(t *testing.T) {
	ctx := context.Background()
	rcv := newReceiver(t)
	d := newDrift(t, to(rcv.URL))
	d.signal.Snoozed = true
	d.signal.SnoozedUntil = time.Now().Add(time.Second).UTC()
	d.signalWithStart(t)
	require.Eventually(t, func() bool { return len(d.status(t).Open) == 1 }, driftTimeout, 50*time.Millisecond, "the drift is not tracked")
	harness.WaitHandled(t, d.workflowID(), driftTimeout)
	assert.Zero(t, harness.ActivitiesScheduled(t, d.workflowID(), "PostReport"), "snoozed: nothing is reported")
	assert.Empty(t, rcv.phases(), "snoozed")
	reports := rcv.waitPhases(t, kv1.DriftReportDetected)
	assert.Equal(t, d.signal.ID, reports[0].Spec.ID)
	require.True(t, d.status(t).Open[0].Unsnoozed)

	through := d.signal
	through.ID, through.Snoozed, through.SnoozedUntil, through.Approved = "0123456789abcdef", false, time.Time{}, true
	require.NoError(t, harness.Temporal().SignalWorkflow(ctx, d.workflowID(), "", workflows.SignalDrift, through))
	reports = rcv.waitPhases(t, kv1.DriftReportDetected, kv1.DriftReportResolved)
	assert.Equal(t, through.ID, reports[1].Spec.ID)

	d.changeParent(t)
	reports = rcv.waitPhases(t, kv1.DriftReportDetected, kv1.DriftReportResolved, kv1.DriftReportResolved)
	assert.Equal(t, d.signal.ID, reports[2].Spec.ID)
	harness.WaitClosed(t, d.workflowID(), driftTimeout)
	harness.ReplayHistory(t, d.workflowID(), "drift-unsnoozed.json")
}

// The webhook repeats an open drift each time the controller retries: past
// its signal budget the run continues as new with its approval request open,
// and the next run takes the decision on that same request.
func TestDriftWorkflowContinuesAsNewWithItsRequestOpen(t *testing.T) {
	ctx := context.Background()
	rcv, d, rar := askingDrift(t)
	desc, err := harness.Temporal().DescribeWorkflowExecution(ctx, d.workflowID(), "")
	require.NoError(t, err)
	firstRun := desc.GetWorkflowExecutionInfo().GetExecution().GetRunId()
	for range 200 {
		require.NoError(t, harness.Temporal().SignalWorkflow(ctx, d.workflowID(), "", workflows.SignalDrift, d.signal))
	}
	require.Eventually(t, func() bool {
		desc, err := harness.Temporal().DescribeWorkflowExecution(ctx, d.workflowID(), firstRun)
		require.NoError(t, err)
		return desc.GetWorkflowExecutionInfo().GetStatus() == enumspb.WORKFLOW_EXECUTION_STATUS_CONTINUED_AS_NEW
	}, driftTimeout, 100*time.Millisecond, "the run continued as new")
	st := d.status(t)
	require.Len(t, st.Open, 1)
	assert.Equal(t, rar.Name, st.Open[0].ApprovalRequest, "the same request")

	require.NoError(t, harness.Temporal().SignalWorkflow(ctx, d.workflowID(), "", workflows.SignalApprove,
		workflows.ApprovalSignal{Approver: "alice", Request: rar.Name}))
	rcv.waitPhases(t, kv1.DriftReportDetected, kv1.DriftReportResolved)
	harness.WaitClosed(t, d.workflowID(), driftTimeout)
	assert.Equal(t, 2, harness.ReplayChain(t, d.workflowID(), "drift-continued-as-new.json"))
}
