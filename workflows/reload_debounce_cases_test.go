package workflows

import "time"

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
