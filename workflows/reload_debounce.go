package workflows

import (
	"slices"
	"time"

	"github.com/remedy-dev/remedy/internal/reloadrule"
)

// reloadDebounce is the reload run's state: the changes pending, when they
// arrived, the last restart and what it applied. Its methods make every
// decision of the debounce with the workflow's now passed in and call no
// SDK, so a table test drives them directly; the run only waits, receives
// and calls activities. It is embedded flat in ReloadInput: continuing as
// new carries it whole, in the JSON shape v0.1.0's histories recorded.
type reloadDebounce struct {
	Pending       []reloadrule.ConfigChange `json:"pending,omitempty"`
	LastRestart   string                    `json:"lastRestart,omitempty"`
	TotalRestarts int                       `json:"totalRestarts,omitempty"`
	// LastRestartAt is when the last restart was asked for, to the
	// nanosecond: the leading-edge window runs from it.
	LastRestartAt time.Time `json:"lastRestartAt,omitempty"`
	// LastAskAt is when an approval request closed as superseded: newer data
	// is coalesced for a window after it, as after a restart.
	LastAskAt time.Time `json:"lastAskAt,omitempty"`
	// Applied are the hashes the last restart applied; repeats of them are not new.
	Applied []reloadrule.ConfigChange `json:"applied,omitempty"`
	// PendingSince is when the oldest pending change arrived: MaxWait runs from it.
	PendingSince time.Time `json:"pendingSince,omitempty"`
	// PushedAt is when the last change arrived while a restart was pending:
	// the restart is due a window after it.
	PushedAt time.Time `json:"pushedAt,omitempty"`
	// Coalesced counts the changes folded into the pending restart beyond the first.
	Coalesced int    `json:"coalesced,omitempty"`
	LastError string `json:"lastError,omitempty"`
}

// reloadTiming is the debounce window and the bound on pushing a restart.
type reloadTiming struct {
	window, maxWait time.Duration
}

// reloadTimingOf applies the defaults to inputs built without the CRD's
// defaulting: maxWait is never shorter than the window.
func reloadTimingOf(in ReloadInput) reloadTiming {
	t := reloadTiming{window: in.Debounce, maxWait: in.MaxWait}
	if t.window <= 0 {
		t.window = defaultDebounce
	}
	if t.maxWait <= 0 {
		t.maxWait = defaultMaxWait
	}
	t.maxWait = max(t.maxWait, t.window)
	return t
}

// resume starts a run on the state it was given, on a copy of the pending
// changes so the run never writes through its input: changes a start named
// without their arrival time wait from now.
func (d *reloadDebounce) resume(now time.Time) {
	d.Pending = append([]reloadrule.ConfigChange(nil), d.Pending...)
	if len(d.Pending) > 0 && d.PendingSince.IsZero() {
		d.PendingSince = now
	}
}

// settle forgets when changes arrived once none is pending.
func (d *reloadDebounce) settle() {
	if len(d.Pending) == 0 {
		d.PendingSince, d.PushedAt = time.Time{}, time.Time{}
	}
}

// absorb merges a change into the pending set; it reports whether the change
// is new, so repeated signals of a hash already pending (replays, several
// operators) neither push the due time nor count as debounced.
func (d *reloadDebounce) absorb(now time.Time, c reloadrule.ConfigChange) bool {
	if d.isApplied(c) {
		return false
	}
	if len(d.Pending) == 0 {
		d.PendingSince = now
	}
	for i, p := range d.Pending {
		if p.ConfigMap == c.ConfigMap {
			if p.Hash == c.Hash {
				return false
			}
			d.Pending[i].Hash = c.Hash
			d.Coalesced++
			return true
		}
	}
	if len(d.Pending) > 0 {
		d.Coalesced++
	}
	d.Pending = append(d.Pending, c)
	return true
}

// absorbHeld absorbs a change that arrived while the run waited for the due
// time: new data joining changes already pending pushes the restart.
func (d *reloadDebounce) absorbHeld(now time.Time, c reloadrule.ConfigChange) bool {
	holding := len(d.Pending) > 0
	changed := d.absorb(now, c)
	if changed && holding {
		d.PushedAt = now
	}
	return changed
}

// isApplied reports whether c is the data the last restart applied, and
// nothing newer for its ConfigMap is pending.
func (d *reloadDebounce) isApplied(c reloadrule.ConfigChange) bool {
	for _, p := range d.Pending {
		if p.ConfigMap == c.ConfigMap {
			return false
		}
	}
	return slices.Contains(d.Applied, c)
}

// dueAt is when the pending changes restart: a window after the last
// restart (or superseded ask), or a window after the last change that
// arrived while they were pending, whichever is later; a push never goes
// past maxWait after the oldest pending change. Zero: nothing restarted
// yet, so nothing holds (the leading edge).
func (d *reloadDebounce) dueAt(t reloadTiming) time.Time {
	edge := d.LastRestartAt
	if d.LastAskAt.After(edge) {
		edge = d.LastAskAt
	}
	if edge.IsZero() {
		return time.Time{}
	}
	due := edge.Add(t.window)
	if d.PushedAt.IsZero() {
		return due
	}
	pushed := d.PushedAt.Add(t.window)
	if bound := d.PendingSince.Add(t.maxWait); !d.PendingSince.IsZero() && bound.Before(pushed) {
		pushed = bound
	}
	if pushed.After(due) {
		return pushed
	}
	return due
}

// holdFor is how long the run waits, absorbing changes, before it acts: zero
// when no restart or superseded ask is inside the window (the leading edge)
// or the due time has come.
func (d *reloadDebounce) holdFor(now time.Time, t reloadTiming) time.Duration {
	due := d.dueAt(t)
	if due.IsZero() || !due.After(now) {
		return 0
	}
	return due.Sub(now)
}

// shownDue is the status's due time: set only while something is pending.
func (d *reloadDebounce) shownDue(t reloadTiming) string {
	if len(d.Pending) == 0 {
		return ""
	}
	return d.dueAt(t).UTC().Format(time.RFC3339Nano)
}

// intent is what one restart applies: the pending changes as they are now.
func (d *reloadDebounce) intent() []reloadrule.ConfigChange {
	return append([]reloadrule.ConfigChange(nil), d.Pending...)
}

// restartToken is the restartedAt value of a restart asked for at asked;
// every retry of that intent writes the same one.
func restartToken(asked time.Time) string {
	return asked.UTC().Format(time.RFC3339)
}

// restartCanceled records a restart a newer change canceled: the canceled
// patch may have landed, so its window holds the newer change.
func (d *reloadDebounce) restartCanceled(asked time.Time) {
	d.LastRestartAt = asked
}

// failed records why the run could not go on.
func (d *reloadDebounce) failed(err error) {
	d.LastError = err.Error()
}

// restarted records a restart that completed with the intent asked for at
// asked; rolled says whether it rolled the pods (an intent of data the
// workload already runs only records the baseline). Changes left pending
// arrived during the restart, the first at newer: their own wait starts then.
func (d *reloadDebounce) restarted(intent []reloadrule.ConfigChange, asked time.Time, rolled bool, newer time.Time) {
	d.LastError = ""
	d.Applied = appliedAfter(d.Applied, intent)
	if rolled {
		d.LastRestartAt = asked
		d.LastRestart = restartToken(asked)
		d.TotalRestarts++
	}
	d.Coalesced = 0
	d.Pending = pendingAfter(d.Pending, intent)
	d.PendingSince, d.PushedAt = newer, time.Time{}
}

// drop removes changes a person declined (now or before) from the pending
// set; a newer hash of the same ConfigMap stays.
func (d *reloadDebounce) drop(declined []reloadrule.ConfigChange) {
	d.Pending = pendingAfter(d.Pending, declined)
}

// askSuperseded records that newer data closed an approval request at now:
// the newer data is coalesced for a window, as after a restart.
func (d *reloadDebounce) askSuperseded(now time.Time) {
	d.LastAskAt = now
}

// workloadGone drops the pending changes of a workload that no longer
// exists, recording why, and returns how many were dropped.
func (d *reloadDebounce) workloadGone(err error) int {
	dropped := len(d.Pending)
	d.Pending = nil
	d.failed(err)
	return dropped
}

// appliedAfter records the intent's hashes as the applied ones, one per ConfigMap.
func appliedAfter(applied, intent []reloadrule.ConfigChange) []reloadrule.ConfigChange {
	out := append([]reloadrule.ConfigChange(nil), intent...)
	for _, a := range applied {
		if !slices.ContainsFunc(intent, func(c reloadrule.ConfigChange) bool { return c.ConfigMap == a.ConfigMap }) {
			out = append(out, a)
		}
	}
	return out
}

// pendingAfter drops the changes the intent applied, keeping newer hashes.
func pendingAfter(pending, applied []reloadrule.ConfigChange) []reloadrule.ConfigChange {
	var left []reloadrule.ConfigChange
	for _, p := range pending {
		if !slices.Contains(applied, p) {
			left = append(left, p)
		}
	}
	return left
}
