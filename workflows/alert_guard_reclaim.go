package workflows

import (
	"time"

	"go.temporal.io/sdk/workflow"
)

// guardReclaimVersion gates the guard's reclaim of permits held by alert
// workflows that closed without releasing them (terminated, canceled, timed
// out): a guard run started before it issues no Closed activity.
const guardReclaimVersion = "guard-reclaim"

// ReclaimEvery is how often a guard that holds permits checks that their
// holders are still open; a request queued behind a holder checks at once.
const ReclaimEvery = time.Minute

// reclaimer decides when the guard asks Temporal whether its permits'
// holders are still open.
type reclaimer struct {
	on bool
	// waiting is set by a request queued since the last check.
	waiting bool
	next    time.Time
}

func newReclaimer(ctx workflow.Context) *reclaimer {
	v := workflow.GetVersion(ctx, guardReclaimVersion, workflow.DefaultVersion, 1)
	return &reclaimer{on: v >= 1, next: workflow.Now(ctx).Add(ReclaimEvery)}
}

// arrived notes a new request.
func (r *reclaimer) arrived() { r.waiting = true }

// due says whether to check now: permits are held, and a request waits
// behind them or the period has passed.
func (r *reclaimer) due(s *GuardState, now time.Time) bool {
	if !r.on || len(s.Running) == 0 {
		r.waiting = false
		return false
	}
	return (r.waiting && len(s.Queue) > 0) || !now.Before(r.next)
}

// bound shortens the guard's sleep to the next periodic check while it holds permits.
func (r *reclaimer) bound(s *GuardState, now time.Time, timeout time.Duration) time.Duration {
	if !r.on || len(s.Running) == 0 {
		return timeout
	}
	return min(timeout, r.next.Sub(now))
}

// reclaim releases the permits whose holders are closed. A check that
// fails is tried again at the next period.
func (r *reclaimer) reclaim(ctx workflow.Context, s *GuardState) {
	r.waiting = false
	r.next = workflow.Now(ctx).Add(ReclaimEvery)
	holders := append([]AcquireRequest(nil), s.Running...)
	var closed []string
	if err := workflow.ExecuteActivity(workflow.WithActivityOptions(ctx, quickOptions), guards.Closed, holders).Get(ctx, &closed); err != nil {
		workflow.GetLogger(ctx).Warn("permit holders not checked", "error", err)
		return
	}
	for _, id := range closed {
		workflow.GetLogger(ctx).Info("permit reclaimed: its alert workflow closed without releasing it", "alert", id)
		for _, h := range holders {
			if h.AlertID == id {
				s.release(id, h.Nonce, workflow.Now(ctx))
			}
		}
	}
}
