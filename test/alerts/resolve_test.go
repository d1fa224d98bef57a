package alerts

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/client"
	ctrlclient "sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/remedy-dev/remedy/api/v1alpha1"
	"github.com/remedy-dev/remedy/internal/alertmanager"
	"github.com/remedy-dev/remedy/test/harness"
	"github.com/remedy-dev/remedy/workflows"
)

// A resolve withdraws the approval request an alert's run waits on: no
// RemediationRequest is ever created.
func TestResolveCancelsAPendingApproval(t *testing.T) {
	ns := tenant(t, "web")
	r := restartRule(ns, "approve", "NeedsApproval")
	r.Spec.Approval = &v1alpha1.ApprovalSpec{Required: true, Timeout: v1alpha1.DurationOf(time.Hour)}
	rule := createRule(t, r)
	l := labels(ns, "NeedsApproval", "deployment", "web")
	fp := alertmanager.Fingerprint(l)
	fire(t, l)
	ruleStatus(t, rule, 60*time.Second, func(r *v1alpha1.RemediationRule) bool {
		rec := record(r, fp)
		return rec != nil && rec.Phase == v1alpha1.AlertWaiting
	})
	var rars v1alpha1.RemediationApprovalRequestList
	require.NoError(t, harness.Kube().List(context.Background(), &rars, ctrlclient.InNamespace(ns)))
	require.Len(t, rars.Items, 1)
	assert.Equal(t, v1alpha1.AlertWorkflowID(ns, rule.Name, fp), rars.Items[0].Spec.WorkflowID)

	resolve(t, l)
	got := ruleStatus(t, rule, 60*time.Second, func(r *v1alpha1.RemediationRule) bool {
		rec := record(r, fp)
		return rec != nil && rec.Phase == v1alpha1.AlertCanceled
	})
	assert.Equal(t, v1alpha1.ReasonResolved, record(got, fp).Reason)
	rar := harness.Eventually(t, &rars.Items[0], 30*time.Second, func(a *v1alpha1.RemediationApprovalRequest) bool { return a.Status.Decision != "" })
	assert.Equal(t, v1alpha1.DecisionExpired, rar.Status.Decision)
	assert.Contains(t, rar.Status.DecisionMessage, "the alert resolved")
	harness.WaitClosed(t, v1alpha1.AlertWorkflowID(ns, rule.Name, fp), 30*time.Second)
	assert.Empty(t, requestsOf(t, ns, rule.Name), "nothing ran")
	assert.Equal(t, int64(0), got.Status.RunsStarted)
	harness.ReplayHistory(t, v1alpha1.AlertWorkflowID(ns, rule.Name, fp), "alert-resolved-approval.json")
}

// A rejected approval runs nothing and records the refusal.
func TestRejectedApprovalRunsNothing(t *testing.T) {
	ns := tenant(t, "web")
	r := restartRule(ns, "reject", "Rejected")
	r.Spec.Approval = &v1alpha1.ApprovalSpec{Required: true}
	rule := createRule(t, r)
	l := labels(ns, "Rejected", "deployment", "web")
	fp := alertmanager.Fingerprint(l)
	id := v1alpha1.AlertWorkflowID(ns, rule.Name, fp)
	fire(t, l)
	ruleStatus(t, rule, 60*time.Second, func(r *v1alpha1.RemediationRule) bool {
		rec := record(r, fp)
		return rec != nil && rec.Phase == v1alpha1.AlertWaiting
	})
	require.NoError(t, harness.Temporal().SignalWorkflow(context.Background(), id, "", workflows.SignalReject,
		workflows.ApprovalSignal{Approver: "oncall-bob", Reason: "not now"}))
	got := ruleStatus(t, rule, 60*time.Second, func(r *v1alpha1.RemediationRule) bool {
		rec := record(r, fp)
		return rec != nil && rec.Phase == v1alpha1.AlertRefused
	})
	assert.Equal(t, v1alpha1.ReasonRejected, record(got, fp).Reason)
	assert.Contains(t, record(got, fp).Message, "oncall-bob")
	assert.Empty(t, requestsOf(t, ns, rule.Name))
	resolve(t, l)
	harness.WaitClosed(t, id, 30*time.Second)
	harness.ReplayHistory(t, id, "alert-rejected.json")
}

// lostResolves drops every resolve the receiver would signal, as a lost
// notification would: the run must find the resolve by asking Alertmanager.
type lostResolves struct{ client.Client }

func (lostResolves) SignalWorkflow(context.Context, string, string, string, any) error { return nil }

func TestLostResolveIsFoundByTheSweep(t *testing.T) {
	ns := tenant(t, "web")
	rule := createRule(t, restartRule(ns, "sweep", "Swept"))
	l := labels(ns, "Swept", "deployment", "web")
	fp := alertmanager.Fingerprint(l)
	fire(t, l)
	ruleStatus(t, rule, 60*time.Second, func(r *v1alpha1.RemediationRule) bool {
		rec := record(r, fp)
		return rec != nil && rec.Phase == v1alpha1.AlertDone
	})
	harness.SetAlertsTemporal(lostResolves{harness.Temporal()})
	t.Cleanup(func() { harness.SetAlertsTemporal(nil) })
	resolve(t, l)
	harness.WaitClosed(t, v1alpha1.AlertWorkflowID(ns, rule.Name, fp), 30*time.Second)
}
