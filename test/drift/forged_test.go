package drift

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"
	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrlclient "sigs.k8s.io/controller-runtime/pkg/client"

	kv1 "github.com/remedy-dev/remedy/api/kausality/v1alpha1"
	"github.com/remedy-dev/remedy/api/v1alpha1"
	"github.com/remedy-dev/remedy/test/harness"
	"github.com/remedy-dev/remedy/workflows"
)

// listener is a local address a forged drift names; it must receive nothing.
type listener struct {
	*httptest.Server
	hits atomic.Int32
}

func newListener(t *testing.T) *listener {
	l := &listener{}
	l.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		l.hits.Add(1)
		w.WriteHeader(http.StatusTeapot)
		_, _ = w.Write([]byte("secret-from-the-inside"))
	}))
	t.Cleanup(l.Close)
	return l
}

// forge sends the drift as someone who reaches Temporal would: by
// signal-with-start, with the callback URL and the approval ask the old
// signal took from its payload.
func (d drifted) forge(t *testing.T, url string) {
	t.Helper()
	raw, err := json.Marshal(d.signal)
	require.NoError(t, err)
	var payload map[string]any
	require.NoError(t, json.Unmarshal(raw, &payload))
	payload["callbackURLs"], payload["requestApproval"] = []string{url}, true
	_, err = harness.Temporal().SignalWithStartWorkflow(context.Background(), d.workflowID(), workflows.SignalDrift, payload,
		client.StartWorkflowOptions{ID: d.workflowID(), TaskQueue: workflows.TaskQueue}, "DriftWorkflow", workflows.DriftInput{Parent: d.signal.Parent})
	require.NoError(t, err)
	t.Cleanup(func() {
		_ = harness.Temporal().TerminateWorkflow(context.Background(), d.workflowID(), "", "test ended")
	})
}

// assertNothingWritten: no approval request for the drift's workflow, and
// no kausality decision on its parent.
func (d drifted) assertNothingWritten(t *testing.T) {
	t.Helper()
	var list v1alpha1.RemediationApprovalRequestList
	require.NoError(t, harness.Kube().List(context.Background(), &list, ctrlclient.InNamespace(d.dep.Namespace)))
	for _, r := range list.Items {
		assert.NotEqual(t, d.workflowID(), r.Spec.WorkflowID, "approval request %s", r.Name)
	}
	dep := &appsv1.Deployment{}
	if err := harness.Kube().Get(context.Background(), ctrlclient.ObjectKeyFromObject(d.dep), dep); err == nil {
		assert.Empty(t, dep.Annotations[kv1.AnnotationApprovals])
		assert.Empty(t, dep.Annotations[kv1.AnnotationRejections])
	}
}

// activityFailed waits until the workflow's history holds a failed attempt
// of activity with the failure type reason.
func activityFailed(t *testing.T, workflowID, activity, reason string) {
	t.Helper()
	require.Eventually(t, func() bool {
		scheduled := map[int64]string{}
		it := harness.Temporal().GetWorkflowHistory(context.Background(), workflowID, "", false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
		for it.HasNext() {
			e, err := it.Next()
			require.NoError(t, err)
			if a := e.GetActivityTaskScheduledEventAttributes(); a != nil {
				scheduled[e.GetEventId()] = a.GetActivityType().GetName()
			}
			if a := e.GetActivityTaskFailedEventAttributes(); a != nil && scheduled[a.GetScheduledEventId()] == activity &&
				a.GetFailure().GetApplicationFailureInfo().GetType() == reason {
				return true
			}
		}
		return false
	}, driftTimeout, 200*time.Millisecond, "%s never failed %s in %s", activity, reason, workflowID)
}

// A forged drift of a parent that does not exist, or whose spec is not
// what the signal says, is ignored: its run ends having POSTed nothing, not
// even to URLs configured for the namespace, and written nothing.
func TestForgedDriftOfAnUnconfirmedParentPostsAndWritesNothing(t *testing.T) {
	for _, tc := range []struct {
		name  string
		forge func(d *drifted)
	}{
		{"no such parent", func(d *drifted) {
			uid := make([]byte, 16)
			_, _ = rand.Read(uid)
			d.signal.Parent.Name, d.signal.Parent.UID = "ghost", hex.EncodeToString(uid)
		}},
		{"facts that do not match the live parent", func(d *drifted) { d.signal.ParentSpecHash = "forged" }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l := newListener(t)
			d := newDrift(t, kv1.DriftReporting{CallbackURLs: []string{l.URL}, RequestApproval: true})
			tc.forge(&d)
			d.dep.UID = types.UID(d.signal.Parent.UID) // the workflow is the forged parent's
			d.forge(t, l.URL)
			activityFailed(t, d.workflowID(), "VerifyDrift", v1alpha1.ReasonSubjectMismatch)
			harness.WaitClosed(t, d.workflowID(), driftTimeout)
			var res workflows.DriftResult
			require.NoError(t, harness.Temporal().GetWorkflow(context.Background(), d.workflowID(), "").Get(context.Background(), &res))
			assert.Empty(t, res.Status.Open)
			assert.Empty(t, res.Status.Settings.CallbackURLs, "the run never learned where reports go")
			assert.Zero(t, l.hits.Load(), "the listener received nothing")
			d.assertNothingWritten(t)
		})
	}
}

// A forged drift of a real parent, with its true facts, is tracked, but the
// signal's callback URL and approval ask are ignored: reports go only where
// the worker's configuration says (here the suite's --drift-callback-url).
func TestForgedDriftCallbackURLAndApprovalAskAreIgnored(t *testing.T) {
	l := newListener(t)
	d := newDrift(t, kv1.DriftReporting{})
	d.forge(t, l.URL)
	require.Eventually(t, func() bool { return len(reports.find(d.rs, kv1.DriftReportDetected)) > 0 }, driftTimeout, 100*time.Millisecond,
		"the configured receiver gets the report")
	st := d.status(t)
	require.Len(t, st.Open, 1)
	assert.Empty(t, st.Open[0].ApprovalRequest, "no approval asked")
	d.changeParent(t)
	harness.WaitClosed(t, d.workflowID(), driftTimeout)
	assert.Zero(t, l.hits.Load(), "the signal's URL received nothing")
	d.assertNothingWritten(t)
}

// kube-system is protected: even where a policy asks for approval there, a
// drift run creates no approval request in it, so nothing can be approved
// or rejected onto its parents, and a forged decision writes nothing.
func TestForgedDriftInKubeSystemAsksAndWritesNothing(t *testing.T) {
	l := newListener(t)
	reportTo(t, "kube-system", kv1.DriftReporting{RequestApproval: true})
	name := make([]byte, 3)
	_, _ = rand.Read(name)
	d := driftIn(t, "kube-system", "forged-"+hex.EncodeToString(name))
	t.Cleanup(func() { _ = harness.Kube().Delete(context.Background(), d.dep) })
	d.forge(t, l.URL)
	activityFailed(t, d.workflowID(), "CreateApprovalRequest", v1alpha1.ReasonProtectedNamespace)
	require.NoError(t, harness.Temporal().SignalWorkflow(context.Background(), d.workflowID(), "", workflows.SignalApprove,
		workflows.ApprovalSignal{Approver: "mallory", Request: workflows.DriftApprovalRequestName(d.signal.ID, time.Now())}))
	require.NoError(t, harness.Temporal().SignalWorkflow(context.Background(), d.workflowID(), "", workflows.SignalReject,
		workflows.ApprovalSignal{Approver: "mallory", Reason: "forged"}))
	harness.WaitHandled(t, d.workflowID(), driftTimeout) // both signals reached the workflow code
	assert.Len(t, d.status(t).Open, 1, "the drift is tracked, unasked")
	assert.Zero(t, l.hits.Load(), "the signal's URL received nothing")
	d.assertNothingWritten(t)
}
