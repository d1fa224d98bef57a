package workflows

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/temporal"

	"github.com/remedy-dev/remedy/activities/drift"
	kv1 "github.com/remedy-dev/remedy/api/kausality/v1alpha1"
	"github.com/remedy-dev/remedy/api/v1alpha1"
)

func TestDriftUndeliveredReportDoesNotStopTheWorkflow(t *testing.T) {
	env := newDriftEnv(t, resolveAt(1, drift.DriftParentChanged))
	attempts := map[string]int{}
	env.postErr = func(in drift.PostReportInput) error {
		attempts[in.URL]++
		if in.URL == "https://a.example/drift" {
			return temporal.NewNonRetryableApplicationError("404", v1alpha1.ReasonCallbackRejected, nil)
		}
		if attempts[in.URL] < 3 {
			return fmt.Errorf("connection refused")
		}
		return nil
	}
	env.signalAt(0, driftSignal("a1"))
	env.ExecuteWorkflow(DriftWorkflow, DriftInput{Parent: driftParent})
	res := env.result(t)
	assert.Equal(t, []ResolvedDrift{{ID: "a1", Reason: drift.DriftParentChanged}}, res.Closed)
	assert.Equal(t, 2, attempts["https://a.example/drift"], "a rejected report is not retried: once per phase")
	assert.Equal(t, 4, attempts["https://b.example/drift"], "2 failures then success for Detected, then Resolved")
	assert.Equal(t, []UndeliveredReport{
		{ID: "a1", Phase: "Detected", URL: "https://a.example/drift", Error: "404"},
		{ID: "a1", Phase: "Resolved", URL: "https://a.example/drift", Error: "404"},
	}, res.Status.Undelivered, "the status records what never arrived, with the receiver's error")
}

func TestDriftUndeliveredReportsAreBoundedAndCarried(t *testing.T) {
	env := newDriftEnv(t, resolveAt(1, drift.DriftParentChanged))
	env.postErr = func(drift.PostReportInput) error {
		return temporal.NewNonRetryableApplicationError("not acknowledged: slack is down", v1alpha1.ReasonCallbackRejected, nil)
	}
	carried := make([]UndeliveredReport, maxUndelivered)
	for i := range carried {
		carried[i] = UndeliveredReport{ID: fmt.Sprintf("old%d", i), Phase: "Detected", URL: "https://a.example/drift", Error: "x"}
	}
	env.signalAt(0, driftSignal("a1"))
	env.ExecuteWorkflow(DriftWorkflow, DriftInput{Parent: driftParent, Undelivered: carried})
	got := env.result(t).Status.Undelivered
	require.Len(t, got, maxUndelivered)
	assert.Equal(t, "old4", got[0].ID, "the oldest are dropped")
	assert.Equal(t, UndeliveredReport{ID: "a1", Phase: "Resolved", URL: "https://b.example/drift", Error: "not acknowledged: slack is down"},
		got[len(got)-1])
}

func TestDriftReportOfKeepsEveryKausalityField(t *testing.T) {
	s := driftSignal("a1")
	s.ParentObservedGeneration, s.ParentLifecyclePhase, s.ChildGeneration = 3, kv1.LifecycleInitialized, 7
	s.RequestUID, s.FieldManager, s.DryRun = "req-1", "kube-controller-manager", true
	r := DriftReportOf(s, driftReportDetected)
	assert.Equal(t, kv1.DriftObjectReference{APIVersion: "apps/v1", Kind: "Deployment", Namespace: "shop", Name: "web", UID: "uid-web",
		Generation: 3, ObservedGeneration: 3, LifecyclePhase: "Initialized"}, r.Spec.Parent)
	assert.Equal(t, kv1.DriftObjectReference{APIVersion: "apps/v1", Kind: "ReplicaSet", Namespace: "shop", Name: "web-a1", UID: "uid-rs-a1",
		Generation: 7}, r.Spec.Child)
	assert.Equal(t, kv1.DriftRequestContext{User: s.User, Groups: s.Groups, UID: "req-1", FieldManager: "kube-controller-manager",
		Operation: "UPDATE", DryRun: true}, r.Spec.Request)
}
