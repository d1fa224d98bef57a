package alerts

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/client"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	ctrlclient "sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/remedy-dev/remedy/api/v1alpha1"
	"github.com/remedy-dev/remedy/internal/alertmanager"
	"github.com/remedy-dev/remedy/internal/alertrule"
	"github.com/remedy-dev/remedy/internal/metrics"
	"github.com/remedy-dev/remedy/internal/seal"
	"github.com/remedy-dev/remedy/test/harness"
	"github.com/remedy-dev/remedy/workflows"
)

// refusals is the worker's count of refused alerts with reason.
func refusals(reason string) float64 {
	return testutil.ToFloat64(metrics.AlertsRefused.WithLabelValues(reason))
}

func outcomes(outcome string) float64 {
	return testutil.ToFloat64(metrics.AlertOutcomes.WithLabelValues(outcome))
}

// fireWith posts a firing alert with annotations.
func fireWith(t *testing.T, labels, annotations map[string]string) {
	t.Helper()
	post(t, amAlert{Labels: labels, Annotations: annotations, StartsAt: time.Now().Add(-time.Second), EndsAt: time.Now().Add(time.Hour)})
}

// ruleEvents lists the Events about the rule, of any type.
func ruleEvents(t *testing.T, rule *v1alpha1.RemediationRule) []eventsv1.Event {
	t.Helper()
	var list eventsv1.EventList
	require.NoError(t, harness.Kube().List(context.Background(), &list, ctrlclient.InNamespace(rule.Namespace)))
	var out []eventsv1.Event
	for _, e := range list.Items {
		if e.Regarding.Kind == "RemediationRule" && e.Regarding.Name == rule.Name {
			out = append(out, e)
		}
	}
	return out
}

// ruleEvent waits for an Event of type and reason about the rule.
func ruleEvent(t *testing.T, rule *v1alpha1.RemediationRule, typ, reason string) eventsv1.Event {
	t.Helper()
	var found eventsv1.Event
	require.Eventually(t, func() bool {
		for _, e := range ruleEvents(t, rule) {
			if e.Type == typ && e.Reason == reason {
				found = e
				return true
			}
		}
		return false
	}, 30*time.Second, 100*time.Millisecond, "no %s Event %s on RemediationRule %s", typ, reason, rule.Name)
	return found
}

// A real alert that the rule cannot act on is visible from kubectl: a
// target that does not exist and a template with a typo each leave an
// entry in the rule's status (record, counts, last refusal and outcome,
// the alert's runbook), a Warning Event on the rule, and the metrics.
func TestRefusedAlertIsVisibleFromKubectl(t *testing.T) {
	ns := tenant(t, "web")
	missing := createRule(t, restartRule(ns, "missing-target", "MissingTarget"))
	typo := restartRule(ns, "template-typo", "TemplateTypo")
	typo.Spec.Template.Steps[0].Execution.Target.Name = "{{ .Labels.deploymnet }}"
	typo = createRule(t, typo)
	for _, tc := range []struct {
		name    string
		rule    *v1alpha1.RemediationRule
		labels  map[string]string
		reason  string
		message string
	}{
		{"missing target", missing, labels(ns, "MissingTarget", "deployment", "ghost"), v1alpha1.ReasonNotFound,
			fmt.Sprintf(`read Deployment %s/ghost: deployments.apps "ghost" not found`, ns)},
		{"template typo", typo, labels(ns, "TemplateTypo", "deployment", "web"), v1alpha1.ReasonInvalidParameters,
			`map has no entry for key "deploymnet"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			refusedBefore, outcomeBefore := refusals(tc.reason), outcomes("Refused")
			runbook := "https://runbooks.example/" + tc.rule.Name
			fireWith(t, tc.labels, map[string]string{alertrule.RunbookAnnotation: runbook, alertrule.SummaryAnnotation: "Pod is crash looping."})
			fp := alertmanager.Fingerprint(tc.labels)
			got := ruleStatus(t, tc.rule, 60*time.Second, func(r *v1alpha1.RemediationRule) bool {
				rec := record(r, fp)
				return rec != nil && rec.Phase == v1alpha1.AlertRefused
			})
			rec := record(got, fp)
			assert.Equal(t, tc.reason, rec.Reason)
			assert.Contains(t, rec.Message, tc.message)
			assert.Equal(t, runbook, rec.RunbookURL)
			assert.Equal(t, "Pod is crash looping.", rec.Summary)
			st := got.Status
			assert.Equal(t, int64(1), st.Matches)
			assert.Equal(t, map[string]int64{"Refused": 1}, st.Outcomes)
			require.NotNil(t, st.LastRefusal)
			assert.Equal(t, tc.reason, st.LastRefusal.Reason)
			assert.Equal(t, fp, st.LastRefusal.Fingerprint)
			require.NotNil(t, st.LastOutcome)
			assert.Equal(t, "Refused", st.LastOutcome.Outcome)

			ev := ruleEvent(t, tc.rule, corev1.EventTypeWarning, "AlertRefused")
			assert.Contains(t, ev.Note, tc.message)
			assert.Contains(t, ev.Note, runbook)
			// The worker runs in this process: its counters are these.
			require.Eventually(t, func() bool { return refusals(tc.reason) == refusedBefore+1 && outcomes("Refused") == outcomeBefore+1 },
				10*time.Second, 50*time.Millisecond, "remedy_alerts_refused_total{reason=%q} and remedy_alert_outcomes_total{outcome=\"Refused\"} count the refusal once", tc.reason)
			assert.Empty(t, requestsOf(t, ns, tc.rule.Name))
			if tc.reason == v1alpha1.ReasonNotFound {
				harness.ReplayHistory(t, v1alpha1.AlertWorkflowID(ns, tc.rule.Name, fp), "alert-refused-recorded.json")
			}
		})
	}
}

// Exploit: whoever can reach Temporal can start an alert workflow with any
// input. Before this change such a refusal was never recorded; now proven
// refusals are, so a forged start (an alert Alertmanager does not hold,
// another workflow ID, a fingerprint that is not the labels', a rule that
// does not exist) must still write nothing: no status, no Event, no
// metric, even for a rule whose real alerts would be recorded.
func TestForgedStartOfARecordableRefusalWritesNothing(t *testing.T) {
	ns := tenant(t, "web")
	rule := createRule(t, restartRule(ns, "forged-refusal", "ForgedRefusal"))
	l := labels(ns, "ForgedRefusal", "deployment", "ghost")
	fp := alertmanager.Fingerprint(l)
	phish := map[string]string{alertrule.RunbookAnnotation: "https://phish.example/login", alertrule.SummaryAnnotation: "approve at once"}
	in := workflows.AlertInput{Namespace: ns, Rule: rule.Name, Alert: alertrule.Alert{Labels: l, Annotations: phish, Fingerprint: fp, StartsAt: time.Now()}}
	wrongFP := in
	wrongFP.Alert.Fingerprint = "0123456789abcdef"
	ghost := in
	ghost.Rule = "no-such-rule"
	before := refusals(v1alpha1.ReasonNotFound)
	for _, tc := range []struct {
		name string
		id   string
		in   workflows.AlertInput
		want string
	}{
		{"an alert Alertmanager does not hold", v1alpha1.AlertWorkflowID(ns, rule.Name, fp), in, "not firing in Alertmanager"},
		{"under another ID", v1alpha1.AlertWorkflowID(ns, rule.Name, fp) + "-forged", in, "is not the workflow of alert"},
		{"a fingerprint not the labels'", v1alpha1.AlertWorkflowID(ns, rule.Name, wrongFP.Alert.Fingerprint), wrongFP, "is not the fingerprint"},
		{"a rule that does not exist", v1alpha1.AlertWorkflowID(ns, ghost.Rule, fp), ghost, "not found"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			run, err := harness.Temporal().ExecuteWorkflow(context.Background(), client.StartWorkflowOptions{ID: tc.id, TaskQueue: workflows.TaskQueue}, workflows.AlertWorkflow, tc.in)
			require.NoError(t, err)
			var res workflows.AlertResult
			require.NoError(t, run.Get(context.Background(), &res))
			assert.Equal(t, v1alpha1.AlertRefused, res.Phase)
			assert.Equal(t, v1alpha1.ReasonSubjectMismatch, res.Reason)
			assert.Contains(t, res.Message, tc.want)
			assert.Empty(t, res.RunbookURL, "a forged start's runbook is shown nowhere")
		})
	}
	// Each run recorded (or not) before it completed: the status is final.
	got := ruleStatus(t, rule, time.Second, func(*v1alpha1.RemediationRule) bool { return true })
	assert.Zero(t, got.Status.Matches)
	assert.Empty(t, got.Status.Alerts)
	assert.Nil(t, got.Status.LastRefusal)
	assert.Nil(t, got.Status.LastOutcome)
	assert.Empty(t, got.Status.Outcomes)
	assert.Empty(t, ruleEvents(t, rule))
	assert.Equal(t, before, refusals(v1alpha1.ReasonNotFound))

	// The same alert, really firing, is recorded.
	fire(t, l)
	ruleStatus(t, rule, 60*time.Second, func(r *v1alpha1.RemediationRule) bool {
		rec := record(r, fp)
		return rec != nil && rec.Phase == v1alpha1.AlertRefused && rec.Reason == v1alpha1.ReasonNotFound
	})
	ruleEvent(t, rule, corev1.EventTypeWarning, "AlertRefused")
}

// A proven alert's refusal shows the runbook Alertmanager holds, never the
// one in the workflow's input: a suspended rule (the receiver starts
// nothing for it) refuses a run started by hand for its real alert.
func TestRecordedRunbookIsAlertmanagers(t *testing.T) {
	ns := tenant(t, "web")
	r := restartRule(ns, "suspended-runbook", "SuspendedRunbook")
	r.Spec.Suspend = true
	rule := createRule(t, r)
	l := labels(ns, "SuspendedRunbook", "deployment", "web")
	fp := alertmanager.Fingerprint(l)
	fireWith(t, l, map[string]string{alertrule.RunbookAnnotation: "https://runbooks.example/suspended", alertrule.SummaryAnnotation: "real summary"})
	id := v1alpha1.AlertWorkflowID(ns, rule.Name, fp)
	phish := map[string]string{alertrule.RunbookAnnotation: "https://phish.example/login", alertrule.SummaryAnnotation: "approve at once"}
	run, err := harness.Temporal().ExecuteWorkflow(context.Background(), client.StartWorkflowOptions{ID: id, TaskQueue: workflows.TaskQueue}, workflows.AlertWorkflow,
		workflows.AlertInput{Namespace: ns, Rule: rule.Name, Alert: alertrule.Alert{Labels: l, Annotations: phish, Fingerprint: fp, StartsAt: time.Now()}})
	require.NoError(t, err)
	var res workflows.AlertResult
	require.NoError(t, run.Get(context.Background(), &res))
	assert.Equal(t, v1alpha1.ReasonAlertSuspended, res.Reason)
	assert.Equal(t, "https://runbooks.example/suspended", res.RunbookURL)
	got := ruleStatus(t, rule, 30*time.Second, func(r *v1alpha1.RemediationRule) bool { return record(r, fp) != nil })
	rec := record(got, fp)
	assert.Equal(t, v1alpha1.AlertRefused, rec.Phase)
	assert.Equal(t, v1alpha1.ReasonAlertSuspended, rec.Reason)
	assert.Equal(t, "https://runbooks.example/suspended", rec.RunbookURL)
	assert.Equal(t, "real summary", rec.Summary)
	ruleEvent(t, rule, corev1.EventTypeWarning, "AlertRefused")
}

// The alert's runbook and summary (as Alertmanager holds them) are shown
// wherever a person looks at the run: its record in the rule's status, the
// approval request it opens, its RemediationRequest, its memo and status
// query (the Web UI), and the outcome Events on the rule and the target.
func TestRunbookIsShownWhereverThePersonLooks(t *testing.T) {
	ctx := context.Background()
	ns := tenant(t, "web")
	r := restartRule(ns, "runbook", "WithRunbook")
	r.Spec.Freeze = &v1alpha1.FreezeSpec{Action: v1alpha1.FreezeRequireApproval, TimeIntervals: []v1alpha1.TimeInterval{{}}}
	rule := createRule(t, r)
	l := labels(ns, "WithRunbook", "deployment", "web")
	fp := alertmanager.Fingerprint(l)
	id := v1alpha1.AlertWorkflowID(ns, rule.Name, fp)
	const runbook, summary = "https://runbooks.example/kubepodcrashlooping", "Pod is crash looping."
	fireWith(t, l, map[string]string{alertrule.RunbookAnnotation: runbook, alertrule.SummaryAnnotation: summary})
	asked := ruleStatus(t, rule, 60*time.Second, func(r *v1alpha1.RemediationRule) bool {
		rec := record(r, fp)
		return rec != nil && rec.Phase == v1alpha1.AlertWaiting
	})
	assert.Equal(t, runbook, record(asked, fp).RunbookURL)
	assert.Equal(t, summary, record(asked, fp).Summary)
	assert.Equal(t, int64(1), asked.Status.Outcomes["WaitingApproval"])
	var rars v1alpha1.RemediationApprovalRequestList
	require.NoError(t, harness.Kube().List(ctx, &rars, ctrlclient.InNamespace(ns)))
	require.Len(t, rars.Items, 1)
	assert.Equal(t, runbook, rars.Items[0].Spec.ApprovalContext.RunbookURL)
	assert.Equal(t, summary, rars.Items[0].Spec.ApprovalContext.Summary)
	ruleEvent(t, rule, corev1.EventTypeNormal, "AlertWaitingApproval")

	d, err := harness.Temporal().DescribeWorkflowExecution(ctx, id, "")
	require.NoError(t, err)
	var memo string
	require.NoError(t, seal.DataConverter(harness.Keys()).FromPayload(d.GetWorkflowExecutionInfo().GetMemo().GetFields()["runbook"], &memo))
	assert.Equal(t, runbook, memo)
	q, err := harness.Temporal().QueryWorkflow(ctx, id, "", workflows.QueryStatus)
	require.NoError(t, err)
	var res workflows.AlertResult
	require.NoError(t, q.Get(&res))
	assert.Equal(t, runbook, res.RunbookURL)
	assert.Equal(t, summary, res.Summary)

	require.NoError(t, harness.Temporal().SignalWorkflow(ctx, id, "", workflows.SignalApprove,
		workflows.ApprovalSignal{Approver: "oncall-bob", Reason: "runbook read"}))
	done := ruleStatus(t, rule, 60*time.Second, func(r *v1alpha1.RemediationRule) bool {
		rec := record(r, fp)
		return rec != nil && rec.Phase == v1alpha1.AlertDone
	})
	assert.Equal(t, int64(1), done.Status.Outcomes["Done"])
	assert.Equal(t, "Done", done.Status.LastOutcome.Outcome)
	rrs := requestsOf(t, ns, rule.Name)
	require.Len(t, rrs, 1)
	require.NotNil(t, rrs[0].Spec.Alert)
	assert.Equal(t, runbook, rrs[0].Spec.Alert.RunbookURL)
	assert.Equal(t, summary, rrs[0].Spec.Alert.Summary)
	ev := ruleEvent(t, rule, corev1.EventTypeNormal, "AlertDone")
	assert.Contains(t, ev.Note, "on Deployment/web")
	// The target's own Event, with its UID, so kubectl describe deployment shows it.
	var dep appsv1.Deployment
	require.NoError(t, harness.Kube().Get(ctx, ctrlclient.ObjectKey{Namespace: ns, Name: "web"}, &dep))
	require.Eventually(t, func() bool {
		var list eventsv1.EventList
		require.NoError(t, harness.Kube().List(ctx, &list, ctrlclient.InNamespace(ns)))
		for _, e := range list.Items {
			if e.Regarding.Kind == "Deployment" && e.Regarding.UID == dep.UID && e.Reason == "AlertDone" && e.Type == corev1.EventTypeNormal {
				return true
			}
		}
		return false
	}, 30*time.Second, 100*time.Millisecond, "no AlertDone Event on Deployment web")
	resolve(t, l)
	harness.WaitClosed(t, id, 30*time.Second)
	harness.ReplayHistory(t, id, "alert-runbook.json")
}
