package alerts

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/client"

	"github.com/remedy-dev/remedy/api/v1alpha1"
	"github.com/remedy-dev/remedy/internal/alertmanager"
	"github.com/remedy-dev/remedy/internal/alertrule"
	"github.com/remedy-dev/remedy/test/harness"
	"github.com/remedy-dev/remedy/workflows"
)

// An alert workflow that holds its target's permit and is terminated,
// canceled or times out never releases it itself. The guard reclaims it
// once the run is closed and the RemediationRequest it started has ended,
// so the next alert for the target runs instead of waiting for ever.
// Long: one subtest for each way a run closes without releasing its permit.
func TestGuardReclaimsThePermitOfAClosedRun(t *testing.T) {
	ctx := context.Background()
	for _, how := range []string{"terminated", "canceled", "timed out"} {
		t.Run(how, func(t *testing.T) {
			ns := tenant(t, "web")
			held := labels(ns, "Held", "deployment", "web")
			// Fired before the rule exists, so the receiver starts nothing:
			// the test starts the run itself, with a timeout when it needs one.
			unmatched := received("unmatched")
			fire(t, held)
			require.Eventually(t, func() bool { return received("unmatched") > unmatched }, 30*time.Second, 100*time.Millisecond,
				"Alertmanager did not deliver the alert")
			r := heldRule(ns, "held", `alertname=~"Held|Next"`)
			// A guard that holds nothing for long ends soon after the runs.
			r.Spec.CircuitBreaker = &v1alpha1.CircuitBreakerSpec{MaxRuns: 3, Window: v1alpha1.DurationOf(time.Second)}
			rule := createRule(t, r)
			fp := alertmanager.Fingerprint(held)
			id := v1alpha1.AlertWorkflowID(ns, rule.Name, fp)
			opts := client.StartWorkflowOptions{ID: id, TaskQueue: workflows.TaskQueue}
			if how == "timed out" {
				opts.WorkflowExecutionTimeout = 20 * time.Second
			}
			run, err := harness.Temporal().ExecuteWorkflow(ctx, opts, workflows.AlertWorkflow,
				workflows.AlertInput{Namespace: ns, Rule: rule.Name, Alert: alertrule.Alert{Labels: held, Fingerprint: fp, StartsAt: time.Now()}})
			require.NoError(t, err)
			ruleStatus(t, rule, 60*time.Second, func(r *v1alpha1.RemediationRule) bool {
				rec := record(r, fp)
				return rec != nil && rec.Phase == v1alpha1.AlertRunning
			})
			switch how {
			case "terminated":
				require.NoError(t, harness.Temporal().TerminateWorkflow(ctx, id, run.GetRunID(), "fault"))
			case "canceled":
				require.NoError(t, harness.Temporal().CancelWorkflow(ctx, id, run.GetRunID()))
			}
			harness.WaitClosed(t, id, 60*time.Second)
			holds := func() bool {
				return slices.ContainsFunc(guardState(t, ns).Running, func(r workflows.AcquireRequest) bool { return r.AlertID == id })
			}
			if how != "canceled" {
				// A canceled run may still release on its way out; a terminated or timed-out one runs no more code.
				assert.True(t, holds(), "the closed run did not release its permit")
			}

			rrs := requestsOf(t, ns, rule.Name)
			require.Len(t, rrs, 1)
			rr := &rrs[0]
			if how == "canceled" {
				// A canceled run cancels its RemediationRequest on its way out and says so.
				harness.Eventually(t, rr, 60*time.Second, func(r *v1alpha1.RemediationRequest) bool { return r.Status.Phase.Terminal() })
				assert.Equal(t, v1alpha1.PhaseFailed, rr.Status.Phase)
				assert.Contains(t, rr.Status.Message, "cancel")
				rec := record(ruleStatus(t, rule, 30*time.Second, func(r *v1alpha1.RemediationRule) bool {
					rec := record(r, fp)
					return rec != nil && rec.Phase == v1alpha1.AlertCanceled
				}), fp)
				assert.Equal(t, v1alpha1.ReasonCanceled, rec.Reason)
			} else {
				// A terminated or timed-out run leaves its RemediationRequest running, holding the target until a person ends it.
				harness.Eventually(t, rr, 30*time.Second, func(r *v1alpha1.RemediationRequest) bool { return r.Status.WorkflowID != "" })
				require.NoError(t, harness.Temporal().CancelWorkflow(ctx, rr.Status.WorkflowID, ""))
				harness.Eventually(t, rr, 60*time.Second, func(r *v1alpha1.RemediationRequest) bool { return r.Status.Phase.Terminal() })
			}

			next := labels(ns, "Next", "deployment", "web")
			fire(t, next)
			nfp := alertmanager.Fingerprint(next)
			ruleStatus(t, rule, 60*time.Second, func(r *v1alpha1.RemediationRule) bool {
				rec := record(r, nfp)
				return rec != nil && rec.Phase == v1alpha1.AlertRunning
			})
			assert.False(t, holds(), "the permit was reclaimed")
			resolve(t, next)
			resolve(t, held)
			harness.WaitClosed(t, v1alpha1.AlertWorkflowID(ns, rule.Name, nfp), 60*time.Second)
			if how == "terminated" {
				harness.WaitClosed(t, v1alpha1.AlertGuardWorkflowID(ns), 60*time.Second)
				harness.ReplayHistory(t, v1alpha1.AlertGuardWorkflowID(ns), "alert-guard-reclaim.json")
			}
		})
	}
}
