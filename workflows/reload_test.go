package workflows

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/mock"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/workflow"

	"github.com/remedy-dev/remedy/activities"
	"github.com/remedy-dev/remedy/internal/metrics"
)

func reloadInput(pending ...ConfigChange) ReloadInput {
	return ReloadInput{Namespace: "shop", Kind: "Deployment", Name: "web", Scope: "prod",
		Debounce: 5 * time.Second, RetryInitial: time.Second, RetryMax: 30 * time.Second, Pending: pending}
}

type restartCall struct {
	at time.Time
	in activities.RestartInput
}

// newReloadEnv records every RestartWorkload attempt; outcome decides each one.
func newReloadEnv(t *testing.T, outcome func(activities.RestartInput) (activities.RestartResult, error)) (*testsuite.TestWorkflowEnvironment, *[]restartCall) {
	return newReloadEnvOf(t, &testsuite.WorkflowTestSuite{}, outcome)
}

func newReloadEnvOf(t *testing.T, s *testsuite.WorkflowTestSuite, outcome func(activities.RestartInput) (activities.RestartResult, error)) (*testsuite.TestWorkflowEnvironment, *[]restartCall) {
	env := s.NewTestWorkflowEnvironment()
	env.RegisterWorkflowWithOptions(ReloadWorkflow, workflow.RegisterOptions{Name: "ReloadWorkflow"})
	env.RegisterActivity(&activities.Reload{})
	var calls []restartCall
	env.OnActivity(reload.RestartWorkload, mock.Anything, mock.Anything).Return(
		func(_ context.Context, in activities.RestartInput) (activities.RestartResult, error) {
			calls = append(calls, restartCall{at: env.Now(), in: in})
			return outcome(in)
		})
	return env, &calls
}

func restarted(activities.RestartInput) (activities.RestartResult, error) {
	return activities.RestartResult{Restarted: true}, nil
}

func signalAt(env *testsuite.TestWorkflowEnvironment, d time.Duration, c ConfigChange) {
	env.RegisterDelayedCallback(func() { env.SignalWorkflow(SignalConfigChanged, c) }, d)
}

func reloadResult(t *testing.T, env *testsuite.TestWorkflowEnvironment) ReloadStatus {
	t.Helper()
	require.True(t, env.IsWorkflowCompleted())
	require.NoError(t, env.GetWorkflowError())
	var r ReloadResult
	require.NoError(t, env.GetWorkflowResult(&r))
	return r.Status
}

func TestReloadCoalescesBurstIntoOneRestart(t *testing.T) {
	env, calls := newReloadEnv(t, restarted)
	start := env.Now()
	for i := 1; i < 20; i++ {
		signalAt(env, time.Duration(i)*200*time.Millisecond, ConfigChange{ConfigMap: "app", Hash: fmt.Sprintf("h%d", i)})
	}
	env.ExecuteWorkflow(ReloadWorkflow, reloadInput(ConfigChange{ConfigMap: "app", Hash: "h0"}))

	st := reloadResult(t, env)
	require.Len(t, *calls, 1, "20 edits within the window restart once")
	c := (*calls)[0]
	assert.Equal(t, []activities.ConfigChange{{ConfigMap: "app", Hash: "h19"}}, c.in.Changes)
	assert.Equal(t, 19, c.in.Coalesced)
	assert.Equal(t, start.Add(19*200*time.Millisecond+5*time.Second), c.at, "due one window after the last edit")
	assert.Equal(t, 1, st.TotalRestarts)
	assert.Empty(t, st.Pending)
	assert.Equal(t, c.in.RestartedAt, st.LastRestart)
}

func TestReloadMergesConfigMapsAndIgnoresRepeats(t *testing.T) {
	tests := []struct {
		name    string
		signals map[time.Duration]ConfigChange
		want    []ConfigChange
		wantAt  time.Duration
	}{
		{
			name:    "two ConfigMaps edited together give one restart",
			signals: map[time.Duration]ConfigChange{time.Second: {ConfigMap: "flags", Hash: "f1"}},
			want:    []ConfigChange{{ConfigMap: "app", Hash: "a1"}, {ConfigMap: "flags", Hash: "f1"}},
			wantAt:  6 * time.Second,
		},
		{
			name:    "a repeated hash does not push the due time",
			signals: map[time.Duration]ConfigChange{4 * time.Second: {ConfigMap: "app", Hash: "a1"}},
			want:    []ConfigChange{{ConfigMap: "app", Hash: "a1"}},
			wantAt:  5 * time.Second,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			env, calls := newReloadEnv(t, restarted)
			start := env.Now()
			for d, c := range tt.signals {
				signalAt(env, d, c)
			}
			env.ExecuteWorkflow(ReloadWorkflow, reloadInput(ConfigChange{ConfigMap: "app", Hash: "a1"}))
			reloadResult(t, env)
			require.Len(t, *calls, 1)
			assert.Equal(t, tt.want, (*calls)[0].in.Changes)
			assert.Equal(t, start.Add(tt.wantAt), (*calls)[0].at)
		})
	}
}

func TestReloadRetriesWithBoundedBackoffAndFixedToken(t *testing.T) {
	failures := 3
	env, calls := newReloadEnv(t, func(activities.RestartInput) (activities.RestartResult, error) {
		if failures > 0 {
			failures--
			return activities.RestartResult{}, errors.New("admission denied")
		}
		return activities.RestartResult{Restarted: true}, nil
	})
	env.ExecuteWorkflow(ReloadWorkflow, reloadInput(ConfigChange{ConfigMap: "app", Hash: "a1"}))

	st := reloadResult(t, env)
	require.Len(t, *calls, 4)
	for i, gap := range []time.Duration{time.Second, 2 * time.Second, 4 * time.Second} {
		assert.Equal(t, gap, (*calls)[i+1].at.Sub((*calls)[i].at), "backoff before attempt %d", i+2)
		assert.Equal(t, (*calls)[0].in.RestartedAt, (*calls)[i+1].in.RestartedAt, "one token per intent")
	}
	assert.Equal(t, 1, st.TotalRestarts)
	assert.Empty(t, st.LastError)
}

func TestReloadBackoffIsCapped(t *testing.T) {
	in := reloadInput()
	in.RetryInitial, in.RetryMax = time.Second, 4*time.Second
	o := reloadOptions(in)
	assert.Equal(t, 4*time.Second, o.RetryPolicy.MaximumInterval)
	assert.Equal(t, time.Second, o.RetryPolicy.InitialInterval)
	assert.Equal(t, 30*time.Second, reloadOptions(ReloadInput{}).RetryPolicy.MaximumInterval)
}

func TestReloadNewerHashSupersedesFailingIntent(t *testing.T) {
	env, calls := newReloadEnv(t, func(in activities.RestartInput) (activities.RestartResult, error) {
		if in.Changes[0].Hash == "stale" {
			return activities.RestartResult{}, errors.New("server unavailable")
		}
		return activities.RestartResult{Restarted: true}, nil
	})
	start := env.Now()
	signalAt(env, 10*time.Second, ConfigChange{ConfigMap: "app", Hash: "fresh"})
	env.ExecuteWorkflow(ReloadWorkflow, reloadInput(ConfigChange{ConfigMap: "app", Hash: "stale"}))

	st := reloadResult(t, env)
	last := (*calls)[len(*calls)-1]
	assert.Equal(t, "fresh", last.in.Changes[0].Hash)
	assert.Equal(t, start.Add(15*time.Second), last.at, "the fresh change is debounced again, then applied")
	for _, c := range (*calls)[:len(*calls)-1] {
		assert.Equal(t, "stale", c.in.Changes[0].Hash)
	}
	assert.Equal(t, 1, st.TotalRestarts)
	assert.Empty(t, st.Pending)
}

func TestReloadEndsWhenWorkloadIsGone(t *testing.T) {
	reg := prometheus.NewRegistry()
	var s testsuite.WorkflowTestSuite
	s.SetMetricsHandler(metrics.NewTemporalHandler(reg))
	env, calls := newReloadEnvOf(t, &s, func(activities.RestartInput) (activities.RestartResult, error) {
		return activities.RestartResult{}, temporal.NewNonRetryableApplicationError("gone", activities.ReasonWorkloadGone, nil)
	})
	env.ExecuteWorkflow(ReloadWorkflow, reloadInput(ConfigChange{ConfigMap: "app", Hash: "a1"}, ConfigChange{ConfigMap: "flags", Hash: "b1"}))
	st := reloadResult(t, env)
	assert.Len(t, *calls, 1)
	assert.Empty(t, st.Pending)
	assert.Contains(t, st.LastError, "gone")
	dropped, err := testutil.GatherAndCount(reg, metrics.MetricReloadDroppedRestarts)
	require.NoError(t, err)
	require.Equal(t, 1, dropped, "one series")
	families, err := reg.Gather()
	require.NoError(t, err)
	for _, f := range families {
		if f.GetName() == metrics.MetricReloadDroppedRestarts {
			assert.Equal(t, 2.0, f.GetMetric()[0].GetCounter().GetValue(), "both pending changes are dropped")
		}
	}
}

func TestReloadStatusQueryShowsPending(t *testing.T) {
	env, _ := newReloadEnv(t, restarted)
	var during ReloadStatus
	env.RegisterDelayedCallback(func() {
		v, err := env.QueryWorkflow(QueryStatus)
		require.NoError(t, err)
		require.NoError(t, v.Get(&during))
	}, 2*time.Second)
	env.ExecuteWorkflow(ReloadWorkflow, reloadInput(ConfigChange{ConfigMap: "app", Hash: "a1"}))
	after := reloadResult(t, env)
	assert.Equal(t, []ConfigChange{{ConfigMap: "app", Hash: "a1"}}, during.Pending)
	assert.NotEmpty(t, during.DueAt)
	assert.Empty(t, after.Pending)
	assert.NotEmpty(t, after.LastRestart)
}

func TestReloadContinuesAsNewCarryingPending(t *testing.T) {
	env, calls := newReloadEnv(t, func(activities.RestartInput) (activities.RestartResult, error) {
		return activities.RestartResult{}, errors.New("server unavailable")
	})
	// Every intent keeps failing until a newer change supersedes it, cycle after cycle.
	for i := 1; i <= maxCyclesPerRun; i++ {
		signalAt(env, time.Duration(i)*10*time.Second, ConfigChange{ConfigMap: "app", Hash: fmt.Sprintf("h%d", i)})
	}
	env.ExecuteWorkflow(ReloadWorkflow, reloadInput(ConfigChange{ConfigMap: "app", Hash: "h0"}))

	require.True(t, env.IsWorkflowCompleted())
	var can *workflow.ContinueAsNewError
	require.ErrorAs(t, env.GetWorkflowError(), &can)
	var next ReloadInput
	require.NoError(t, converter.GetDefaultDataConverter().FromPayloads(can.Input, &next))
	assert.Equal(t, []ConfigChange{{ConfigMap: "app", Hash: fmt.Sprintf("h%d", maxCyclesPerRun)}}, next.Pending)
	assert.Equal(t, "web", next.Name)
	assert.NotEmpty(t, *calls)
}
