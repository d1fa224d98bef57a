package faults

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/remedy-dev/remedy/api/v1alpha1"
	"github.com/remedy-dev/remedy/test/harness"
	"github.com/remedy-dev/remedy/test/procs"
)

// leaderFailover: two operators with the manifest's leader election; a run
// waits for approval; the leader is killed and a person approves with
// kubectl. The follower takes over and relays it: one write, within the
// lease duration plus a few seconds.
func leaderFailover(t *testing.T, p *parts) {
	begun := time.Now()
	second := procs.StartPod(t, procs.Deployment(t, "remedy-operator"), 1)
	require.Eventually(t, func() bool {
		code, _ := procs.Get(second.URL("probes", "/readyz"))
		return code == 200
	}, 90*time.Second, 100*time.Millisecond, "second operator never ready:\n%s", second.Out)
	procs.RouteService(t, "remedy-webhook", second)
	require.True(t, procs.Leads(p.operator) && !procs.Leads(second), "the first operator leads")
	leader := p.operator

	ns := harness.Namespace(t)
	gen := target(t, ns)
	spec := scaleSpec(ns, 4)
	spec.Approval = &v1alpha1.ApprovalSpec{Required: true, Timeout: v1alpha1.DurationOf(10 * time.Minute)}
	k := settle(t, execution(t, ns, "scale-web", spec), v1alpha1.PhaseWaitingApproval, 90*time.Second)

	killed := time.Now()
	leader.Kill()
	// The dead pod fails readiness, so the EndpointSlice controller takes it
	// out of the webhook Service.
	procs.Unroute(t, leader)
	p.kubectl.Run(t, "patch", "rar", k.Status.ApprovalRequestRef.Name, "-n", ns, "--subresource=status", "--type=merge",
		"-p", `{"status":{"decision":"Approved","decisionMessage":"fault suite"}}`, "--as=alice", "--as-group=sre-approvers")
	k = harness.Eventually(t, k, procs.LeaseDuration+30*time.Second, func(k *v1alpha1.KubernetesExecution) bool {
		return k.Status.Phase == v1alpha1.PhaseRollbackReady || k.Status.Phase.Terminal()
	})
	took := time.Since(killed)
	led := procs.Leads(second)
	k = settle(t, k, v1alpha1.PhaseCompleted, time.Minute)
	t.Logf("failover: the run went on %.1fs after the leader was killed (lease %s)", took.Seconds(), procs.LeaseDuration)
	// A follower tries every RetryPeriod (2s) jittered up to 2.2x and sees
	// the expiry up to one try late: the lease plus two tries at worst.
	assert.Less(t, took, procs.LeaseDuration+9*time.Second, "handover and relay within the lease duration plus a few seconds")
	assert.True(t, led, "the follower leads")
	assert.Equal(t, gen+1, generation(t, ns, "web"), "one write")
	stays(t, ns, "web", gen+1, 2*time.Second, "no second write")

	outcome := "PASS"
	if t.Failed() {
		outcome = "FAIL"
	}
	tableMu.Lock()
	table[[2]string{"operator x2", "leader failover"}] = row{outcome: fmt.Sprintf("%s (%.0fs)", outcome, time.Since(begun).Seconds()),
		detail: fmt.Sprintf("kubectl approval while the leader was dead; run went on %.1fs after the kill (lease %s); generation +%d; %s",
			took.Seconds(), procs.LeaseDuration, generation(t, ns, "web")-gen, k.Status.Phase)}
	tableMu.Unlock()
	// The survivor serves the suite from here on.
	p.operator = second
}
