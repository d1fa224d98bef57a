package alerts

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/api/meta"

	"github.com/remedy-dev/remedy/api/v1alpha1"
	"github.com/remedy-dev/remedy/internal/alertmanager"
	"github.com/remedy-dev/remedy/test/harness"
	"github.com/remedy-dev/remedy/workflows"
)

// heldRule restarts the alert's Deployment through a step that waits for a
// person's approval, so each run holds its guard permit until it is decided.
func heldRule(ns, name, matcher string) *v1alpha1.RemediationRule {
	r := restartRule(ns, name, "")
	r.Spec.Matchers = []string{matcher}
	r.Spec.Template.Steps[0].Execution.Approval = &v1alpha1.ApprovalSpec{Required: true, Timeout: v1alpha1.DurationOf(time.Hour)}
	return r
}

func guardState(t *testing.T, ns string) workflows.GuardState {
	t.Helper()
	v, err := harness.Temporal().QueryWorkflow(context.Background(), v1alpha1.AlertGuardWorkflowID(ns), "", workflows.QueryStatus)
	require.NoError(t, err)
	var s workflows.GuardState
	require.NoError(t, v.Get(&s))
	return s
}

// The namespace budget is a percentage of its workloads: with 10
// Deployments and maxPercent 20, two alerts run at once and the others
// wait Queued (not refused, and no storm: maxConcurrent is not reached).
func TestNamespaceBudgetIsAPercentOfWorkloads(t *testing.T) {
	var names []string
	for i := range 10 {
		names = append(names, fmt.Sprintf("w%d", i))
	}
	ns := tenant(t, names...)
	r := heldRule(ns, "budget", `alertname="Budget"`)
	r.Spec.MaxConcurrent = 10
	r.Spec.Budget = &v1alpha1.BudgetSpec{MaxPercent: 20}
	rule := createRule(t, r)
	var batch []amAlert
	for _, d := range names[:5] {
		batch = append(batch, amAlert{Labels: labels(ns, "Budget", "deployment", d), StartsAt: time.Now(), EndsAt: time.Now().Add(time.Hour)})
	}
	post(t, batch...)
	ruleStatus(t, rule, 90*time.Second, func(r *v1alpha1.RemediationRule) bool { return r.Status.Matches == 5 && r.Status.RunsStarted == 2 })
	// The guard holds all five requests: another start would need one to end.
	var s workflows.GuardState
	require.Eventually(t, func() bool { s = guardState(t, ns); return len(s.Running)+len(s.Queue) == 5 }, 30*time.Second, 100*time.Millisecond,
		"the guard does not hold the five requests")
	assert.Len(t, s.Running, 2, "20%% of 10 workloads")
	assert.Len(t, s.Queue, 3, "the rest wait")
	got := ruleStatus(t, rule, time.Second, func(*v1alpha1.RemediationRule) bool { return true })
	assert.Equal(t, int64(2), got.Status.RunsStarted)
	assert.Len(t, requestsOf(t, ns, rule.Name), 2)
	queued := 0
	for _, a := range got.Status.Alerts {
		if a.Phase == v1alpha1.AlertQueued {
			queued++
		}
	}
	assert.Equal(t, 3, queued, "blocked by the budget: Queued, not Refused")
	assert.False(t, meta.IsStatusConditionTrue(got.Status.Conditions, v1alpha1.ConditionStorm))
	for _, a := range batch {
		resolve(t, a.Labels)
	}
	for _, a := range batch {
		harness.WaitClosed(t, v1alpha1.AlertWorkflowID(ns, rule.Name, alertmanager.Fingerprint(a.Labels)), 60*time.Second)
	}
}
