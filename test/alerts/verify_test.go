package alerts

import (
	"context"
	"strings"
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

// phaseIs waits until the alert's record has phase.
func phaseIs(t *testing.T, rule *v1alpha1.RemediationRule, fp, phase string, timeout time.Duration) *v1alpha1.AlertRecord {
	t.Helper()
	r := ruleStatus(t, rule, timeout, func(r *v1alpha1.RemediationRule) bool {
		rec := record(r, fp)
		return rec != nil && rec.Phase == phase
	})
	return record(r, fp)
}

// The run acts, then waits for its alert; the alert resolves in
// Alertmanager after the fix and the run is Verified, once, by one request.
func TestVerifiedWhenTheAlertResolvesAfterActing(t *testing.T) {
	ns := tenant(t, "web")
	r := restartRule(ns, "verified", "VerifyCrash")
	// Resolved well inside the window; the run is Verified at its end.
	r.Spec.Verify = &v1alpha1.VerifySpec{Window: v1alpha1.DurationOf(15 * time.Second)}
	rule := createRule(t, r)
	l := labels(ns, "VerifyCrash", "deployment", "web")
	fp := alertmanager.Fingerprint(l)
	fire(t, l)
	phaseIs(t, rule, fp, v1alpha1.AlertVerifying, 60*time.Second)
	rrs := requestsOf(t, ns, rule.Name)
	require.Len(t, rrs, 1)
	assert.Equal(t, v1alpha1.PhaseCompleted, rrs[0].Status.Phase, rrs[0].Status.Message)

	resolve(t, l)
	rec := phaseIs(t, rule, fp, v1alpha1.AlertVerified, 60*time.Second)
	assert.Equal(t, v1alpha1.ReasonVerified, rec.Reason)
	assert.Len(t, requestsOf(t, ns, rule.Name), 1, "verified by one request")
	id := v1alpha1.AlertWorkflowID(ns, rule.Name, fp)
	harness.WaitClosed(t, id, 30*time.Second)
	harness.ReplayHistory(t, id, "alert-verified.json")
}

// The alert keeps firing: the first step is Ineffective, the ladder's next
// step (scale) runs through the guard and is verified in turn; when it too
// leaves the alert firing, the ladder is exhausted.
func TestIneffectiveEscalatesToTheNextStep(t *testing.T) {
	ns := tenant(t, "web")
	r := restartRule(ns, "ladder", "LadderCrash")
	two := int32(2)
	r.Spec.Verify = &v1alpha1.VerifySpec{Window: v1alpha1.DurationOf(3 * time.Second), OnFailure: v1alpha1.VerifyEscalate}
	r.Spec.Escalation = []v1alpha1.EscalationStep{{Name: "scale-up", Template: &v1alpha1.RemediationTemplate{Steps: []v1alpha1.RemediationStep{{Name: "scale",
		Execution: v1alpha1.KubernetesExecutionSpec{Action: "scale", Target: v1alpha1.ObjectRef{APIVersion: "apps/v1", Kind: "Deployment", Name: "{{ .Labels.deployment }}"},
			Parameters: &v1alpha1.ActionParameters{Replicas: &two}}}}}}}
	rule := createRule(t, r)
	l := labels(ns, "LadderCrash", "deployment", "web")
	fp := alertmanager.Fingerprint(l)
	fire(t, l)
	rec := record(ruleStatus(t, rule, 120*time.Second, func(r *v1alpha1.RemediationRule) bool {
		rec := record(r, fp)
		return rec != nil && rec.Reason == v1alpha1.ReasonLadderExhausted
	}), fp)
	assert.Equal(t, v1alpha1.AlertIneffective, rec.Phase)
	assert.Equal(t, v1alpha1.ReasonLadderExhausted, rec.Reason, rec.Message)
	assert.Contains(t, rec.Message, "still firing")
	rrs := requestsOf(t, ns, rule.Name)
	require.Len(t, rrs, 2, "the template, then the escalation step")
	actions := map[string]bool{}
	for _, rr := range rrs {
		actions[rr.Spec.Steps[0].Execution.Action] = true
		assert.Equal(t, v1alpha1.PhaseCompleted, rr.Status.Phase, rr.Status.Message)
	}
	assert.Equal(t, map[string]bool{"restart": true, "scale": true}, actions)

	resolve(t, l)
	id := v1alpha1.AlertWorkflowID(ns, rule.Name, fp)
	harness.WaitClosed(t, id, 30*time.Second)
	harness.ReplayHistory(t, id, "alert-ladder-exhausted.json")
}

// spec.holdFor: the alert resolves on its own while held, so nothing is done.
func TestHoldForResolvedDoesNothing(t *testing.T) {
	ns := tenant(t, "web")
	r := restartRule(ns, "held", "HeldCrash")
	r.Spec.HoldFor = v1alpha1.DurationOf(10 * time.Minute)
	rule := createRule(t, r)
	l := labels(ns, "HeldCrash", "deployment", "web")
	fp := alertmanager.Fingerprint(l)
	fire(t, l)
	phaseIs(t, rule, fp, v1alpha1.AlertHeld, 60*time.Second)
	resolve(t, l)
	rec := phaseIs(t, rule, fp, v1alpha1.AlertCanceled, 60*time.Second)
	assert.Equal(t, v1alpha1.ReasonResolvedWhileHeld, rec.Reason)
	assert.Empty(t, requestsOf(t, ns, rule.Name), "nothing was done")
	id := v1alpha1.AlertWorkflowID(ns, rule.Name, fp)
	harness.WaitClosed(t, id, 30*time.Second)
	harness.ReplayHistory(t, id, "alert-resolved-while-held.json")
}

// spec.holdFor: the alert still fires when the hold ends, so the run acts.
func TestHoldForStillFiringActs(t *testing.T) {
	ns := tenant(t, "web")
	r := restartRule(ns, "held-acts", "HeldFiring")
	r.Spec.HoldFor = v1alpha1.DurationOf(2 * time.Second)
	rule := createRule(t, r)
	l := labels(ns, "HeldFiring", "deployment", "web")
	fp := alertmanager.Fingerprint(l)
	fire(t, l)
	phaseIs(t, rule, fp, v1alpha1.AlertDone, 60*time.Second)
	require.Len(t, requestsOf(t, ns, rule.Name), 1)
	resolve(t, l)
	harness.WaitClosed(t, v1alpha1.AlertWorkflowID(ns, rule.Name, fp), 30*time.Second)
}

// Two alert names for one Deployment (the Pod crash-loops and is not
// ready): the second joins the first's open run, one RemediationRequest
// runs, and the run is Verified only once both alerts resolved.
func TestTwoAlertNamesForOneDeploymentAreOneRun(t *testing.T) {
	ns := tenant(t, "web")
	r := restartRule(ns, "one-run", "JoinCrashLooping")
	r.Spec.Matchers = []string{`alertname=~"JoinCrashLooping|JoinNotReady"`}
	// Long enough for the second alert to join and both to resolve inside it.
	r.Spec.Verify = &v1alpha1.VerifySpec{Window: v1alpha1.DurationOf(45 * time.Second)}
	rule := createRule(t, r)
	crash := labels(ns, "JoinCrashLooping", "deployment", "web")
	notReady := labels(ns, "JoinNotReady", "deployment", "web")
	crashFP, notReadyFP := alertmanager.Fingerprint(crash), alertmanager.Fingerprint(notReady)
	fire(t, crash)
	phaseIs(t, rule, crashFP, v1alpha1.AlertVerifying, 60*time.Second)
	fire(t, notReady)
	joined := phaseIs(t, rule, notReadyFP, v1alpha1.AlertJoined, 60*time.Second)
	assert.Equal(t, v1alpha1.ReasonJoined, joined.Reason)
	assert.Contains(t, joined.Message, v1alpha1.AlertWorkflowID(ns, rule.Name, crashFP), "names the run it joined")
	assert.Equal(t, "Deployment/web", joined.Target)
	require.Len(t, requestsOf(t, ns, rule.Name), 1, "one run for the workload")

	// The run's own alert resolves; the joined one still fires, so the run
	// verifies on (workflows' TestProveJoinedAlertsCountInVerification holds the rule exactly).
	resolve(t, crash)
	crashID := v1alpha1.AlertWorkflowID(ns, rule.Name, crashFP)
	require.Eventually(t, func() bool { return harness.SignalsReceived(t, crashID, workflows.SignalAlert) >= 2 }, 30*time.Second, 100*time.Millisecond)
	assert.Equal(t, v1alpha1.AlertVerifying, phaseIs(t, rule, crashFP, v1alpha1.AlertVerifying, time.Second).Phase)
	resolve(t, notReady)
	rec := phaseIs(t, rule, crashFP, v1alpha1.AlertVerified, 90*time.Second)
	assert.Equal(t, v1alpha1.ReasonVerified, rec.Reason)
	assert.Len(t, requestsOf(t, ns, rule.Name), 1)
	harness.WaitClosed(t, v1alpha1.AlertWorkflowID(ns, rule.Name, notReadyFP), 30*time.Second)
	harness.ReplayHistory(t, v1alpha1.AlertWorkflowID(ns, rule.Name, crashFP), "alert-verified-joined.json")
	harness.ReplayHistory(t, v1alpha1.AlertWorkflowID(ns, rule.Name, notReadyFP), "alert-joined.json")
}

// A ladder or onFailure the rule cannot carry out is refused at admission, naming why.
func TestVerifyAndEscalationAreValidatedAtAdmission(t *testing.T) {
	ns := tenant(t, "web")
	page := []v1alpha1.EscalationStep{{Name: "oncall", Page: true}}
	for _, tc := range []struct {
		name string
		mod  func(*v1alpha1.RemediationRule)
		want string
	}{
		{"escalation without verify", func(r *v1alpha1.RemediationRule) { r.Spec.Escalation = page }, "spec.escalation needs spec.verify"},
		{"Escalate without a ladder", func(r *v1alpha1.RemediationRule) {
			r.Spec.Verify = &v1alpha1.VerifySpec{OnFailure: v1alpha1.VerifyEscalate}
		}, "needs at least one step in spec.escalation"},
		{"a step with neither template nor page", func(r *v1alpha1.RemediationRule) {
			r.Spec.Verify = &v1alpha1.VerifySpec{}
			r.Spec.Escalation = []v1alpha1.EscalationStep{{Name: "nothing"}}
		}, "exactly one of template or page"},
		{"shadow mode verifies nothing", func(r *v1alpha1.RemediationRule) {
			r.Spec.DryRun = true
			r.Spec.Verify = &v1alpha1.VerifySpec{}
		}, "shadow mode"},
		{"a bad window", func(r *v1alpha1.RemediationRule) {
			w := v1alpha1.Duration("10 minutes")
			r.Spec.Verify = &v1alpha1.VerifySpec{Window: &w}
		}, "spec.verify.window"},
		{"an escalation step acting in another namespace", func(r *v1alpha1.RemediationRule) {
			r.Spec.Verify = &v1alpha1.VerifySpec{}
			r.Spec.Escalation = []v1alpha1.EscalationStep{{Name: "away", Template: &v1alpha1.RemediationTemplate{Steps: []v1alpha1.RemediationStep{{Name: "restart",
				Execution: v1alpha1.KubernetesExecutionSpec{Action: "restart", Target: v1alpha1.ObjectRef{APIVersion: "apps/v1", Kind: "Deployment", Namespace: "kube-system", Name: "coredns"}}}}}}}
		}, "spec.escalation[0].template.steps[0].execution.target.namespace"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := restartRule(ns, "invalid", "X")
			tc.mod(r)
			err := impersonating(t, alertAuthor).Create(context.Background(), r)
			require.Error(t, err)
			assert.True(t, apierrors.IsInvalid(err), "want 422, got %v", err)
			assert.Contains(t, err.Error(), tc.want)
		})
	}
}

// The author must hold "execute" on every action of the ladder, not only the template's.
func TestEscalationActionsNeedTheAuthorsGrant(t *testing.T) {
	ns := tenant(t, "web")
	r := restartRule(ns, "ladder-grant", "X")
	r.Spec.Verify = &v1alpha1.VerifySpec{}
	r.Spec.Escalation = []v1alpha1.EscalationStep{{Name: "undo", Template: &v1alpha1.RemediationTemplate{Steps: []v1alpha1.RemediationStep{{Name: "undo",
		Execution: v1alpha1.KubernetesExecutionSpec{Action: "set-image", Target: v1alpha1.ObjectRef{APIVersion: "apps/v1", Kind: "Deployment", Name: "web"},
			Parameters: &v1alpha1.ActionParameters{Container: "app", Image: "nginx:1"}}}}}}}
	err := impersonating(t, alertAuthor).Create(context.Background(), r)
	require.Error(t, err)
	assert.True(t, apierrors.IsForbidden(err), "want 403, got %v", err)
	assert.Contains(t, err.Error(), "escalation")
}

// onFailure None: the alert keeps firing, the run ends Ineffective after its one step.
func TestIneffectiveWithoutALadderStops(t *testing.T) {
	ns := tenant(t, "web")
	r := restartRule(ns, "no-ladder", "StillCrashing")
	r.Spec.Verify = &v1alpha1.VerifySpec{Window: v1alpha1.DurationOf(2 * time.Second), OnFailure: v1alpha1.VerifyNone}
	rule := createRule(t, r)
	l := labels(ns, "StillCrashing", "deployment", "web")
	fp := alertmanager.Fingerprint(l)
	fire(t, l)
	rec := phaseIs(t, rule, fp, v1alpha1.AlertIneffective, 60*time.Second)
	assert.Equal(t, v1alpha1.ReasonIneffective, rec.Reason)
	assert.Contains(t, rec.Message, fp, "names the alert still firing")
	require.Len(t, requestsOf(t, ns, rule.Name), 1)
	resolve(t, l)
	id := v1alpha1.AlertWorkflowID(ns, rule.Name, fp)
	harness.WaitClosed(t, id, 30*time.Second)
	harness.ReplayHistory(t, id, "alert-ineffective.json")
}

// A ladder that runs out pages: an approval request, through the approval
// path, says the alert still fires after what ran; the alert resolving withdraws it.
func TestExhaustedLadderPagesAPerson(t *testing.T) {
	ns := tenant(t, "web")
	r := restartRule(ns, "pages", "PageCrash")
	r.Spec.Verify = &v1alpha1.VerifySpec{Window: v1alpha1.DurationOf(2 * time.Second)}
	r.Spec.Escalation = []v1alpha1.EscalationStep{{Name: "oncall", Page: true}}
	rule := createRule(t, r)
	l := labels(ns, "PageCrash", "deployment", "web")
	fp := alertmanager.Fingerprint(l)
	fire(t, l)
	phaseIs(t, rule, fp, v1alpha1.AlertWaiting, 60*time.Second)
	var rars v1alpha1.RemediationApprovalRequestList
	require.NoError(t, harness.Kube().List(context.Background(), &rars, ctrlclient.InNamespace(ns)))
	require.Len(t, rars.Items, 1)
	assert.True(t, strings.HasSuffix(rars.Items[0].Name, "-page"), rars.Items[0].Name)
	assert.Contains(t, rars.Items[0].Spec.ApprovalContext.Reason, "still fires")
	require.Len(t, requestsOf(t, ns, rule.Name), 1, "the page runs nothing")

	resolve(t, l)
	rec := phaseIs(t, rule, fp, v1alpha1.AlertCanceled, 60*time.Second)
	assert.Equal(t, v1alpha1.ReasonResolved, rec.Reason)
	id := v1alpha1.AlertWorkflowID(ns, rule.Name, fp)
	harness.WaitClosed(t, id, 30*time.Second)
	harness.ReplayHistory(t, id, "alert-ladder-paged.json")
}
