package activities

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

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
		{done, "run-1", alertCounts{}},
		{started, "run-1", alertCounts{}},
		{matched, "run-2", alertCounts{matched: true}},
		{refused, "run-2", alertCounts{refused: true}},
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
