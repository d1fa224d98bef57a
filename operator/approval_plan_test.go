package operator

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/remedy-dev/remedy/api/v1alpha1"
	"github.com/remedy-dev/remedy/workflows"
)

// Long because it is a table: one row per approval request state the plan answers.
func TestPlanApproval(t *testing.T) {
	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	waiting, gone := approvalSubject{uid: "u1"}, approvalSubject{gone: true}
	base := func(status v1alpha1.RemediationApprovalRequestStatus) *v1alpha1.RemediationApprovalRequest {
		return &v1alpha1.RemediationApprovalRequest{
			ObjectMeta: metav1.ObjectMeta{Name: "scale-web-approval", Namespace: "shop", Generation: 1},
			Spec: v1alpha1.RemediationApprovalRequestSpec{
				SubjectRef: v1alpha1.ObjectRef{Kind: "KubernetesExecution", Name: "scale-web"}, WorkflowID: "kexec/shop/scale-web/u1",
				ApprovalContext: v1alpha1.ApprovalContext{Action: "scale", Target: v1alpha1.ObjectRef{APIVersion: "apps/v1", Kind: "Deployment", Namespace: "shop", Name: "web"}},
				RequiredBy:      metav1.NewTime(now.Add(14*time.Minute + 10*time.Second)),
			},
			Status: status,
		}
	}
	t.Run("new request: Requested event with the commands, coarse timeRemaining", func(t *testing.T) {
		p := planApproval(base(v1alpha1.RemediationApprovalRequestStatus{}), waiting, runLook{}, now)
		require.NotNil(t, p.status)
		assert.Equal(t, "14m0s", p.status.TimeRemaining)
		assert.Equal(t, 25*time.Second, p.requeueAfter, "requeued when the value next changes")
		require.Len(t, p.events, 1)
		assert.Equal(t, "Requested", p.events[0].reason)
		assert.Contains(t, p.events[0].note, "temporal workflow signal --workflow-id kexec/shop/scale-web/u1 --name approve")
		assert.Contains(t, p.events[0].note, "temporal workflow update execute --workflow-id kexec/shop/scale-web/u1 --name decide")
		assert.Contains(t, p.events[0].note, "kubectl patch rar scale-web-approval -n shop --subresource=status")
		assert.Contains(t, p.events[0].note, `"request":"scale-web-approval"`)
		assert.Less(t, strings.Index(p.events[0].note, "--name decide"), strings.Index(p.events[0].note, "--name approve"), "the decide update comes first")
		assert.NotContains(t, p.events[0].note, "other than")
		assert.Empty(t, p.signal)
	})
	t.Run("a request that needs another approver says so in the Requested event", func(t *testing.T) {
		rar := base(v1alpha1.RemediationApprovalRequestStatus{})
		rar.Spec.ApprovalContext.Requester, rar.Spec.ApprovalContext.RequireDistinctApprover = "alice", true
		p := planApproval(rar, waiting, runLook{}, now)
		require.Len(t, p.events, 1)
		assert.Contains(t, p.events[0].note, "; an approver other than the requester alice must approve. Approve:")
	})
	t.Run("unchanged within a step: no write, no event", func(t *testing.T) {
		first := planApproval(base(v1alpha1.RemediationApprovalRequestStatus{}), waiting, runLook{}, now)
		p := planApproval(base(*first.status), waiting, runLook{}, now.Add(5*time.Second))
		assert.Nil(t, p.status)
		assert.Empty(t, p.events)
	})
	t.Run("requested kubectl decision is relayed once as a signal naming the request and its namespace", func(t *testing.T) {
		rar := base(v1alpha1.RemediationApprovalRequestStatus{RequestedDecision: &v1alpha1.RequestedDecision{
			Decision: v1alpha1.DecisionRejected, RequestedBy: "carol", RequestedAt: metav1.NewTime(now), Message: "no"}})
		p := planApproval(rar, waiting, runLook{}, now)
		assert.Equal(t, workflows.SignalReject, p.signal)
		assert.Equal(t, workflows.ApprovalSignal{Approver: "carol", Reason: "no", Via: "kubectl", Request: "scale-web-approval", Namespace: "shop"}, p.payload,
			"the relay names its request and namespace, so it cannot decide a newer or another one")
		assert.Empty(t, p.events, "the decision's Event comes once the workflow recorded it")
		require.NotNil(t, p.status)
		assert.Equal(t, reasonRelayed, meta.FindStatusCondition(p.status.Conditions, v1alpha1.ConditionReady).Reason)
		rar.Status = *p.status
		again := planApproval(rar, waiting, runLook{}, now)
		assert.Empty(t, again.signal)
		assert.Empty(t, again.events)
	})
	t.Run("the workflow's record of the relayed decision", func(t *testing.T) {
		req := &v1alpha1.RequestedDecision{Decision: v1alpha1.DecisionRejected, RequestedBy: "carol", RequestedAt: metav1.NewTime(now), Message: "no"}
		p := planApproval(base(v1alpha1.RemediationApprovalRequestStatus{RequestedDecision: req, Decision: v1alpha1.DecisionRejected, DecidedBy: "carol",
			DecidedVia: v1alpha1.DecidedViaKubectl, DecisionMessage: "no"}), waiting, runLook{}, now)
		assert.Empty(t, p.signal)
		require.Len(t, p.events, 1)
		assert.Equal(t, "Rejected", p.events[0].reason)
		assert.Equal(t, "Rejected by carol via kubectl: no", p.events[0].note)
	})
	t.Run("a kubectl decision that lost to the workflow's first decision is reported", func(t *testing.T) {
		req := &v1alpha1.RequestedDecision{Decision: v1alpha1.DecisionApproved, RequestedBy: "carol", RequestedAt: metav1.NewTime(now)}
		rar := base(v1alpha1.RemediationApprovalRequestStatus{RequestedDecision: req, Decision: v1alpha1.DecisionRejected, DecidedBy: "bob",
			DecidedVia: v1alpha1.DecidedViaSignal},
		)
		rar.Status.Conditions = []metav1.Condition{{Type: v1alpha1.ConditionReady, Status: metav1.ConditionUnknown, Reason: reasonRelayed}}
		p := planApproval(rar, waiting, runLook{}, now)
		assert.Empty(t, p.signal)
		require.Len(t, p.events, 2)
		assert.Equal(t, "Rejected", p.events[0].reason)
		assert.Equal(t, reasonDecisionIgnored, p.events[1].reason)
		assert.Equal(t, "Approved by carol via kubectl at 2026-01-01T12:00:00Z did not count: the workflow had already taken Rejected by bob via temporal-signal (the first decision wins)",
			p.events[1].note)
		assert.Equal(t, metav1.ConditionTrue, meta.FindStatusCondition(p.status.Conditions, v1alpha1.ConditionReady).Status)
	})
	t.Run("decision recorded by the workflow is not relayed back", func(t *testing.T) {
		p := planApproval(base(v1alpha1.RemediationApprovalRequestStatus{Decision: v1alpha1.DecisionExpired, DecidedBy: "timer", DecidedVia: v1alpha1.DecidedViaTimer}), waiting, runLook{}, now)
		assert.Empty(t, p.signal)
		assert.Equal(t, "Expired", p.events[0].reason)
		assert.Equal(t, metav1.ConditionTrue, meta.FindStatusCondition(p.status.Conditions, v1alpha1.ConditionReady).Status)
	})
	t.Run("past requiredBy the workflow's timer decides", func(t *testing.T) {
		p := planApproval(base(v1alpha1.RemediationApprovalRequestStatus{}), gone, runLook{}, now.Add(time.Hour))
		assert.Equal(t, approvalPlan{}, p)
	})
	t.Run("subject gone before a decision", func(t *testing.T) {
		p := planApproval(base(v1alpha1.RemediationApprovalRequestStatus{TimeRemaining: "30s"}), gone, runLook{}, now)
		assert.Equal(t, reasonCanceled, p.events[0].reason)
		assert.Empty(t, p.status.TimeRemaining)
		assert.Equal(t, time.Duration(0), p.requeueAfter)
	})
	t.Run("a workflow ID of another namespace is refused, with a Warning, and nothing is relayed", func(t *testing.T) {
		rar := base(v1alpha1.RemediationApprovalRequestStatus{RequestedDecision: &v1alpha1.RequestedDecision{
			Decision: v1alpha1.DecisionApproved, RequestedBy: "mallory", RequestedAt: metav1.NewTime(now)}})
		rar.Spec.WorkflowID = "kexec/payments/scale-web/u9"
		p := planApproval(rar, waiting, runLook{}, now)
		assert.Empty(t, p.signal)
		require.Len(t, p.events, 1)
		assert.Equal(t, corev1.EventTypeWarning, p.events[0].eventType)
		assert.Equal(t, reasonWorkflowMismatch, p.events[0].reason)
		assert.Equal(t, "spec.workflowID kexec/payments/scale-web/u9 is not a workflow of this request's namespace and subject (want kexec/shop/scale-web/u1); decisions are not relayed",
			p.events[0].note)
		c := meta.FindStatusCondition(p.status.Conditions, v1alpha1.ConditionReady)
		assert.Equal(t, metav1.ConditionFalse, c.Status)
		assert.Equal(t, reasonWorkflowMismatch, c.Reason)
		rar.Status = *p.status
		again := planApproval(rar, waiting, runLook{}, now)
		assert.Empty(t, again.signal)
		assert.Empty(t, again.events, "warned once")
	})
}

func TestExpectedWorkflowIDs(t *testing.T) {
	rar := func(subject v1alpha1.ObjectRef, owners ...metav1.OwnerReference) *v1alpha1.RemediationApprovalRequest {
		return &v1alpha1.RemediationApprovalRequest{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "r", OwnerReferences: owners},
			Spec: v1alpha1.RemediationApprovalRequestSpec{SubjectRef: subject}}
	}
	kexec := v1alpha1.ObjectRef{APIVersion: "remedy.dev/v1alpha1", Kind: "KubernetesExecution", Namespace: "shop", Name: "scale-web"}
	web := v1alpha1.ObjectRef{APIVersion: "apps/v1", Kind: "Deployment", Namespace: "shop", Name: "web"}
	for _, tc := range []struct {
		name string
		rar  *v1alpha1.RemediationApprovalRequest
		uid  string
		want []string
	}{
		{name: "an execution's run, by the UID read from the API server", rar: rar(kexec), uid: "u1", want: []string{"kexec/shop/scale-web/u1"}},
		{name: "no execution, no run", rar: rar(kexec)},
		{name: "a workload's reload run", rar: rar(web), want: []string{"reload/shop/Deployment/web"}},
		{name: "and the drift run of the drifted parent that owns the request",
			rar:  rar(web, metav1.OwnerReference{APIVersion: "apps/v1", Kind: "Deployment", Name: "web", UID: "p1"}, metav1.OwnerReference{Kind: "ConfigMap", Name: "x", UID: "c1"}),
			want: []string{"reload/shop/Deployment/web", "drift/p1"}},
		{name: "a subject in another namespace has none", rar: rar(v1alpha1.ObjectRef{Kind: "KubernetesExecution", Namespace: "payments", Name: "scale-web"}), uid: "u1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.want, expectedWorkflowIDs(tc.rar, tc.uid))
		})
	}
}

// REMAINING counts to the nearest second in the last minute, ten seconds in
// the last ten minutes, half minute before (a 10-minute request reads 10m0s
// whether the operator looks a little early or late); the target column
// reads kind/name.
func TestPlanApprovalRemaining(t *testing.T) {
	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		left        time.Duration
		want        string
		wantRequeue time.Duration
	}{
		{300 * time.Millisecond, "1s", 300 * time.Millisecond},
		{7 * time.Second, "7s", 500 * time.Millisecond},
		{7*time.Second + 300*time.Millisecond, "7s", 800 * time.Millisecond},
		{95 * time.Second, "1m30s", 10 * time.Second},
		{10*time.Minute - 300*time.Millisecond, "10m0s", 4*time.Second + 700*time.Millisecond},
		{10*time.Minute + 400*time.Millisecond, "10m0s", 15*time.Second + 400*time.Millisecond},
		{14*time.Minute + 10*time.Second, "14m0s", 25 * time.Second},
	} {
		t.Run(tc.left.String(), func(t *testing.T) {
			rar := &v1alpha1.RemediationApprovalRequest{
				ObjectMeta: metav1.ObjectMeta{Name: "scale-web-approval", Namespace: "shop", Generation: 1},
				Spec: v1alpha1.RemediationApprovalRequestSpec{
					SubjectRef: v1alpha1.ObjectRef{Kind: "KubernetesExecution", Name: "scale-web"}, WorkflowID: "kexec/shop/scale-web/u1",
					ApprovalContext: v1alpha1.ApprovalContext{Action: "scale", Target: v1alpha1.ObjectRef{APIVersion: "apps/v1", Kind: "Deployment", Namespace: "shop", Name: "web"}},
					RequiredBy:      metav1.NewTime(now.Add(tc.left)),
				},
			}
			p := planApproval(rar, approvalSubject{uid: "u1"}, runLook{}, now)
			require.NotNil(t, p.status)
			assert.Equal(t, tc.want, p.status.TimeRemaining)
			assert.Equal(t, tc.wantRequeue, p.requeueAfter)
			assert.Equal(t, "Deployment/web", p.status.Target)
		})
	}
}
