package alerts

import (
	"context"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"

	"github.com/remedy-dev/remedy/api/v1alpha1"
	"github.com/remedy-dev/remedy/internal/alertmanager"
	"github.com/remedy-dev/remedy/internal/metrics"
	"github.com/remedy-dev/remedy/test/harness"
)

// sweeps reads the receiver's sweep counter (it runs in this process).
func sweeps(result string) float64 {
	return testutil.ToFloat64(metrics.AlertSweeps.WithLabelValues(result))
}

func running(t *testing.T, id string) bool {
	t.Helper()
	d, err := harness.Temporal().DescribeWorkflowExecution(context.Background(), id, "")
	require.NoError(t, err)
	return d.WorkflowExecutionInfo.GetStatus() == enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING
}

// With Alertmanager down the sweep skips its rounds (logged, counted
// unreachable) and resolves nothing; once it is back, empty, nothing is
// resolved either until its senders had the grace to send their alerts
// again; then the sweep works again and finds a lost resolve.
func TestAlertmanagerDownSweepDegradesGracefully(t *testing.T) {
	ctx := context.Background()
	ns := tenant(t, "web")
	l := labels(ns, "AMDown", "deployment", "web")
	id := firedUntil(t, createRule(t, restartRule(ns, "amdown", "AMDown")), l, v1alpha1.AlertDone)

	unreachable, restarted, ok := sweeps("unreachable"), sweeps("restarted"), sweeps("ok")
	am := harness.Alertmanager()
	am.Kill()
	up := false
	t.Cleanup(func() {
		if !up {
			_ = am.Restart(ctx)
		}
	})
	require.Eventually(t, func() bool { return sweeps("unreachable")-unreachable >= 2 }, 30*time.Second, 100*time.Millisecond,
		"each round while it is down is counted unreachable")
	assert.True(t, running(t, id), "nothing is resolved on a guess")

	require.NoError(t, am.Restart(ctx))
	up = true
	// Its sender (Prometheus, every resend delay) sends the firing alert again.
	fire(t, l)
	// Rounds, not seconds: a loaded machine stretches both the restart and the rounds.
	require.Eventually(t, func() bool { return sweeps("restarted") > restarted }, 30*time.Second, 100*time.Millisecond,
		"rounds within the grace after its start are skipped")
	require.Eventually(t, func() bool { return sweeps("ok") > ok }, harness.SweepGrace+30*time.Second, 100*time.Millisecond,
		"the sweep works again")
	assert.True(t, running(t, id), "no false resolve after Alertmanager came back empty")

	// It recovers: a resolve the receiver never passes on is found again.
	harness.SetAlertsTemporal(lostResolves{harness.Temporal()})
	t.Cleanup(func() { harness.SetAlertsTemporal(nil) })
	resolve(t, l)
	harness.WaitClosed(t, id, 30*time.Second)
}

// firedUntil fires the alert and waits until the rule records it in phase;
// it returns the alert's workflow ID.
func firedUntil(t *testing.T, rule *v1alpha1.RemediationRule, l map[string]string, phase string) string {
	t.Helper()
	fp := alertmanager.Fingerprint(l)
	fire(t, l)
	ruleStatus(t, rule, 60*time.Second, func(r *v1alpha1.RemediationRule) bool {
		rec := record(r, fp)
		return rec != nil && rec.Phase == phase
	})
	return v1alpha1.AlertWorkflowID(rule.Namespace, rule.Name, fp)
}
