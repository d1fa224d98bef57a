package alerts

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/temporal"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	kubefake "k8s.io/client-go/kubernetes/fake"
	ctrlclient "sigs.k8s.io/controller-runtime/pkg/client"
	ctrlfake "sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/remedy-dev/remedy/activities/gate"
	"github.com/remedy-dev/remedy/activities/internal/activitytest"
	"github.com/remedy-dev/remedy/activities/status"
	"github.com/remedy-dev/remedy/api/v1alpha1"
	"github.com/remedy-dev/remedy/internal/alertmanager"
	"github.com/remedy-dev/remedy/internal/alertrule"
	"github.com/remedy-dev/remedy/internal/metrics"
)

func TestOutcomeOf(t *testing.T) {
	for _, tc := range []struct {
		phase, reason   string
		outcome, evType string
	}{
		{v1alpha1.AlertQueued, "Matched", "", ""},
		{v1alpha1.AlertQueued, "AwaitingPermit", "", ""},
		{v1alpha1.AlertQueued, v1alpha1.ReasonFrozen, OutcomeGated, corev1.EventTypeNormal},
		{v1alpha1.AlertQueued, v1alpha1.ReasonGatedByAlert, OutcomeGated, corev1.EventTypeNormal},
		{v1alpha1.AlertQueued, v1alpha1.ReasonGateUnknown, OutcomeGated, corev1.EventTypeWarning},
		{v1alpha1.AlertWaiting, v1alpha1.ReasonApprovalRequested, OutcomeWaitingApproval, corev1.EventTypeNormal},
		{v1alpha1.AlertWaiting, v1alpha1.ReasonFrozen, OutcomeWaitingApproval, corev1.EventTypeNormal},
		{v1alpha1.AlertRunning, "Started", "", ""},
		{v1alpha1.AlertVerifying, v1alpha1.AlertVerifying, "", ""},
		{v1alpha1.AlertRefused, v1alpha1.ReasonNotFound, OutcomeRefused, corev1.EventTypeWarning},
		{v1alpha1.AlertRefused, v1alpha1.ReasonSubjectMismatch, OutcomeRefused, corev1.EventTypeWarning},
		{v1alpha1.AlertHeld, v1alpha1.ReasonHeld, OutcomeHeld, corev1.EventTypeNormal},
		{v1alpha1.AlertDone, v1alpha1.ReasonSucceeded, OutcomeDone, corev1.EventTypeNormal},
		{v1alpha1.AlertDone, v1alpha1.ReasonNoChange, OutcomeDone, corev1.EventTypeNormal},
		{v1alpha1.AlertDone, v1alpha1.ReasonStepFailed, OutcomeDone, corev1.EventTypeWarning},
		{v1alpha1.AlertVerified, v1alpha1.ReasonVerified, OutcomeVerified, corev1.EventTypeNormal},
		{v1alpha1.AlertIneffective, v1alpha1.ReasonIneffective, OutcomeIneffective, corev1.EventTypeWarning},
		{v1alpha1.AlertIneffective, v1alpha1.ReasonEscalated, OutcomeIneffective, corev1.EventTypeWarning},
		{v1alpha1.AlertJoined, v1alpha1.ReasonJoined, OutcomeJoined, corev1.EventTypeNormal},
		{v1alpha1.AlertCanceled, v1alpha1.ReasonResolved, OutcomeCanceled, corev1.EventTypeNormal},
		{v1alpha1.AlertCanceled, v1alpha1.ReasonResolvedWhileHeld, OutcomeCanceled, corev1.EventTypeNormal},
		{v1alpha1.AlertIneffective, v1alpha1.ReasonLadderExhausted, OutcomeIneffective, corev1.EventTypeWarning},
		{v1alpha1.AlertShadow, "DryRun", OutcomeShadow, corev1.EventTypeNormal},
	} {
		t.Run(tc.phase+"/"+tc.reason, func(t *testing.T) {
			outcome, typ := outcomeOf(tc.phase, tc.reason)
			assert.Equal(t, tc.outcome, outcome)
			assert.Equal(t, tc.evType, typ)
			if outcome != "" {
				assert.Contains(t, metrics.AlertOutcomeNames, outcome, "an outcome the metric exposes from the start")
			}
		})
	}
}

// Each run's entry into an outcome is counted once; a retried record
// (same run, phase and reason) counts nothing again, another run counts.
func TestOutcomesCountOncePerRun(t *testing.T) {
	now := metav1.NewTime(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	in := func(phase, reason string) AlertRecordInput {
		return AlertRecordInput{Record: v1alpha1.AlertRecord{Fingerprint: "0123456789abcdef", AlertName: "KubePodCrashLooping", Phase: phase, Reason: reason}}
	}
	var st v1alpha1.RemediationRuleStatus
	for i, s := range []struct {
		in   AlertRecordInput
		run  string
		want string
	}{
		{in(v1alpha1.AlertQueued, "Matched"), "run-1", ""},
		{in(v1alpha1.AlertHeld, v1alpha1.ReasonHeld), "run-1", OutcomeHeld},
		{in(v1alpha1.AlertHeld, v1alpha1.ReasonHeld), "run-1", ""},
		{in(v1alpha1.AlertRunning, "Started"), "run-1", ""},
		{in(v1alpha1.AlertVerified, v1alpha1.ReasonVerified), "run-1", OutcomeVerified},
		{in(v1alpha1.AlertVerified, v1alpha1.ReasonVerified), "run-1", ""},
		{in(v1alpha1.AlertRefused, v1alpha1.ReasonNotFound), "run-2", OutcomeRefused},
		{in(v1alpha1.AlertRefused, v1alpha1.ReasonNotFound), "run-2", ""},
	} {
		got := mergeAlertRecord(&st, 1, s.in, s.run, now)
		assert.Equal(t, s.want, got.outcome, "step %d", i)
	}
	assert.Equal(t, map[string]int64{OutcomeHeld: 1, OutcomeVerified: 1, OutcomeRefused: 1}, st.Outcomes)
	require.NotNil(t, st.LastOutcome)
	assert.Equal(t, v1alpha1.AlertOutcome{Outcome: OutcomeRefused, Phase: v1alpha1.AlertRefused, Reason: v1alpha1.ReasonNotFound,
		Fingerprint: "0123456789abcdef", AlertName: "KubePodCrashLooping", At: &now}, *st.LastOutcome)
	require.NotNil(t, st.LastRefusal)
	assert.Equal(t, v1alpha1.ReasonNotFound, st.LastRefusal.Reason)
}

// A recorded outcome leaves a Warning or Normal Event on the rule and on
// its target, and its metrics, once per run however often it is retried.
func TestRecordAlertOutcomeEventsAndMetrics(t *testing.T) {
	const fp = "0123456789abcdef"
	id := v1alpha1.AlertWorkflowID("shop", "restart-web", fp)
	s := runtime.NewScheme()
	require.NoError(t, v1alpha1.AddToScheme(s))
	require.NoError(t, appsv1.AddToScheme(s))
	rule := &v1alpha1.RemediationRule{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "restart-web", UID: "rule-uid"}}
	dep := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "checkout", UID: "dep-uid"}}
	c := ctrlfake.NewClientBuilder().WithScheme(s).WithObjects(rule, dep).WithStatusSubresource(rule).Build()
	kube := kubefake.NewClientset()
	a := &Alerts{Client: c, Runs: openRunsOf(gate.AlertWorkflowType), Events: &status.Statuses{Client: c, Kube: kube}}
	in := AlertRecordInput{Namespace: "shop", Rule: "restart-web", RuleUID: "rule-uid",
		Record: v1alpha1.AlertRecord{Fingerprint: fp, AlertName: "KubePodCrashLooping", Phase: v1alpha1.AlertIneffective, Reason: v1alpha1.ReasonIneffective,
			Message: "the alert still fires", Target: "Deployment/checkout", RunbookURL: "https://runbooks.example/crashloop"}}
	before := testutil.ToFloat64(metrics.AlertOutcomes.WithLabelValues(OutcomeIneffective))
	for range 2 {
		require.NoError(t, activitytest.AsRun(t, id, a, a.RecordAlert, in, nil))
	}
	assert.Equal(t, before+1, testutil.ToFloat64(metrics.AlertOutcomes.WithLabelValues(OutcomeIneffective)), "counted once")
	require.NoError(t, c.Get(context.Background(), ctrlclient.ObjectKeyFromObject(rule), rule))
	assert.Equal(t, int64(1), rule.Status.Outcomes[OutcomeIneffective])
	assert.Equal(t, "https://runbooks.example/crashloop", rule.Status.Alerts[0].RunbookURL)

	evs, err := kube.EventsV1().Events("shop").List(context.Background(), metav1.ListOptions{})
	require.NoError(t, err)
	on := map[string]string{}
	for _, e := range evs.Items {
		assert.Equal(t, corev1.EventTypeWarning, e.Type)
		assert.Equal(t, "AlertIneffective", e.Reason)
		assert.Contains(t, e.Note, "alert KubePodCrashLooping ("+fp+") on Deployment/checkout: Ineffective: the alert still fires (runbook https://runbooks.example/crashloop)")
		on[e.Regarding.Kind+"/"+e.Regarding.Name] = string(e.Regarding.UID)
	}
	assert.Equal(t, map[string]string{"RemediationRule/restart-web": "rule-uid", "Deployment/checkout": "dep-uid"}, on, "one Event on each, with the UID kubectl describe selects by")
}

// A record bound to a rule that was deleted and created again under its
// name writes nothing on the new rule: no status, no Event, no count.
func TestRecordAlertForAReplacedRuleWritesNothing(t *testing.T) {
	const fp = "0123456789abcdef"
	s := runtime.NewScheme()
	require.NoError(t, v1alpha1.AddToScheme(s))
	rule := &v1alpha1.RemediationRule{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "restart-web", UID: "new-uid"}}
	c := ctrlfake.NewClientBuilder().WithScheme(s).WithObjects(rule).WithStatusSubresource(rule).Build()
	kube := kubefake.NewClientset()
	a := &Alerts{Client: c, Runs: openRunsOf(gate.AlertWorkflowType), Events: &status.Statuses{Client: c, Kube: kube}}
	in := AlertRecordInput{Namespace: "shop", Rule: "restart-web", RuleUID: "old-uid", Matched: true,
		Record: v1alpha1.AlertRecord{Fingerprint: fp, Phase: v1alpha1.AlertRefused, Reason: v1alpha1.ReasonNotFound}}
	before := testutil.ToFloat64(metrics.AlertsRefused.WithLabelValues(v1alpha1.ReasonNotFound))
	require.NoError(t, activitytest.AsRun(t, v1alpha1.AlertWorkflowID("shop", "restart-web", fp), a, a.RecordAlert, in, nil))
	require.NoError(t, c.Get(context.Background(), ctrlclient.ObjectKeyFromObject(rule), rule))
	assert.Zero(t, rule.Status.Matches)
	assert.Empty(t, rule.Status.Outcomes)
	evs, err := kube.EventsV1().Events("shop").List(context.Background(), metav1.ListOptions{})
	require.NoError(t, err)
	assert.Empty(t, evs.Items)
	assert.Equal(t, before, testutil.ToFloat64(metrics.AlertsRefused.WithLabelValues(v1alpha1.ReasonNotFound)))
}

// Messages name the kind of what they could not read (a typed object's
// TypeMeta is empty, so the kind is not taken from it).
func TestOwnerNamesTheKindItCouldNotRead(t *testing.T) {
	s := runtime.NewScheme()
	require.NoError(t, appsv1.AddToScheme(s))
	require.NoError(t, corev1.AddToScheme(s))
	ctrl := true
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "checkout-1", OwnerReferences: []metav1.OwnerReference{
		{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "checkout-5d8f", UID: "rs", Controller: &ctrl}}}}
	a := &Alerts{Client: ctrlfake.NewClientBuilder().WithScheme(s).WithObjects(pod).Build()}
	for _, tc := range []struct {
		kind, name, want string
	}{
		{"Deployment", "checkout", `read Deployment shop/checkout: deployments.apps "checkout" not found`},
		{"StatefulSet", "db", `read StatefulSet shop/db: statefulsets.apps "db" not found`},
		{"DaemonSet", "agent", `read DaemonSet shop/agent: daemonsets.apps "agent" not found`},
		{"Pod", "gone", `read Pod shop/gone: pods "gone" not found`},
		{"Pod", "checkout-1", `read ReplicaSet shop/checkout-5d8f: replicasets.apps "checkout-5d8f" not found`},
	} {
		t.Run(tc.kind+"/"+tc.name, func(t *testing.T) {
			_, _, err := a.owner(context.Background(), v1alpha1.ObjectRef{Kind: tc.kind, Namespace: "shop", Name: tc.name})
			var app *temporal.ApplicationError
			require.ErrorAs(t, err, &app)
			assert.Equal(t, tc.want, app.Message())
		})
	}
}

// A refusal is Recordable only once the alert is proven real: the rule
// exists and matches, and the fingerprint is the labels'. Before that,
// nothing about the start may be written on a rule.
func TestVerifyAlertMarksOnlyProvenRefusalsRecordable(t *testing.T) {
	s := runtime.NewScheme()
	require.NoError(t, v1alpha1.AddToScheme(s))
	require.NoError(t, appsv1.AddToScheme(s))
	labels := map[string]string{"alertname": "KubePodCrashLooping", "namespace": "shop", "deployment": "checkout"}
	fp := alertmanager.Fingerprint(labels)
	rule := func(name, target string, mut func(*v1alpha1.RemediationRule)) *v1alpha1.RemediationRule {
		r := &v1alpha1.RemediationRule{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: name, UID: types.UID("uid-" + name[:3])}, Spec: v1alpha1.RemediationRuleSpec{
			Matchers: []string{`alertname="KubePodCrashLooping"`}, Author: &v1alpha1.Requester{Username: "alice"},
			Template: v1alpha1.RemediationTemplate{Steps: []v1alpha1.RemediationStep{{Name: "restart", Execution: v1alpha1.KubernetesExecutionSpec{
				Action: "restart", Target: v1alpha1.ObjectRef{APIVersion: "apps/v1", Kind: "Deployment", Name: target}}}}}}}
		if mut != nil {
			mut(r)
		}
		return r
	}
	rules := []ctrlclient.Object{
		rule("typo", "{{ .Labels.deploymnet }}", nil),
		rule("missing", "ghost", nil),
		rule("suspended", "checkout", func(r *v1alpha1.RemediationRule) { r.Spec.Suspend = true }),
		rule("unmatched", "checkout", func(r *v1alpha1.RemediationRule) { r.Spec.Matchers = []string{`alertname="Other"`} }),
	}
	a := &Alerts{Client: ctrlfake.NewClientBuilder().WithScheme(s).WithObjects(rules...).Build()}
	ann := map[string]string{alertrule.RunbookAnnotation: "https://runbooks.example/x", alertrule.SummaryAnnotation: "crash looping"}
	for _, tc := range []struct {
		name, rule, id, fingerprint, reason, message string
		recordable                                   bool
	}{
		{"template typo", "typo", "", fp, v1alpha1.ReasonInvalidParameters, `map has no entry for key "deploymnet"`, true},
		{"missing target", "missing", "", fp, v1alpha1.ReasonNotFound, `read Deployment shop/ghost: deployments.apps "ghost" not found`, true},
		{"suspended rule", "suspended", "", fp, v1alpha1.ReasonAlertSuspended, "is suspended", true},
		{"rule that does not exist", "nosuchrule", "", fp, v1alpha1.ReasonSubjectMismatch, "not found", false},
		{"rule that does not match", "unmatched", "", fp, v1alpha1.ReasonSubjectMismatch, "does not match", false},
		{"another workflow ID", "missing", "forged", fp, v1alpha1.ReasonSubjectMismatch, "is not the workflow of alert", false},
		{"fingerprint not the labels'", "missing", "", "0123456789abcdef", v1alpha1.ReasonSubjectMismatch, "is not the fingerprint", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			id := tc.id
			if id == "" {
				id = v1alpha1.AlertWorkflowID("shop", tc.rule, tc.fingerprint)
			}
			subject := gate.AlertSubject{Namespace: "shop", Rule: tc.rule, Alert: alertrule.Alert{Labels: labels, Annotations: ann, Fingerprint: tc.fingerprint}}
			err := activitytest.AsRun(t, id, a, a.VerifyAlert, subject, nil)
			require.Error(t, err)
			assert.Contains(t, err.Error(), tc.message)
			assert.Contains(t, fmt.Sprintf("%v", err), tc.reason)
			p, ok := RecordableRefusal(err)
			assert.Equal(t, tc.recordable, ok)
			if tc.recordable {
				assert.Equal(t, "uid-"+tc.rule[:3], p.RuleUID)
				assert.Equal(t, alertrule.Runbook{URL: "https://runbooks.example/x", Summary: "crash looping"}, p.Runbook)
			}
		})
	}
}
