package alerts

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/temporal"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	ctrlclient "sigs.k8s.io/controller-runtime/pkg/client"
	ctrlfake "sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/remedy-dev/remedy/activities/gate"
	"github.com/remedy-dev/remedy/activities/internal/activitytest"
	"github.com/remedy-dev/remedy/api/v1alpha1"
)

// A run's match, start and refusal are counted once, however often the
// write that records them is retried (an activity whose write landed and
// whose answer was lost); a new run of the same alert counts again.
func TestAlertRecordCountsOncePerRun(t *testing.T) {
	now := metav1.NewTime(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	rec := func(phase, reason string) v1alpha1.AlertRecord {
		return v1alpha1.AlertRecord{Fingerprint: "0123456789abcdef", Phase: phase, Reason: reason}
	}
	var st v1alpha1.RemediationRuleStatus
	type step struct {
		in   AlertRecordInput
		run  string
		want alertCounts
	}
	matched := AlertRecordInput{Matched: true, Record: rec(v1alpha1.AlertQueued, "Matched")}
	started := AlertRecordInput{Started: true, Record: rec(v1alpha1.AlertRunning, "Started")}
	done := AlertRecordInput{Record: rec(v1alpha1.AlertDone, "Completed")}
	refused := AlertRecordInput{Guard: "CircuitOpen", Record: rec(v1alpha1.AlertRefused, "CircuitOpen")}
	for i, s := range []step{
		{matched, "run-1", alertCounts{matched: true}},
		{matched, "run-1", alertCounts{}},
		{started, "run-1", alertCounts{started: true}},
		{started, "run-1", alertCounts{}},
		{done, "run-1", alertCounts{outcome: "Done"}},
		{started, "run-1", alertCounts{}},
		{matched, "run-2", alertCounts{matched: true}},
		{refused, "run-2", alertCounts{refused: true, outcome: "Refused"}},
		{refused, "run-2", alertCounts{}},
	} {
		got := mergeAlertRecord(&st, 1, s.in, s.run, now)
		assert.Equal(t, s.want, got, "step %d", i)
	}
	assert.Equal(t, int64(2), st.Matches, "two runs matched")
	assert.Equal(t, int64(1), st.RunsStarted, "one run started")
	assert.Len(t, st.Alerts, 1)
	assert.Equal(t, "run-2", st.Alerts[0].RunID)
	assert.False(t, st.Alerts[0].Started, "the second run started nothing")
}

// Only the alert's own open run writes the rule's status: another workflow,
// or a run under the alert's ID that is not Remedy's AlertWorkflow on
// Remedy's queue, writes no counter, record or refusal.
func TestRecordAlertOnlyByTheAlertsOpenRun(t *testing.T) {
	const fp = "0123456789abcdef"
	id := v1alpha1.AlertWorkflowID("shop", "restart-web", fp)
	in := AlertRecordInput{Namespace: "shop", Rule: "restart-web", RuleUID: "rule-uid", Matched: true,
		Record: v1alpha1.AlertRecord{Fingerprint: fp, Phase: v1alpha1.AlertRefused, Reason: "CircuitOpen", Message: "forged"}}
	tests := []struct {
		name, caller, runType string
		written               bool
	}{
		{name: "the alert's open run", caller: id, runType: gate.AlertWorkflowType, written: true},
		{name: "another workflow", caller: "rogue/shop", runType: gate.AlertWorkflowType},
		{name: "a rogue run under the alert's ID", caller: id, runType: "Rogue"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := runtime.NewScheme()
			require.NoError(t, v1alpha1.AddToScheme(s))
			rule := &v1alpha1.RemediationRule{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "restart-web", UID: "rule-uid"}}
			c := ctrlfake.NewClientBuilder().WithScheme(s).WithObjects(rule).WithStatusSubresource(rule).Build()
			a := &Alerts{Client: c, Runs: openRunsOf(tt.runType)}
			err := activitytest.AsRun(t, tt.caller, a, a.RecordAlert, in, nil)
			require.NoError(t, c.Get(context.Background(), ctrlclient.ObjectKeyFromObject(rule), rule))
			if tt.written {
				require.NoError(t, err)
				assert.Equal(t, int64(1), rule.Status.Matches)
				return
			}
			var app *temporal.ApplicationError
			require.True(t, errors.As(err, &app), "got %v", err)
			assert.Equal(t, v1alpha1.ReasonSubjectMismatch, app.Type())
			assert.Zero(t, rule.Status.Matches)
			assert.Empty(t, rule.Status.Alerts)
			assert.Nil(t, rule.Status.LastRefusal)
		})
	}
}
