package workflows

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/mock"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/workflow"

	"github.com/remedy-dev/remedy/activities/reload"
	"github.com/remedy-dev/remedy/api/v1alpha1"
	"github.com/remedy-dev/remedy/internal/metrics"
	"github.com/remedy-dev/remedy/internal/reloadrule"
)

func reloadInput(pending ...reloadrule.ConfigChange) ReloadInput {
	return ReloadInput{Namespace: "shop", Kind: "Deployment", Name: "web", Scope: "prod",
		Debounce: 5 * time.Second, RetryInitial: time.Second, RetryMax: 30 * time.Second,
		reloadDebounce: reloadDebounce{Pending: pending}}
}

type restartCall struct {
	at time.Time
	in reload.RestartInput
}

// verdict, when set, answers VerifyReload in the environments the test builds.
var verdict func(reload.ChangesInput) (reload.ReloadVerdict, error)

// verifyAs makes VerifyReload answer with fn until the test ends.
func verifyAs(t *testing.T, fn func(reload.ChangesInput) (reload.ReloadVerdict, error)) {
	verdict = fn
	t.Cleanup(func() { verdict = nil })
}

// newReloadEnv records every RestartWorkload attempt; outcome decides each one.
func newReloadEnv(t *testing.T, outcome func(reload.RestartInput) (reload.RestartResult, error)) (*testsuite.TestWorkflowEnvironment, *[]restartCall) {
	return newReloadEnvOf(t, &testsuite.WorkflowTestSuite{}, outcome)
}

func newReloadEnvOf(t *testing.T, s *testsuite.WorkflowTestSuite, outcome func(reload.RestartInput) (reload.RestartResult, error)) (*testsuite.TestWorkflowEnvironment, *[]restartCall) {
	env := s.NewTestWorkflowEnvironment()
	env.RegisterWorkflowWithOptions(ReloadWorkflow, workflow.RegisterOptions{Name: "ReloadWorkflow"})
	env.RegisterActivity(&reload.Reload{})
	env.OnActivity(reloadActs.VerifyReload, mock.Anything, mock.Anything).Return(
		func(_ context.Context, in reload.ChangesInput) (reload.ReloadVerdict, error) {
			if verdict != nil {
				return verdict(in)
			}
			return reload.ReloadVerdict{Policies: []string{"reload-web"}}, nil
		})
	var calls []restartCall
	env.OnActivity(reloadActs.RestartWorkload, mock.Anything, mock.Anything).Return(
		func(_ context.Context, in reload.RestartInput) (reload.RestartResult, error) {
			calls = append(calls, restartCall{at: env.Now(), in: in})
			return outcome(in)
		})
	return env, &calls
}

func restarted(reload.RestartInput) (reload.RestartResult, error) {
	return reload.RestartResult{Restarted: true}, nil
}

func signalAt(env *testsuite.TestWorkflowEnvironment, d time.Duration, c reloadrule.ConfigChange) {
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

func TestReloadRestartsAtOnceThenCoalescesWithinTheWindow(t *testing.T) {
	env, calls := newReloadEnv(t, restarted)
	start := env.Now()
	for i := 1; i < 20; i++ {
		signalAt(env, time.Duration(i)*200*time.Millisecond, reloadrule.ConfigChange{ConfigMap: "app", Hash: fmt.Sprintf("h%d", i)})
	}
	env.ExecuteWorkflow(ReloadWorkflow, reloadInput(reloadrule.ConfigChange{ConfigMap: "app", Hash: "h0"}))

	st := reloadResult(t, env)
	require.Len(t, *calls, 2, "the first edit restarts at once; the 19 after it, within the window, restart once")
	first, second := (*calls)[0], (*calls)[1]
	assert.Equal(t, []reloadrule.ConfigChange{{ConfigMap: "app", Hash: "h0"}}, first.in.Changes)
	assert.Equal(t, start, first.at, "no restart within the window: the leading edge restarts at once")
	assert.Zero(t, first.in.Coalesced)
	assert.Equal(t, []reloadrule.ConfigChange{{ConfigMap: "app", Hash: "h19"}}, second.in.Changes)
	assert.Equal(t, 18, second.in.Coalesced)
	assert.Equal(t, start.Add(3800*time.Millisecond+5*time.Second), second.at, "each edit within the window pushed it: due one window after the last edit")
	assert.Equal(t, 2, st.TotalRestarts)
	assert.Empty(t, st.Pending)
	assert.Equal(t, second.in.RestartedAt, st.LastRestart)
}

func TestReloadLeadingEdgeTiming(t *testing.T) {
	tests := []struct {
		name        string
		lastRestart time.Duration // before the start; 0: never restarted
		signals     map[time.Duration]reloadrule.ConfigChange
		want        [][]reloadrule.ConfigChange
		wantAt      []time.Duration
	}{
		{
			name: "never restarted: at once",
			want: [][]reloadrule.ConfigChange{{{ConfigMap: "app", Hash: "a1"}}}, wantAt: []time.Duration{0},
		},
		{
			name: "last restart older than the window: at once", lastRestart: 6 * time.Second,
			want: [][]reloadrule.ConfigChange{{{ConfigMap: "app", Hash: "a1"}}}, wantAt: []time.Duration{0},
		},
		{
			name: "last restart within the window: when the window closes", lastRestart: 2 * time.Second,
			want: [][]reloadrule.ConfigChange{{{ConfigMap: "app", Hash: "a1"}}}, wantAt: []time.Duration{3 * time.Second},
		},
		{
			name: "two ConfigMaps edited within the window give one restart", lastRestart: time.Second,
			signals: map[time.Duration]reloadrule.ConfigChange{time.Second: {ConfigMap: "flags", Hash: "f1"}},
			want:    [][]reloadrule.ConfigChange{{{ConfigMap: "app", Hash: "a1"}, {ConfigMap: "flags", Hash: "f1"}}},
			wantAt:  []time.Duration{6 * time.Second}, // flags, within the window, pushed it to a window after itself
		},
		{
			name:    "a repeat of the applied hash restarts nothing",
			signals: map[time.Duration]reloadrule.ConfigChange{4 * time.Second: {ConfigMap: "app", Hash: "a1"}},
			want:    [][]reloadrule.ConfigChange{{{ConfigMap: "app", Hash: "a1"}}}, wantAt: []time.Duration{0},
		},
		{
			name:    "each restart opens a window of its own",
			signals: map[time.Duration]reloadrule.ConfigChange{4 * time.Second: {ConfigMap: "app", Hash: "a2"}, 9 * time.Second: {ConfigMap: "app", Hash: "a3"}},
			want:    [][]reloadrule.ConfigChange{{{ConfigMap: "app", Hash: "a1"}}, {{ConfigMap: "app", Hash: "a2"}}, {{ConfigMap: "app", Hash: "a3"}}},
			wantAt:  []time.Duration{0, 5 * time.Second, 10 * time.Second},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			env, calls := newReloadEnv(t, restarted)
			start := env.Now()
			for d, c := range tt.signals {
				signalAt(env, d, c)
			}
			in := reloadInput(reloadrule.ConfigChange{ConfigMap: "app", Hash: "a1"})
			if tt.lastRestart > 0 {
				in.LastRestartAt = start.Add(-tt.lastRestart)
			}
			env.ExecuteWorkflow(ReloadWorkflow, in)
			reloadResult(t, env)
			require.Len(t, *calls, len(tt.want))
			for i, c := range *calls {
				assert.Equal(t, tt.want[i], c.in.Changes, "restart %d", i)
				assert.Equal(t, tt.wantAt[i], c.at.Sub(start), "restart %d", i)
			}
		})
	}
}

func TestReloadRetriesWithBoundedBackoffAndFixedToken(t *testing.T) {
	failures := 3
	env, calls := newReloadEnv(t, func(reload.RestartInput) (reload.RestartResult, error) {
		if failures > 0 {
			failures--
			return reload.RestartResult{}, errors.New("admission denied")
		}
		return reload.RestartResult{Restarted: true}, nil
	})
	env.ExecuteWorkflow(ReloadWorkflow, reloadInput(reloadrule.ConfigChange{ConfigMap: "app", Hash: "a1"}))

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
	env, calls := newReloadEnv(t, func(in reload.RestartInput) (reload.RestartResult, error) {
		if in.Changes[0].Hash == "stale" {
			return reload.RestartResult{}, errors.New("server unavailable")
		}
		return reload.RestartResult{Restarted: true}, nil
	})
	start := env.Now()
	signalAt(env, 10*time.Second, reloadrule.ConfigChange{ConfigMap: "app", Hash: "fresh"})
	env.ExecuteWorkflow(ReloadWorkflow, reloadInput(reloadrule.ConfigChange{ConfigMap: "app", Hash: "stale"}))

	st := reloadResult(t, env)
	last := (*calls)[len(*calls)-1]
	assert.Equal(t, "fresh", last.in.Changes[0].Hash)
	assert.Equal(t, start.Add(10*time.Second), last.at, "nothing restarted within the window: the fresh change is applied at once")
	for _, c := range (*calls)[:len(*calls)-1] {
		assert.Equal(t, "stale", c.in.Changes[0].Hash)
	}
	assert.Equal(t, 1, st.TotalRestarts)
	assert.Empty(t, st.Pending)
}

func TestReloadEndsWhenWorkloadIsGone(t *testing.T) {
	var s testsuite.WorkflowTestSuite
	dropped := metrics.ReloadDroppedRestarts.WithLabelValues(reloadInput().Scope)
	before := testutil.ToFloat64(dropped)
	env, calls := newReloadEnvOf(t, &s, func(reload.RestartInput) (reload.RestartResult, error) {
		return reload.RestartResult{}, temporal.NewNonRetryableApplicationError("gone", v1alpha1.ReasonWorkloadGone, nil)
	})
	env.ExecuteWorkflow(ReloadWorkflow, reloadInput(reloadrule.ConfigChange{ConfigMap: "app", Hash: "a1"}, reloadrule.ConfigChange{ConfigMap: "flags", Hash: "b1"}))
	st := reloadResult(t, env)
	assert.Len(t, *calls, 1)
	assert.Empty(t, st.Pending)
	assert.Contains(t, st.LastError, "gone")
	assert.Equal(t, 2.0, testutil.ToFloat64(dropped)-before, "both pending changes are dropped, counted by scope")
}

// queryStatusAt reads the status query into st at d.
func queryStatusAt(t *testing.T, env *testsuite.TestWorkflowEnvironment, d time.Duration, st any) {
	env.RegisterDelayedCallback(func() {
		v, err := env.QueryWorkflow(QueryStatus)
		require.NoError(t, err)
		require.NoError(t, v.Get(st))
	}, d)
}

func TestReloadStatusQueryShowsPending(t *testing.T) {
	env, _ := newReloadEnv(t, restarted)
	var during ReloadStatus
	queryStatusAt(t, env, 2*time.Second, &during)
	in := reloadInput(reloadrule.ConfigChange{ConfigMap: "app", Hash: "a1"})
	in.LastRestartAt = env.Now().Add(-time.Second)
	env.ExecuteWorkflow(ReloadWorkflow, in)
	after := reloadResult(t, env)
	assert.Equal(t, []reloadrule.ConfigChange{{ConfigMap: "app", Hash: "a1"}}, during.Pending)
	assert.Equal(t, in.LastRestartAt.Add(5*time.Second).UTC().Format(time.RFC3339Nano), during.DueAt)
	assert.Empty(t, after.Pending)
	assert.NotEmpty(t, after.LastRestart)
}

func TestReloadContinuesAsNewCarryingPending(t *testing.T) {
	env, calls := newReloadEnv(t, func(reload.RestartInput) (reload.RestartResult, error) {
		return reload.RestartResult{}, errors.New("server unavailable")
	})
	// Every intent keeps failing until a newer change supersedes it, cycle after cycle.
	for i := 1; i <= maxCyclesPerRun; i++ {
		signalAt(env, time.Duration(i)*10*time.Second, reloadrule.ConfigChange{ConfigMap: "app", Hash: fmt.Sprintf("h%d", i)})
	}
	env.ExecuteWorkflow(ReloadWorkflow, reloadInput(reloadrule.ConfigChange{ConfigMap: "app", Hash: "h0"}))

	require.True(t, env.IsWorkflowCompleted())
	var can *workflow.ContinueAsNewError
	require.ErrorAs(t, env.GetWorkflowError(), &can)
	var next ReloadInput
	require.NoError(t, converter.GetDefaultDataConverter().FromPayloads(can.Input, &next))
	assert.Equal(t, []reloadrule.ConfigChange{{ConfigMap: "app", Hash: fmt.Sprintf("h%d", maxCyclesPerRun)}}, next.Pending)
	assert.Equal(t, "web", next.Name)
	assert.NotEmpty(t, *calls)
}

// editEvery signals n new hashes of "app", one every gap from gap on.
func editEvery(env *testsuite.TestWorkflowEnvironment, n int, gap time.Duration) {
	for i := 1; i <= n; i++ {
		signalAt(env, time.Duration(i)*gap, reloadrule.ConfigChange{ConfigMap: "app", Hash: fmt.Sprintf("h%d", i)})
	}
}

func continuedInput(t *testing.T, env *testsuite.TestWorkflowEnvironment) ReloadInput {
	t.Helper()
	require.True(t, env.IsWorkflowCompleted())
	var can *workflow.ContinueAsNewError
	require.ErrorAs(t, env.GetWorkflowError(), &can)
	var next ReloadInput
	require.NoError(t, converter.GetDefaultDataConverter().FromPayloads(can.Input, &next))
	return next
}

func TestReloadContinuesAsNewInsideTheWindowAndStillRestarts(t *testing.T) {
	env, calls := newReloadEnv(t, restarted)
	start := env.Now()
	in := reloadInput(reloadrule.ConfigChange{ConfigMap: "app", Hash: "h0"})
	in.Debounce = time.Minute
	in.LastRestartAt, in.LastRestart, in.TotalRestarts = start.Add(-time.Second), "2026-01-02T03:04:05Z", 3
	in.Applied = []reloadrule.ConfigChange{{ConfigMap: "app", Hash: "old"}}
	// Edits far faster than the window: each would add events to one run forever.
	editEvery(env, maxReloadSignalsPerRun+50, 100*time.Millisecond)
	env.ExecuteWorkflow(ReloadWorkflow, in)

	next := continuedInput(t, env)
	assert.Empty(t, *calls, "nothing restarts within the window")
	assert.Equal(t, []reloadrule.ConfigChange{{ConfigMap: "app", Hash: fmt.Sprintf("h%d", maxReloadSignalsPerRun)}}, next.Pending)
	assert.Equal(t, maxReloadSignalsPerRun, next.Coalesced, "every edit after h0 was folded in")
	assert.True(t, in.LastRestartAt.Equal(next.LastRestartAt), "the window carries over")
	assert.Equal(t, in.LastRestart, next.LastRestart)
	assert.Equal(t, 3, next.TotalRestarts)
	assert.Equal(t, in.Applied, next.Applied)
	assert.Equal(t, time.Minute, next.Debounce)
	assert.True(t, start.Equal(next.PendingSince), "h0 was pending from the start")
	assert.True(t, start.Add(maxReloadSignalsPerRun*100*time.Millisecond).Equal(next.PushedAt), "the last edit absorbed pushed the restart")

	// The next run restarts when the carried window closes, with the newest data.
	env2, calls2 := newReloadEnv(t, restarted)
	start2 := env2.Now()
	next.LastRestartAt, next.PushedAt = start2.Add(-30*time.Second), start2.Add(-50*time.Second)
	env2.ExecuteWorkflow(ReloadWorkflow, next)
	st := reloadResult(t, env2)
	require.Len(t, *calls2, 1)
	assert.Equal(t, next.Pending, (*calls2)[0].in.Changes)
	assert.Equal(t, next.LastRestartAt.Add(time.Minute), (*calls2)[0].at)
	assert.Equal(t, maxReloadSignalsPerRun, (*calls2)[0].in.Coalesced)
	assert.Equal(t, 4, st.TotalRestarts)
}

// TestReloadSeedCoalescing is the pending restart queue: 10 edits
// 0.5 s apart with a 3 s window give one restart at once and one after the
// burst, each edit inside the window pushing the second a window later.
func TestReloadSeedCoalescing(t *testing.T) {
	env, calls := newReloadEnv(t, restarted)
	start := env.Now()
	editEvery(env, 9, 500*time.Millisecond)
	in := reloadInput(reloadrule.ConfigChange{ConfigMap: "app", Hash: "h0"})
	in.Debounce = 3 * time.Second
	env.ExecuteWorkflow(ReloadWorkflow, in)

	st := reloadResult(t, env)
	require.Len(t, *calls, 2, "the leading edge, then one trailing restart")
	assert.Equal(t, start, (*calls)[0].at)
	assert.Equal(t, []reloadrule.ConfigChange{{ConfigMap: "app", Hash: "h0"}}, (*calls)[0].in.Changes)
	assert.Equal(t, start.Add(4500*time.Millisecond+3*time.Second), (*calls)[1].at, "a window after the last edit")
	assert.Equal(t, []reloadrule.ConfigChange{{ConfigMap: "app", Hash: "h9"}}, (*calls)[1].in.Changes)
	assert.Equal(t, 8, (*calls)[1].in.Coalesced, "h1..h9 in one restart")
	assert.Equal(t, 2, st.TotalRestarts)
}

// TestReloadMaxWaitBoundsThePush: edits that never pause would push the
// trailing restart forever; maxWait after the first pending change it comes.
func TestReloadMaxWaitBoundsThePush(t *testing.T) {
	env, calls := newReloadEnv(t, restarted)
	start := env.Now()
	editEvery(env, 40, 500*time.Millisecond) // h1 at 0.5 s .. h40 at 20 s
	in := reloadInput(reloadrule.ConfigChange{ConfigMap: "app", Hash: "h0"})
	in.Debounce, in.MaxWait = 3*time.Second, 8250*time.Millisecond
	var dueDuring ReloadStatus
	queryStatusAt(t, env, 7*time.Second, &dueDuring)
	env.ExecuteWorkflow(ReloadWorkflow, in)

	reloadResult(t, env)
	ms := time.Millisecond
	want := []struct {
		at   time.Duration
		hash string
	}{
		{0, "h0"},
		{8750 * ms, "h17"},  // h1 at 0.5 s pending; capped at 0.5 s + maxWait
		{17250 * ms, "h34"}, // h18 at 9 s pending; capped at 9 s + maxWait
		{23000 * ms, "h40"}, // h35 at 17.5 s pending; the edits stop at 20 s: a window after the last
	}
	require.Len(t, *calls, len(want))
	for i, w := range want {
		assert.Equal(t, w.at, (*calls)[i].at.Sub(start), "restart %d", i)
		assert.Equal(t, []reloadrule.ConfigChange{{ConfigMap: "app", Hash: w.hash}}, (*calls)[i].in.Changes, "restart %d", i)
	}
	assert.Equal(t, start.Add(8750*ms).UTC().Format(time.RFC3339Nano), dueDuring.DueAt, "the status shows the bounded due time")
}

func TestReloadTimingDefaults(t *testing.T) {
	tests := []struct {
		name                string
		debounce, maxWait   time.Duration
		wantWindow, wantMax time.Duration
	}{
		{"unset", 0, 0, defaultDebounce, defaultMaxWait},
		{"as given", 3 * time.Second, time.Minute, 3 * time.Second, time.Minute},
		{"maxWait shorter than the window waits the window", 10 * time.Minute, time.Minute, 10 * time.Minute, 10 * time.Minute},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := reloadTimingOf(ReloadInput{Debounce: tt.debounce, MaxWait: tt.maxWait})
			assert.Equal(t, reloadTiming{window: tt.wantWindow, maxWait: tt.wantMax}, got)
		})
	}
}
