package alerts

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"

	"github.com/remedy-dev/remedy/api/v1alpha1"
	"github.com/remedy-dev/remedy/internal/alertmanager"
	"github.com/remedy-dev/remedy/test/harness"
	"github.com/remedy-dev/remedy/workflows"
)

// A run held behind a busy target is sent a forged permit, as anyone who
// can reach Temporal could (granted, without the nonce of its request, and
// with a nonce of its own), and the guard a forged release of the permit
// holder: the held run stays held, the holder keeps its permit, and
// nothing more runs. Once the holder ends, the guard's own permit runs the
// held alert, and the breaker has counted both runs.
func TestForgedPermitLeavesAHeldRunHeld(t *testing.T) {
	ctx := context.Background()
	ns := tenant(t, "web")
	r := heldRule(ns, "permit", `alertname=~"Holder|Held"`)
	r.Spec.CircuitBreaker = &v1alpha1.CircuitBreakerSpec{MaxRuns: 5, Window: v1alpha1.DurationOf(time.Hour)}
	rule := createRule(t, r)
	holder, held := labels(ns, "Holder", "deployment", "web"), labels(ns, "Held", "deployment", "web")
	hfp, fp := alertmanager.Fingerprint(holder), alertmanager.Fingerprint(held)
	holderID, id := v1alpha1.AlertWorkflowID(ns, rule.Name, hfp), v1alpha1.AlertWorkflowID(ns, rule.Name, fp)
	fire(t, holder)
	ruleStatus(t, rule, 60*time.Second, func(r *v1alpha1.RemediationRule) bool {
		rec := record(r, hfp)
		return rec != nil && rec.Phase == v1alpha1.AlertRunning
	})
	fire(t, held)
	queued := func(s workflows.GuardState) bool {
		return slices.ContainsFunc(s.Queue, func(r workflows.AcquireRequest) bool { return r.AlertID == id })
	}
	require.Eventually(t, func() bool { return queued(guardState(t, ns)) }, 60*time.Second, 200*time.Millisecond, "the held run asked the guard")
	target := guardState(t, ns).Queue[0].Target

	tc := harness.Temporal()
	for _, p := range []workflows.Permit{{Granted: true}, {Granted: true, RequestNonce: "00000000000000000000000000000000"}} {
		require.NoError(t, tc.SignalWorkflow(ctx, id, "", workflows.SignalPermit, p))
	}
	require.NoError(t, tc.SignalWorkflow(ctx, v1alpha1.AlertGuardWorkflowID(ns), "", workflows.SignalRelease, workflows.ReleaseRequest{AlertID: holderID}))

	// A query is answered once the workflow task that handles every
	// signal recorded before it completed: what the held run did with the
	// forged permits is in its history by then.
	v, err := tc.QueryWorkflow(ctx, id, "", workflows.QueryStatus)
	require.NoError(t, err)
	var res workflows.AlertResult
	require.NoError(t, v.Get(&res))
	assert.Equal(t, v1alpha1.AlertQueued, res.Phase, "the forged permits are not taken")
	assert.Equal(t, "AwaitingPermit", res.Reason)
	s := guardState(t, ns)
	assert.True(t, slices.ContainsFunc(s.Running, func(r workflows.AcquireRequest) bool { return r.AlertID == holderID }), "the forged release ended nothing")
	assert.True(t, queued(s), "the held run still waits for the guard")
	assert.Len(t, s.Runs[target], 1, "one run granted, one counted")
	assert.Len(t, requestsOf(t, ns, rule.Name), 1, "nothing more runs")
	assert.Equal(t, 2, harness.SignalsReceived(t, id, workflows.SignalPermit), "both forged permits reached the run")
	assert.Zero(t, scheduled(t, id, "CreateAlertRequest"), "the held run started no RemediationRequest")

	resolve(t, holder)
	ruleStatus(t, rule, 60*time.Second, func(r *v1alpha1.RemediationRule) bool {
		rec := record(r, fp)
		return rec != nil && rec.Phase == v1alpha1.AlertRunning
	})
	assert.Len(t, guardState(t, ns).Runs[target], 2, "the guard's permit is counted by the breaker")
	assert.Len(t, requestsOf(t, ns, rule.Name), 2)
	assert.Equal(t, 1, scheduled(t, id, "CreateAlertRequest"), "the guard's permit started it")
	resolve(t, held)
	harness.WaitClosed(t, id, 60*time.Second)
	harness.WaitClosed(t, holderID, 60*time.Second)
}

// scheduled counts the activities of type name the workflow's current run scheduled.
func scheduled(t *testing.T, workflowID, name string) int {
	t.Helper()
	n := 0
	it := harness.Temporal().GetWorkflowHistory(context.Background(), workflowID, "", false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	for it.HasNext() {
		e, err := it.Next()
		require.NoError(t, err)
		if a := e.GetActivityTaskScheduledEventAttributes(); a != nil && a.GetActivityType().GetName() == name {
			n++
		}
	}
	return n
}
