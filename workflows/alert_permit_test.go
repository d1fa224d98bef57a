package workflows

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/mock"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/workflow"

	"github.com/remedy-dev/remedy/activities/alerts"
	"github.com/remedy-dev/remedy/api/v1alpha1"
	"github.com/remedy-dev/remedy/internal/alertmanager"
	"github.com/remedy-dev/remedy/internal/alertrule"
)

// permitRun is one alert run in the test environment, with what the guard
// was asked and when the run created its RemediationRequest.
type permitRun struct {
	env      *testsuite.TestWorkflowEnvironment
	acquired []alerts.GuardAcquire
	released []ReleaseRequest
	created  []time.Time
}

func newPermitRun(t *testing.T) *permitRun {
	t.Helper()
	p := &permitRun{}
	env := (&testsuite.WorkflowTestSuite{}).NewTestWorkflowEnvironment()
	p.env = env
	env.RegisterWorkflowWithOptions(AlertWorkflow, workflow.RegisterOptions{Name: "AlertWorkflow"})
	env.RegisterActivity(&alerts.Alerts{})
	env.RegisterActivity(&alerts.Guards{})
	step := v1alpha1.RemediationStep{Name: "restart", Execution: v1alpha1.KubernetesExecutionSpec{Action: "restart",
		Target: v1alpha1.ObjectRef{APIVersion: "apps/v1", Kind: "Deployment", Namespace: "shop", Name: "web"}}}
	env.OnActivity(alertActs.VerifyAlert, mock.Anything, mock.Anything).Return(alerts.AlertPlan{RuleUID: "uid-1", Target: "shop/Deployment/web",
		Steps: []v1alpha1.RemediationStep{step}, Workloads: 1, Cooldown: time.Minute, BreakerWindow: time.Hour}, nil)
	env.OnActivity(alertActs.RecordAlert, mock.Anything, mock.Anything).Return(nil)
	env.OnActivity(guards.Acquire, mock.Anything, mock.Anything, mock.Anything).Return(
		func(_ context.Context, _ string, r alerts.GuardAcquire) error {
			p.acquired = append(p.acquired, r)
			return nil
		})
	env.OnActivity(alertActs.CreateAlertRequest, mock.Anything, mock.Anything).Return(
		func(context.Context, alerts.AlertRequestInput) (alerts.RequestRef, error) {
			p.created = append(p.created, env.Now())
			return alerts.RequestRef{Name: "rr", WorkflowID: "remediation/shop/rr"}, nil
		})
	env.OnActivity(alertActs.AwaitRequest, mock.Anything, mock.Anything, mock.Anything).Return(
		v1alpha1.RemediationRequestStatus{Phase: v1alpha1.PhaseCompleted}, nil)
	env.OnSignalExternalWorkflow(mock.Anything, v1alpha1.AlertGuardWorkflowID("shop"), "", SignalRelease, mock.Anything).Return(
		func(_, _, _, _ string, arg any) error {
			p.released = append(p.released, arg.(ReleaseRequest))
			return nil
		})
	return p
}

func (p *permitRun) at(d time.Duration, fn func()) { p.env.RegisterDelayedCallback(fn, d) }

func (p *permitRun) run() {
	l := map[string]string{"alertname": "Latency", "namespace": "shop", "deployment": "web"}
	p.env.ExecuteWorkflow(AlertWorkflow, AlertInput{Namespace: "shop", Rule: "latency",
		Alert: alertrule.Alert{Labels: l, Fingerprint: alertmanager.Fingerprint(l), StartsAt: time.Unix(0, 0)}})
}

// A held run takes only the permit that answers its own request: one
// signalled without the request's nonce, or with another request's, is
// dropped and the run stays held; the guard's own answer then runs it, and
// its release carries the nonce so that nobody else's ends its permit.
func TestAlertRunTakesOnlyThePermitThatAnswersItsRequest(t *testing.T) {
	for _, forged := range []struct {
		name   string
		permit Permit
	}{
		{"no nonce", Permit{Granted: true}},
		{"another request's nonce", Permit{Granted: true, RequestNonce: "0123456789abcdef0123456789abcdef"}},
		{"a refusal without the nonce", Permit{Reason: v1alpha1.ReasonCircuitOpen, Message: "forged"}},
	} {
		t.Run(forged.name, func(t *testing.T) {
			p := newPermitRun(t)
			p.at(time.Minute, func() { p.env.SignalWorkflow(SignalPermit, forged.permit) })
			p.at(2*time.Minute, func() {
				assert.Empty(t, p.created, "the forged permit ran nothing")
				v, err := p.env.QueryWorkflow(QueryStatus)
				require.NoError(t, err)
				var res AlertResult
				require.NoError(t, v.Get(&res))
				assert.Equal(t, v1alpha1.AlertQueued, res.Phase, "still held")
				assert.Equal(t, "AwaitingPermit", res.Reason)
				require.Len(t, p.acquired, 1)
				p.env.SignalWorkflow(SignalPermit, Permit{Granted: true, RequestNonce: p.acquired[0].Nonce})
			})
			p.at(3*time.Minute, func() { p.env.SignalWorkflow(SignalAlert, AlertSignal{Status: AlertResolved}) })
			start := p.env.Now()
			p.run()
			require.True(t, p.env.IsWorkflowCompleted())
			require.NoError(t, p.env.GetWorkflowError())
			require.Len(t, p.acquired, 1)
			nonce := p.acquired[0].Nonce
			assert.Len(t, nonce, 32, "a 128-bit nonce")
			require.Len(t, p.created, 1, "the guard's permit ran the remediation once")
			assert.False(t, p.created[0].Before(start.Add(2*time.Minute)), "not before the guard's permit")
			require.Len(t, p.released, 1)
			assert.Equal(t, ReleaseRequest{AlertID: p.acquired[0].AlertID, Nonce: nonce}, p.released[0])
		})
	}
}

// Two runs' nonces differ, so one run's permit cannot be replayed into another.
func TestEachRunHasItsOwnNonce(t *testing.T) {
	var nonces []string
	for range 2 {
		p := newPermitRun(t)
		p.at(time.Minute, func() {
			require.Len(t, p.acquired, 1)
			p.env.SignalWorkflow(SignalPermit, Permit{Granted: true, RequestNonce: p.acquired[0].Nonce})
		})
		p.at(2*time.Minute, func() { p.env.SignalWorkflow(SignalAlert, AlertSignal{Status: AlertResolved}) })
		p.run()
		require.NoError(t, p.env.GetWorkflowError())
		require.Len(t, p.created, 1)
		nonces = append(nonces, p.acquired[0].Nonce)
	}
	assert.NotEqual(t, nonces[0], nonces[1])
}

// The guard answers each request with its own nonce, counts every run it
// grants, and ends a permit only on a release that carries the nonce.
func TestGuardStateBindsPermitsAndReleasesToTheRequest(t *testing.T) {
	now := time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC)
	s := GuardState{Namespace: "shop"}
	req := AcquireRequest{AlertID: "alert/shop/latency/abc", Nonce: "n1", Rule: "latency", Target: "shop/Deployment/web",
		MaxConcurrent: 5, Cooldown: time.Minute, BreakerRuns: 3, BreakerWindow: time.Hour, Slots: 5}
	known, _ := s.add(req)
	require.False(t, known)
	out, _ := s.decide(now)
	require.Len(t, out, 1)
	assert.True(t, out[0].permit.Granted)
	assert.Equal(t, "n1", out[0].req.Nonce, "answered with the request's nonce")
	assert.Len(t, s.Runs[req.Target], 1, "the granted run is counted by the breaker")

	for _, forged := range []ReleaseRequest{{AlertID: req.AlertID}, {AlertID: req.AlertID, Nonce: "n2"}} {
		s.release(forged.AlertID, forged.Nonce, now)
		assert.Len(t, s.Running, 1, "a release without the request's nonce ends nothing: %+v", forged)
	}
	// Another run of the same alert is another request: it waits behind the first.
	next := req
	next.Nonce = "n2"
	known, granted := s.add(next)
	assert.False(t, known)
	assert.False(t, granted)
	out, _ = s.decide(now)
	assert.Empty(t, out, "busy target: queued")
	// A retried acquire of the holder is answered again, with its nonce.
	known, granted = s.add(req)
	assert.True(t, known)
	assert.True(t, granted)

	s.release(req.AlertID, req.Nonce, now)
	assert.Empty(t, s.Running)
	assert.Len(t, s.Queue, 1, "the other run's request stays queued")
	out, _ = s.decide(now.Add(2 * time.Minute))
	require.Len(t, out, 1)
	assert.Equal(t, "n2", out[0].req.Nonce)
	assert.Len(t, s.Runs[req.Target], 2, "each granted run counted")
}
