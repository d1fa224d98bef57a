package workflows

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// debounceT0 is the scenarios' clock origin; steps and times are offsets from it.
var debounceT0 = time.Date(2026, 11, 29, 1, 0, 0, 0, time.UTC)

func at(d time.Duration) time.Time { return debounceT0.Add(d) }

func cm(name, hash string) ConfigChange { return ConfigChange{ConfigMap: name, Hash: hash} }

func changes(c ...ConfigChange) []ConfigChange { return c }

// debounceSim plays the run's part around a reloadDebounce: it remembers a
// restart's intent, and the first new change during it, as reloadRun does.
type debounceSim struct {
	d          reloadDebounce
	intent     []ConfigChange
	asked      time.Time
	restarting bool
	newer      time.Time
	news       []bool
	dropped    int
}

type debounceStep struct {
	at time.Duration
	do func(s *debounceSim, now time.Time)
}

// change is a signal the run drains, or receives while restarting.
func change(after time.Duration, c ConfigChange) debounceStep {
	return debounceStep{after, func(s *debounceSim, now time.Time) {
		isNew := s.d.absorb(now, c)
		if s.restarting && isNew && s.newer.IsZero() {
			s.newer = now
		}
		s.news = append(s.news, isNew)
	}}
}

// heldChange is a signal the run receives while it waits for the due time.
func heldChange(after time.Duration, c ConfigChange) debounceStep {
	return debounceStep{after, func(s *debounceSim, now time.Time) { s.news = append(s.news, s.d.absorbHeld(now, c)) }}
}

// ask starts a restart of the pending changes.
func ask(after time.Duration) debounceStep {
	return debounceStep{after, func(s *debounceSim, now time.Time) {
		s.intent, s.asked, s.restarting, s.newer = s.d.intent(), now, true, time.Time{}
	}}
}

// done completes the restart ask started; rolled: the pods rolled.
func done(after time.Duration, rolled bool) debounceStep {
	return debounceStep{after, func(s *debounceSim, _ time.Time) {
		s.d.restarted(s.intent, s.asked, rolled, s.newer)
		s.restarting = false
	}}
}

func canceled(after time.Duration) debounceStep {
	return debounceStep{after, func(s *debounceSim, _ time.Time) { s.d.restartCanceled(s.asked); s.restarting = false }}
}

func failed(after time.Duration, msg string) debounceStep {
	return debounceStep{after, func(s *debounceSim, _ time.Time) { s.d.failed(errors.New(msg)); s.restarting = false }}
}

func declined(after time.Duration, c ...ConfigChange) debounceStep {
	return debounceStep{after, func(s *debounceSim, _ time.Time) { s.d.drop(c) }}
}

func askSuperseded(after time.Duration) debounceStep {
	return debounceStep{after, func(s *debounceSim, now time.Time) { s.d.askSuperseded(now) }}
}

func gone(after time.Duration) debounceStep {
	return debounceStep{after, func(s *debounceSim, _ time.Time) { s.dropped = s.d.workloadGone(errors.New("workload gone")) }}
}

func settle(after time.Duration) debounceStep {
	return debounceStep{after, func(s *debounceSim, _ time.Time) { s.d.settle() }}
}

func resume(after time.Duration) debounceStep {
	return debounceStep{after, func(s *debounceSim, now time.Time) { s.d.resume(now) }}
}

// continuedAsNew carries the state through the JSON of ReloadInput, as
// continue-as-new does, and starts the next run on it.
func continuedAsNew(after time.Duration) debounceStep {
	return debounceStep{after, func(s *debounceSim, now time.Time) {
		b, err := json.Marshal(ReloadInput{Namespace: "shop", Kind: "Deployment", Name: "web", reloadDebounce: s.d})
		if err != nil {
			panic(err)
		}
		var next ReloadInput
		if err := json.Unmarshal(b, &next); err != nil {
			panic(err)
		}
		s.d = next.reloadDebounce
		s.d.resume(now)
	}}
}

type debounceCase struct {
	name   string
	timing reloadTiming // zero: a 5s window, 30s maxWait
	start  reloadDebounce
	steps  []debounceStep
	// want is the state after the steps; news what each change step reported.
	want    reloadDebounce
	news    []bool
	dropped int
	// hold is how long the run waits before acting at holdAt.
	holdAt, hold time.Duration
}

// debounceCases is a table: one scenario a case, too many for one function.
var debounceCases = []debounceCase{
	{
		name:  "first change of a workload never restarted restarts at once (leading edge)",
		steps: []debounceStep{change(0, cm("app", "a1"))},
		want:  reloadDebounce{Pending: changes(cm("app", "a1")), PendingSince: at(0)},
		news:  []bool{true},
	},
	{
		name:  "a change after the window has passed restarts at once",
		start: reloadDebounce{LastRestartAt: at(-10 * time.Second), Applied: changes(cm("app", "a0"))},
		steps: []debounceStep{change(0, cm("app", "a1"))},
		want: reloadDebounce{LastRestartAt: at(-10 * time.Second), Applied: changes(cm("app", "a0")),
			Pending: changes(cm("app", "a1")), PendingSince: at(0)},
		news: []bool{true},
	},
	{
		name:  "a change inside the window waits for the window to close",
		start: reloadDebounce{LastRestartAt: at(-2 * time.Second), LastRestart: restartToken(at(-2 * time.Second)), TotalRestarts: 1},
		steps: []debounceStep{change(0, cm("app", "a1"))},
		want: reloadDebounce{LastRestartAt: at(-2 * time.Second), LastRestart: restartToken(at(-2 * time.Second)), TotalRestarts: 1,
			Pending: changes(cm("app", "a1")), PendingSince: at(0)},
		news: []bool{true},
		hold: 3 * time.Second,
	},
	{
		name:  "a burst to one ConfigMap coalesces into its newest hash and pushes the restart",
		start: reloadDebounce{LastRestartAt: at(-time.Second)},
		steps: []debounceStep{change(0, cm("app", "a1")), heldChange(time.Second, cm("app", "a2")), heldChange(2*time.Second, cm("app", "a3"))},
		want: reloadDebounce{LastRestartAt: at(-time.Second), Pending: changes(cm("app", "a3")),
			PendingSince: at(0), PushedAt: at(2 * time.Second), Coalesced: 2},
		news:   []bool{true, true, true},
		holdAt: 2 * time.Second, hold: 5 * time.Second,
	},
	{
		name:  "a burst across ConfigMaps restarts once for all of them",
		start: reloadDebounce{LastRestartAt: at(-time.Second)},
		steps: []debounceStep{change(0, cm("app", "a1")), heldChange(time.Second, cm("db", "d1")), heldChange(2*time.Second, cm("app", "a2"))},
		want: reloadDebounce{LastRestartAt: at(-time.Second), Pending: changes(cm("app", "a2"), cm("db", "d1")),
			PendingSince: at(0), PushedAt: at(2 * time.Second), Coalesced: 2},
		news:   []bool{true, true, true},
		holdAt: 2 * time.Second, hold: 5 * time.Second,
	},
	{
		name:  "a duplicate signal of a pending hash is not new and does not push",
		start: reloadDebounce{LastRestartAt: at(-time.Second)},
		steps: []debounceStep{change(0, cm("app", "a1")), heldChange(3*time.Second, cm("app", "a1"))},
		want:  reloadDebounce{LastRestartAt: at(-time.Second), Pending: changes(cm("app", "a1")), PendingSince: at(0)},
		news:  []bool{true, false},
		// Due 4s after t0, unpushed.
		holdAt: 3 * time.Second, hold: time.Second,
	},
	{
		name:  "a late signal of the data the last restart applied is not new",
		start: reloadDebounce{LastRestartAt: at(-10 * time.Second), Applied: changes(cm("app", "a1"))},
		steps: []debounceStep{change(0, cm("app", "a1")), settle(0)},
		want:  reloadDebounce{LastRestartAt: at(-10 * time.Second), Applied: changes(cm("app", "a1"))},
		news:  []bool{false},
	},
	{
		name:  "reverting to the applied data while newer data is pending replaces it: the last signal wins",
		start: reloadDebounce{LastRestartAt: at(-time.Second), Applied: changes(cm("app", "a1"))},
		steps: []debounceStep{change(0, cm("app", "a2")), heldChange(time.Second, cm("app", "a1"))},
		want: reloadDebounce{LastRestartAt: at(-time.Second), Applied: changes(cm("app", "a1")),
			Pending: changes(cm("app", "a1")), PendingSince: at(0), PushedAt: at(time.Second), Coalesced: 1},
		news:   []bool{true, true},
		holdAt: time.Second, hold: 5 * time.Second,
	},
	{
		name:   "a lone change inside the window waits for the window, unpushed",
		start:  reloadDebounce{LastRestartAt: at(0)},
		steps:  []debounceStep{heldChange(time.Second, cm("app", "a1"))},
		want:   reloadDebounce{LastRestartAt: at(0), Pending: changes(cm("app", "a1")), PendingSince: at(time.Second)},
		news:   []bool{true},
		holdAt: time.Second, hold: 4 * time.Second,
	},
	{
		name:  "the first change inside the window does not push; the next one does",
		start: reloadDebounce{LastRestartAt: at(0)},
		steps: []debounceStep{heldChange(time.Second, cm("app", "a1")), heldChange(3*time.Second, cm("app", "a2"))},
		want: reloadDebounce{LastRestartAt: at(0), Pending: changes(cm("app", "a2")),
			PendingSince: at(time.Second), PushedAt: at(3 * time.Second), Coalesced: 1},
		news:   []bool{true, true},
		holdAt: 3 * time.Second, hold: 5 * time.Second,
	},
	{
		name:   "maxWait after the oldest pending change bounds the push",
		timing: reloadTiming{window: 5 * time.Second, maxWait: 12 * time.Second},
		start:  reloadDebounce{LastRestartAt: at(0)},
		steps: []debounceStep{change(time.Second, cm("app", "a1")), heldChange(4*time.Second, cm("app", "a2")),
			heldChange(8*time.Second, cm("app", "a3")), heldChange(12*time.Second, cm("app", "a4"))},
		want: reloadDebounce{LastRestartAt: at(0), Pending: changes(cm("app", "a4")),
			PendingSince: at(time.Second), PushedAt: at(12 * time.Second), Coalesced: 3},
		news: []bool{true, true, true, true},
		// Pushed to 17s, bounded by 1s+12s.
		holdAt: 12 * time.Second, hold: time.Second,
	},
	{
		name:  "with maxWait spent, the restart's own window still holds",
		start: reloadDebounce{LastRestartAt: at(0), Pending: changes(cm("app", "a1")), PendingSince: at(-29 * time.Second)},
		steps: []debounceStep{heldChange(time.Second, cm("app", "a2"))},
		want: reloadDebounce{LastRestartAt: at(0), Pending: changes(cm("app", "a2")),
			PendingSince: at(-29 * time.Second), PushedAt: at(time.Second), Coalesced: 1},
		news:   []bool{true},
		holdAt: time.Second, hold: 4 * time.Second,
	},
	{
		name:   "past the due time nothing holds",
		start:  reloadDebounce{LastRestartAt: at(0), Pending: changes(cm("app", "a1")), PendingSince: at(time.Second), PushedAt: at(2 * time.Second)},
		want:   reloadDebounce{LastRestartAt: at(0), Pending: changes(cm("app", "a1")), PendingSince: at(time.Second), PushedAt: at(2 * time.Second)},
		holdAt: 7 * time.Second,
	},
	{
		name:  "settling forgets arrival times once nothing is pending",
		start: reloadDebounce{PendingSince: at(time.Second), PushedAt: at(2 * time.Second)},
		steps: []debounceStep{settle(3 * time.Second)},
	},
	{
		name:  "settling keeps arrival times while something is pending",
		start: reloadDebounce{Pending: changes(cm("app", "a1")), PendingSince: at(time.Second), PushedAt: at(2 * time.Second)},
		steps: []debounceStep{settle(3 * time.Second)},
		want:  reloadDebounce{Pending: changes(cm("app", "a1")), PendingSince: at(time.Second), PushedAt: at(2 * time.Second)},
	},
	{
		name:  "changes a start names without an arrival time wait from the start",
		start: reloadDebounce{Pending: changes(cm("app", "a1"))},
		steps: []debounceStep{resume(0)},
		want:  reloadDebounce{Pending: changes(cm("app", "a1")), PendingSince: at(0)},
	},
	{
		name: "a continued run keeps its carried arrival and push times",
		start: reloadDebounce{Pending: changes(cm("app", "a1")), PendingSince: at(-20 * time.Second),
			LastRestartAt: at(-3 * time.Second), PushedAt: at(-time.Second)},
		steps: []debounceStep{resume(0)},
		want: reloadDebounce{Pending: changes(cm("app", "a1")), PendingSince: at(-20 * time.Second),
			LastRestartAt: at(-3 * time.Second), PushedAt: at(-time.Second)},
		hold: 4 * time.Second,
	},
	{
		name: "a restart that rolls records what it applied and opens a window",
		start: reloadDebounce{Pending: changes(cm("app", "a2"), cm("db", "d1")), PendingSince: at(-time.Second), PushedAt: at(-time.Second / 2),
			Coalesced: 1, Applied: changes(cm("app", "a1"), cm("cache", "c1")), LastError: "boom", TotalRestarts: 2},
		steps: []debounceStep{ask(0), done(2*time.Second, true)},
		want: reloadDebounce{Applied: changes(cm("app", "a2"), cm("db", "d1"), cm("cache", "c1")),
			LastRestartAt: at(0), LastRestart: restartToken(at(0)), TotalRestarts: 3},
		holdAt: 2 * time.Second, hold: 3 * time.Second,
	},
	{
		name: "a restart of data the workload already runs records the baseline and opens no window",
		start: reloadDebounce{Pending: changes(cm("app", "a2")), PendingSince: at(0),
			LastRestartAt: at(-time.Minute), LastRestart: restartToken(at(-time.Minute)), TotalRestarts: 1},
		steps: []debounceStep{ask(0), done(time.Second, false)},
		want: reloadDebounce{Applied: changes(cm("app", "a2")),
			LastRestartAt: at(-time.Minute), LastRestart: restartToken(at(-time.Minute)), TotalRestarts: 1},
		holdAt: time.Second,
	},
	{
		name:  "changes arriving during a restart stay pending and wait from their arrival",
		start: reloadDebounce{Pending: changes(cm("app", "a1")), PendingSince: at(0)},
		steps: []debounceStep{ask(0), change(time.Second, cm("app", "a2")), change(1500*time.Millisecond, cm("db", "d1")),
			done(2*time.Second, true)},
		want: reloadDebounce{Pending: changes(cm("app", "a2"), cm("db", "d1")), PendingSince: at(time.Second),
			Applied: changes(cm("app", "a1")), LastRestartAt: at(0), LastRestart: restartToken(at(0)), TotalRestarts: 1},
		news:   []bool{true, true},
		holdAt: 2 * time.Second, hold: 3 * time.Second,
	},
	{
		name:  "a restart a newer change canceled still opens the window for the newer change",
		start: reloadDebounce{Pending: changes(cm("app", "a1")), PendingSince: at(0)},
		steps: []debounceStep{ask(0), change(time.Second, cm("app", "a2")), canceled(2 * time.Second)},
		want: reloadDebounce{Pending: changes(cm("app", "a2")), PendingSince: at(0), Coalesced: 1,
			LastRestartAt: at(0)},
		news:   []bool{true},
		holdAt: 2 * time.Second, hold: 3 * time.Second,
	},
	{
		name:  "a failed restart keeps its changes pending and says why",
		start: reloadDebounce{Pending: changes(cm("app", "a1")), PendingSince: at(0)},
		steps: []debounceStep{ask(0), failed(time.Second, "restart Deployment web: forbidden")},
		want:  reloadDebounce{Pending: changes(cm("app", "a1")), PendingSince: at(0), LastError: "restart Deployment web: forbidden"},
	},
	{
		name:  "data declined before is dropped; the other ConfigMaps' changes stay",
		start: reloadDebounce{Pending: changes(cm("app", "a2"), cm("db", "d1")), PendingSince: at(0)},
		steps: []debounceStep{declined(time.Second, cm("db", "d1"), cm("app", "a1"))},
		want:  reloadDebounce{Pending: changes(cm("app", "a2")), PendingSince: at(0)},
	},
	{
		name:  "a declined intent is dropped whole and nothing waits",
		start: reloadDebounce{Pending: changes(cm("app", "a1")), PendingSince: at(0), LastRestartAt: at(-time.Hour)},
		steps: []debounceStep{declined(time.Minute, cm("app", "a1")), settle(time.Minute)},
		want:  reloadDebounce{LastRestartAt: at(-time.Hour)},
	},
	{
		name:  "a superseded ask holds the newer data for a window after it",
		start: reloadDebounce{Pending: changes(cm("app", "a1")), PendingSince: at(0), LastRestartAt: at(-time.Minute)},
		steps: []debounceStep{change(10*time.Second, cm("app", "a2")), askSuperseded(10 * time.Second)},
		want: reloadDebounce{Pending: changes(cm("app", "a2")), PendingSince: at(0), Coalesced: 1,
			LastRestartAt: at(-time.Minute), LastAskAt: at(10 * time.Second)},
		news:   []bool{true},
		holdAt: 10 * time.Second, hold: 5 * time.Second,
	},
	{
		name:   "a restart later than the last superseded ask opens the window",
		start:  reloadDebounce{LastRestartAt: at(0), LastAskAt: at(-10 * time.Second)},
		want:   reloadDebounce{LastRestartAt: at(0), LastAskAt: at(-10 * time.Second)},
		holdAt: time.Second, hold: 4 * time.Second,
	},
	{
		name:  "a workload that is gone drops everything pending",
		start: reloadDebounce{Pending: changes(cm("app", "a1"), cm("db", "d1")), PendingSince: at(0)},
		steps: []debounceStep{gone(time.Second)},
		want:  reloadDebounce{PendingSince: at(0), LastError: "workload gone"},
		// 2 changes dropped; the run ends, so no settling.
		dropped: 2,
	},
	{
		name: "continuing as new carries every field through JSON",
		start: reloadDebounce{Pending: changes(cm("app", "a3")), LastRestart: restartToken(at(-2 * time.Second)), TotalRestarts: 4,
			LastRestartAt: at(-2*time.Second + 123), LastAskAt: at(-time.Second + 456), Applied: changes(cm("app", "a1"), cm("db", "d1")),
			PendingSince: at(-1500 * time.Millisecond), PushedAt: at(-time.Second / 2), Coalesced: 7, LastError: "conflict"},
		steps: []debounceStep{continuedAsNew(0)},
		want: reloadDebounce{Pending: changes(cm("app", "a3")), LastRestart: restartToken(at(-2 * time.Second)), TotalRestarts: 4,
			LastRestartAt: at(-2*time.Second + 123), LastAskAt: at(-time.Second + 456), Applied: changes(cm("app", "a1"), cm("db", "d1")),
			PendingSince: at(-1500 * time.Millisecond), PushedAt: at(-time.Second / 2), Coalesced: 7, LastError: "conflict"},
		// Due 5s after the push, the latest edge.
		hold: 4500 * time.Millisecond,
	},
	{
		name:  "a burst continued as new mid-way pushes the restart as if it had not been",
		start: reloadDebounce{LastRestartAt: at(0)},
		steps: []debounceStep{heldChange(time.Second, cm("app", "a1")), heldChange(2*time.Second, cm("app", "a2")),
			continuedAsNew(2 * time.Second), heldChange(3*time.Second, cm("app", "a3"))},
		want: reloadDebounce{LastRestartAt: at(0), Pending: changes(cm("app", "a3")),
			PendingSince: at(time.Second), PushedAt: at(3 * time.Second), Coalesced: 2},
		news:   []bool{true, true, true},
		holdAt: 3 * time.Second, hold: 5 * time.Second,
	},
}

func TestReloadDebounce(t *testing.T) {
	require.GreaterOrEqual(t, len(debounceCases), 20)
	for _, tc := range debounceCases {
		t.Run(tc.name, func(t *testing.T) {
			timing := tc.timing
			if timing == (reloadTiming{}) {
				timing = reloadTiming{window: 5 * time.Second, maxWait: 30 * time.Second}
			}
			s := &debounceSim{d: tc.start}
			for _, st := range tc.steps {
				st.do(s, at(st.at))
			}
			assert.Equal(t, tc.want, s.d)
			assert.Equal(t, tc.news, s.news, "which changes were new")
			assert.Equal(t, tc.dropped, s.dropped)
			assert.Equal(t, tc.hold, s.d.holdFor(at(tc.holdAt), timing), "wait at %s", tc.holdAt)
		})
	}
}

func TestReloadDebounceShownDue(t *testing.T) {
	timing := reloadTiming{window: 5 * time.Second, maxWait: 30 * time.Second}
	d := reloadDebounce{LastRestartAt: at(0)}
	assert.Empty(t, d.shownDue(timing), "nothing pending: no due time, though the window holds")
	d.absorbHeld(at(time.Second), cm("app", "a1"))
	assert.Equal(t, "2026-11-29T01:00:05Z", d.shownDue(timing))
	d.absorbHeld(at(2*time.Second+time.Millisecond), cm("app", "a2"))
	assert.Equal(t, "2026-11-29T01:00:07.001Z", d.shownDue(timing), "to the nanosecond")
}

func TestReloadDebounceIntentIsACopy(t *testing.T) {
	d := reloadDebounce{}
	d.absorb(at(0), cm("app", "a1"))
	intent := d.intent()
	d.absorb(at(time.Second), cm("app", "a2"))
	assert.Equal(t, changes(cm("app", "a1")), intent, "a change during the restart does not alter what it applies")
}

// A v0.1.0 run continued as new with the state then copied field by field;
// the embedded type reads and writes exactly that JSON.
func TestReloadInputKeepsTheReleasedShape(t *testing.T) {
	b, err := os.ReadFile("testdata/histories/v0.1.0/reload-continued-as-new.json")
	require.NoError(t, err)
	var h struct {
		Events []struct {
			Attrs *struct {
				Input struct {
					Payloads []struct {
						Data string `json:"data"`
					} `json:"payloads"`
				} `json:"input"`
			} `json:"workflowExecutionContinuedAsNewEventAttributes"`
		} `json:"events"`
	}
	require.NoError(t, json.Unmarshal(b, &h))
	var carried []byte
	for _, e := range h.Events {
		if e.Attrs != nil {
			carried, err = base64.StdEncoding.DecodeString(e.Attrs.Input.Payloads[0].Data)
			require.NoError(t, err)
		}
	}
	require.NotEmpty(t, carried, "the history continues as new")

	var in ReloadInput
	require.NoError(t, json.Unmarshal(carried, &in))
	assert.Len(t, in.Pending, 1)
	assert.Equal(t, 200, in.Coalesced)
	assert.False(t, in.PushedAt.IsZero())
	again, err := json.Marshal(in)
	require.NoError(t, err)
	assert.Equal(t, string(carried), string(again), "the same fields, names and order")
}
