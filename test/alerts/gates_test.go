package alerts

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	ctrlclient "sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/remedy-dev/remedy/api/v1alpha1"
	"github.com/remedy-dev/remedy/internal/alertmanager"
	"github.com/remedy-dev/remedy/test/harness"
	"github.com/remedy-dev/remedy/workflows"
)

// An alert inside a freeze window waits on a durable timer, says until
// when in the rule's status, and runs when the window opens.
func TestFreezeHoldsAnAlertUntilTheWindowOpens(t *testing.T) {
	now := time.Now().UTC()
	if midnight := now.Truncate(24 * time.Hour).Add(24 * time.Hour); midnight.Sub(now) < 2*time.Minute {
		time.Sleep(midnight.Sub(now) + time.Second) // a window of "HH:MM" times does not wrap midnight; waits for the date, asserts nothing
		now = time.Now().UTC()
	}
	// Alertmanager's intervals have minute resolution: the window ends on
	// the minute 30 to 90 seconds from now.
	end := now.Add(30 * time.Second).Truncate(time.Minute).Add(time.Minute)
	ns := tenant(t, "web")
	r := restartRule(ns, "frozen", "FrozenLatency")
	r.Spec.Freeze = &v1alpha1.FreezeSpec{TimeIntervals: []v1alpha1.TimeInterval{{
		Times: []v1alpha1.TimeRange{{StartTime: now.Truncate(time.Minute).Format("15:04"), EndTime: end.Format("15:04")}}}}}
	rule := createRule(t, r)
	l := labels(ns, "FrozenLatency", "deployment", "web")
	fp := alertmanager.Fingerprint(l)
	held := firedAndHeld(t, rule, l, v1alpha1.ReasonFrozen)
	rec := record(held, fp)
	assert.Equal(t, v1alpha1.AlertQueued, rec.Phase)
	require.NotNil(t, rec.Until, "until when")
	assert.True(t, end.Equal(rec.Until.Time), "until %s, want %s", rec.Until.Time, end)
	assert.Contains(t, rec.Message, end.Format(time.RFC3339))
	require.True(t, time.Now().Before(end), "the test reached the window's end before the run was held")
	assert.Empty(t, requestsOf(t, ns, rule.Name), "nothing runs inside the freeze")

	done := ruleStatus(t, rule, time.Until(end)+60*time.Second, func(r *v1alpha1.RemediationRule) bool {
		rec := record(r, fp)
		return rec != nil && rec.Phase == v1alpha1.AlertDone
	})
	assert.Nil(t, record(done, fp).Until)
	rrs := requestsOf(t, ns, rule.Name)
	require.Len(t, rrs, 1)
	assert.False(t, rrs[0].CreationTimestamp.Time.Before(end.Truncate(time.Second)), "created %s, the window ended %s", rrs[0].CreationTimestamp, end)
	assert.Equal(t, v1alpha1.PhaseCompleted, rrs[0].Status.Phase, rrs[0].Status.Message)

	resolve(t, l)
	id := v1alpha1.AlertWorkflowID(ns, rule.Name, fp)
	harness.WaitClosed(t, id, 30*time.Second)
	harness.ReplayHistory(t, id, "alert-frozen.json")
}

// With action RequireApproval, an alert inside the freeze asks a person;
// once approved it runs, frozen or not.
func TestFreezeRequireApprovalAsksAPerson(t *testing.T) {
	ns := tenant(t, "web")
	r := restartRule(ns, "frozen-ask", "FrozenAsk")
	// An interval with no field set holds at every time.
	r.Spec.Freeze = &v1alpha1.FreezeSpec{Action: v1alpha1.FreezeRequireApproval, TimeIntervals: []v1alpha1.TimeInterval{{}}}
	rule := createRule(t, r)
	l := labels(ns, "FrozenAsk", "deployment", "web")
	fp := alertmanager.Fingerprint(l)
	id := v1alpha1.AlertWorkflowID(ns, rule.Name, fp)
	fire(t, l)
	asked := ruleStatus(t, rule, 60*time.Second, func(r *v1alpha1.RemediationRule) bool {
		rec := record(r, fp)
		return rec != nil && rec.Phase == v1alpha1.AlertWaiting
	})
	assert.Equal(t, v1alpha1.ReasonFrozen, record(asked, fp).Reason)
	assert.Contains(t, record(asked, fp).Message, "RequireApproval")
	require.NotNil(t, record(asked, fp).Until)
	var rars v1alpha1.RemediationApprovalRequestList
	require.NoError(t, harness.Kube().List(context.Background(), &rars, ctrlclient.InNamespace(ns)))
	require.Len(t, rars.Items, 1)
	assert.Contains(t, rars.Items[0].Spec.ApprovalContext.Reason, "change freeze")
	assert.Empty(t, requestsOf(t, ns, rule.Name))

	require.NoError(t, harness.Temporal().SignalWorkflow(context.Background(), id, "", workflows.SignalApprove,
		workflows.ApprovalSignal{Approver: "oncall-bob", Reason: "the fix cannot wait"}))
	ruleStatus(t, rule, 60*time.Second, func(r *v1alpha1.RemediationRule) bool {
		rec := record(r, fp)
		return rec != nil && rec.Phase == v1alpha1.AlertDone
	})
	require.Len(t, requestsOf(t, ns, rule.Name), 1)
	resolve(t, l)
	harness.WaitClosed(t, id, 30*time.Second)
	harness.ReplayHistory(t, id, "alert-frozen-approval.json")
}

// A freeze calendar or gate Alertmanager would not parse is refused at
// admission, naming the field.
func TestAGateAlertmanagerWouldNotParseIsRefusedAtAdmission(t *testing.T) {
	ns := tenant(t, "web")
	r := restartRule(ns, "badfreeze", "X")
	r.Spec.Freeze = &v1alpha1.FreezeSpec{TimeIntervals: []v1alpha1.TimeInterval{{Weekdays: []string{"funday"}}}}
	r.Spec.BlockWhileFiring = []string{`alertname=~"(`}
	err := impersonating(t, alertAuthor).Create(context.Background(), r)
	require.Error(t, err)
	assert.True(t, apierrors.IsInvalid(err), "want 422, got %v", err)
	assert.Contains(t, err.Error(), "spec.freeze.timeIntervals[0]")
	assert.Contains(t, err.Error(), "funday")
	assert.Contains(t, err.Error(), "spec.blockWhileFiring[0]")
}

// While an alert that blockWhileFiring matches fires in Alertmanager, the
// run waits and names it; once it resolves, the run acts.
func TestGateHoldsTheRunWhileTheBlockingAlertFires(t *testing.T) {
	ns := tenant(t, "web")
	blocking := map[string]string{"alertname": "ClusterDegraded", "cluster": ns}
	fire(t, blocking)
	r := restartRule(ns, "gated", "GatedLatency")
	r.Spec.BlockWhileFiring = []string{fmt.Sprintf(`alertname="ClusterDegraded",cluster=%q`, ns)}
	rule := createRule(t, r)
	l := labels(ns, "GatedLatency", "deployment", "web")
	fp := alertmanager.Fingerprint(l)
	held := firedAndHeld(t, rule, l, v1alpha1.ReasonGatedByAlert)
	assert.Equal(t, v1alpha1.AlertQueued, record(held, fp).Phase)
	assert.Contains(t, record(held, fp).Message, "alert ClusterDegraded ("+alertmanager.Fingerprint(blocking)+") fires")
	// The run waits on its gate's recheck timer, with nothing else to do.
	harness.WaitQuiet(t, v1alpha1.AlertWorkflowID(ns, rule.Name, fp), 30*time.Second)
	assert.Empty(t, requestsOf(t, ns, rule.Name), "nothing runs while the blocking alert fires")

	resolve(t, blocking)
	ruleStatus(t, rule, 60*time.Second, func(r *v1alpha1.RemediationRule) bool {
		rec := record(r, fp)
		return rec != nil && rec.Phase == v1alpha1.AlertDone
	})
	require.Len(t, requestsOf(t, ns, rule.Name), 1)

	resolve(t, l)
	id := v1alpha1.AlertWorkflowID(ns, rule.Name, fp)
	harness.WaitClosed(t, id, 30*time.Second)
	harness.ReplayHistory(t, id, "alert-gated.json")
}

// amSilence is a silence as Alertmanager's API reads it.
type amSilence struct {
	ID        string                        `json:"id"`
	Matchers  []alertmanager.SilenceMatcher `json:"matchers"`
	EndsAt    time.Time                     `json:"endsAt"`
	CreatedBy string                        `json:"createdBy"`
	Comment   string                        `json:"comment"`
	Status    struct {
		State string `json:"state"`
	} `json:"status"`
}

func silence(t *testing.T, id string) amSilence {
	t.Helper()
	resp, err := harness.Alertmanager().Client().Get(harness.Alertmanager().URL + "/api/v2/silence/" + id)
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	var s amSilence
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&s))
	return s
}

// While the remediation runs, the alert is silenced in Alertmanager with
// matchers equal to its labels; the silence is renewed, its ID is in the
// rule's status, and it is expired when the run ends.
func TestSilenceHeldWhileRemediating(t *testing.T) {
	ns := tenant(t, "web")
	r := restartRule(ns, "silenced", "SilencedLatency")
	// The step waits for a person, so the remediation runs long enough to renew its silence.
	r.Spec.Template.Steps[0].Execution.Approval = &v1alpha1.ApprovalSpec{Required: true}
	r.Spec.Silence = &v1alpha1.SilenceSpec{Enabled: true, Duration: v1alpha1.DurationOf(10 * time.Second)}
	rule := createRule(t, r)
	l := labels(ns, "SilencedLatency", "deployment", "web")
	fp := alertmanager.Fingerprint(l)
	id := v1alpha1.AlertWorkflowID(ns, rule.Name, fp)
	fire(t, l)

	running := ruleStatus(t, rule, 60*time.Second, func(r *v1alpha1.RemediationRule) bool {
		rec := record(r, fp)
		return rec != nil && rec.Phase == v1alpha1.AlertRunning
	})
	sid := record(running, fp).Silence
	require.NotEmpty(t, sid, "the silence's ID is in the rule's status")
	s := silence(t, sid)
	assert.Equal(t, "active", s.Status.State)
	assert.Equal(t, alertmanager.SilenceCreator, s.CreatedBy)
	assert.Contains(t, s.Comment, id)
	got := map[string]string{}
	for _, m := range s.Matchers {
		assert.True(t, m.IsEqual && !m.IsRegex, "%s is an equality matcher", m.Name)
		got[m.Name] = m.Value
	}
	assert.Equal(t, l, got, "the silence's matchers are the alert's labels")

	// Renewed in place (same ID) each time half of it has passed.
	first := s.EndsAt
	require.Eventually(t, func() bool { return silence(t, sid).EndsAt.After(first.Add(2 * time.Second)) }, 30*time.Second, time.Second, "renewed")
	assert.Equal(t, "active", silence(t, sid).Status.State)

	var kexec v1alpha1.KubernetesExecution
	require.Eventually(t, func() bool {
		var l v1alpha1.KubernetesExecutionList
		require.NoError(t, harness.Kube().List(context.Background(), &l, ctrlclient.InNamespace(ns)))
		for _, k := range l.Items {
			if k.Status.Phase == v1alpha1.PhaseWaitingApproval && k.Status.WorkflowID != "" {
				kexec = k
				return true
			}
		}
		return false
	}, 60*time.Second, 500*time.Millisecond)
	require.NoError(t, harness.Temporal().SignalWorkflow(context.Background(), kexec.Status.WorkflowID, "", workflows.SignalApprove,
		workflows.ApprovalSignal{Approver: "oncall-alice"}))
	done := ruleStatus(t, rule, 60*time.Second, func(r *v1alpha1.RemediationRule) bool {
		rec := record(r, fp)
		return rec != nil && rec.Phase == v1alpha1.AlertDone
	})
	assert.Equal(t, sid, record(done, fp).Silence, "the status keeps the silence the run held")
	assert.Equal(t, "expired", silence(t, sid).Status.State, "expired when the run ended")

	resolve(t, l)
	harness.WaitClosed(t, id, 30*time.Second)
	harness.ReplayHistory(t, id, "alert-silenced.json")
}

// firedAndHeld fires the alert and waits until the rule records it held for reason.
func firedAndHeld(t *testing.T, rule *v1alpha1.RemediationRule, l map[string]string, reason string) *v1alpha1.RemediationRule {
	t.Helper()
	fp := alertmanager.Fingerprint(l)
	fire(t, l)
	return ruleStatus(t, rule, 30*time.Second, func(r *v1alpha1.RemediationRule) bool {
		rec := record(r, fp)
		return rec != nil && rec.Reason == reason
	})
}
