package operator

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/remedy-dev/remedy/api/v1alpha1"
	"github.com/remedy-dev/remedy/workflows"
)

func TestPlanApproval(t *testing.T) {
	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
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
		p := planApproval(base(v1alpha1.RemediationApprovalRequestStatus{}), false, now)
		require.NotNil(t, p.status)
		assert.Equal(t, "14m30s", p.status.TimeRemaining)
		assert.Equal(t, 10*time.Second, p.requeueAfter, "requeued when the value next changes")
		require.Len(t, p.events, 1)
		assert.Equal(t, "Requested", p.events[0].reason)
		assert.Contains(t, p.events[0].note, "temporal workflow signal --workflow-id kexec/shop/scale-web/u1 --name approve")
		assert.Contains(t, p.events[0].note, "temporal workflow update execute --workflow-id kexec/shop/scale-web/u1 --name decide")
		assert.Contains(t, p.events[0].note, "kubectl patch rar scale-web-approval -n shop --subresource=status")
		assert.Contains(t, p.events[0].note, `"request":"scale-web-approval"`)
		assert.Empty(t, p.signal)
	})
	t.Run("unchanged within a step: no write, no event", func(t *testing.T) {
		first := planApproval(base(v1alpha1.RemediationApprovalRequestStatus{}), false, now)
		p := planApproval(base(*first.status), false, now.Add(5*time.Second))
		assert.Nil(t, p.status)
		assert.Empty(t, p.events)
	})
	t.Run("kubectl decision is relayed once as a signal", func(t *testing.T) {
		rar := base(v1alpha1.RemediationApprovalRequestStatus{Decision: v1alpha1.DecisionRejected, DecidedBy: "carol", DecidedVia: v1alpha1.DecidedViaKubectl, DecisionMessage: "no"})
		p := planApproval(rar, false, now)
		assert.Equal(t, workflows.SignalReject, p.signal)
		assert.Equal(t, workflows.ApprovalSignal{Approver: "carol", Reason: "no", Via: "kubectl", Request: "scale-web-approval"}, p.payload,
			"the relay names its request, so it cannot decide a newer one")
		require.Len(t, p.events, 1)
		assert.Equal(t, "Rejected", p.events[0].reason)
		assert.Equal(t, "Rejected by carol via kubectl: no", p.events[0].note)
		rar.Status = *p.status
		again := planApproval(rar, false, now)
		assert.Empty(t, again.signal)
		assert.Nil(t, again.status)
	})
	t.Run("decision recorded by the workflow is not relayed back", func(t *testing.T) {
		p := planApproval(base(v1alpha1.RemediationApprovalRequestStatus{Decision: v1alpha1.DecisionExpired, DecidedBy: "timer", DecidedVia: v1alpha1.DecidedViaTimer}), false, now)
		assert.Empty(t, p.signal)
		assert.Equal(t, "Expired", p.events[0].reason)
		assert.Equal(t, metav1.ConditionTrue, meta.FindStatusCondition(p.status.Conditions, v1alpha1.ConditionReady).Status)
	})
	t.Run("past requiredBy the workflow's timer decides", func(t *testing.T) {
		p := planApproval(base(v1alpha1.RemediationApprovalRequestStatus{}), true, now.Add(time.Hour))
		assert.Equal(t, approvalPlan{}, p)
	})
	t.Run("subject gone before a decision", func(t *testing.T) {
		p := planApproval(base(v1alpha1.RemediationApprovalRequestStatus{TimeRemaining: "30s"}), true, now)
		assert.Equal(t, reasonCanceled, p.events[0].reason)
		assert.Empty(t, p.status.TimeRemaining)
		assert.Equal(t, time.Duration(0), p.requeueAfter)
	})
}
