package v1alpha1

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestKindName(t *testing.T) {
	assert.Equal(t, "Deployment/web", ObjectRef{APIVersion: "apps/v1", Kind: "Deployment", Namespace: "shop", Name: "web"}.KindName())
}

func TestStepsProgress(t *testing.T) {
	for _, tc := range []struct {
		name  string
		steps []StepStatus
		total int
		want  string
	}{
		{"not started", nil, 2, "0/2"},
		{"first running", []StepStatus{{Name: "a", Phase: PhaseExecuting}, {Name: "b"}}, 2, "0/2"},
		{"first done", []StepStatus{{Name: "a", Phase: PhaseRollbackReady}, {Name: "b", Phase: PhaseValidating}}, 2, "1/2"},
		{"all done", []StepStatus{{Name: "a", Phase: PhaseCompleted}, {Name: "b", Phase: PhaseCompleted}}, 2, "2/2"},
		{"second failed", []StepStatus{{Name: "a", Phase: PhaseCompleted}, {Name: "b", Phase: PhaseFailed}}, 2, "1/2"},
	} {
		t.Run(tc.name, func(t *testing.T) { assert.Equal(t, tc.want, StepsProgress(tc.steps, tc.total)) })
	}
}

func TestDecisionText(t *testing.T) {
	for _, tc := range []struct {
		d    Decision
		by   string
		via  DecidedVia
		want string
	}{
		{DecisionApproved, "alice", DecidedViaKubectl, "Approved by alice via kubectl"},
		{DecisionRejected, "bob", DecidedViaSignal, "Rejected by bob via temporal-signal"},
		{DecisionExpired, "timer", DecidedViaTimer, "Expired by timer"},
		{DecisionExpired, "remedy-operator", DecidedViaTimer, "Expired by remedy-operator (timer)"},
	} {
		t.Run(tc.want, func(t *testing.T) { assert.Equal(t, tc.want, DecisionText(tc.d, tc.by, tc.via)) })
	}
}

func TestFinishedAt(t *testing.T) {
	at := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	conds := []metav1.Condition{{Type: ConditionReady, Status: metav1.ConditionTrue, LastTransitionTime: metav1.NewTime(at)}}
	got, ok := FinishedAt(PhaseCompleted, conds)
	assert.True(t, ok)
	assert.Equal(t, at, got)
	_, ok = FinishedAt(PhaseRollbackReady, conds)
	assert.False(t, ok, "a run in its rollback window is not finished")
	_, ok = FinishedAt(PhaseFailed, nil)
	assert.False(t, ok, "no Ready condition: no finishing time")
}
