package workflows

import (
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/remedy-dev/remedy/activities/drift"
	"github.com/remedy-dev/remedy/activities/fail"
	"github.com/remedy-dev/remedy/activities/gate"
	"github.com/remedy-dev/remedy/api/v1alpha1"
)

// Values of RemedyPhase for a drift workflow.
const (
	DriftPhaseDetected = "Detected"
	DriftPhaseResolved = "Resolved"
)

const (
	// driftPollInterval paces the resolution checks: a constant timer, so an
	// idle parent costs one activity per interval and no busy loop.
	driftPollInterval = 5 * time.Second
	// maxDriftSignalsPerRun bounds one run's history before it continues as new.
	maxDriftSignalsPerRun = 200
	// driftEventBudget bounds one run's history when polling dominates it: a
	// poll adds about eight events, so a long approval wait reaches it.
	driftEventBudget = 2000
)

var drifts *drift.Drift

// driftPostOptions retry a callback with backoff for a few minutes; a
// receiver that stays down loses the report, not the drift.
var driftPostOptions = workflow.ActivityOptions{
	StartToCloseTimeout:    10 * time.Second,
	ScheduleToCloseTimeout: 5 * time.Minute,
	RetryPolicy: &temporal.RetryPolicy{
		InitialInterval:        time.Second,
		BackoffCoefficient:     2,
		MaximumInterval:        30 * time.Second,
		NonRetryableErrorTypes: []string{v1alpha1.ReasonCallbackRejected, v1alpha1.ReasonInvalidParameters},
	},
}

// driftCheckOptions keep a check short: the next tick tries again anyway.
var driftCheckOptions = workflow.ActivityOptions{
	StartToCloseTimeout: 10 * time.Second,
	RetryPolicy: &temporal.RetryPolicy{
		InitialInterval:        time.Second,
		BackoffCoefficient:     2,
		MaximumInterval:        5 * time.Second,
		MaximumAttempts:        3,
		NonRetryableErrorTypes: fail.NonRetryable,
	},
}

// DriftWorkflow follows the drifts of one parent, from the webhook's first
// drift signal until every drift it heard of has resolved. The worker
// confirms each new drift with the API server first (VerifyDrift). It
// reports each new drift to the configured callback URLs (unless snoozed), optionally asks a person
// to approve or reject it, and polls the parent and child until the parent's
// spec changes, an approval for the child appears, or the child is gone.
// The webhook's signal-with-start begins the next run after this one ends.
func DriftWorkflow(ctx workflow.Context, in DriftInput) (DriftResult, error) {
	r := &driftRun{in: in, sig: workflow.GetSignalChannel(ctx, SignalDrift)}
	r.status = DriftStatus{Parent: in.Parent, Open: append([]OpenDrift{}, in.Open...), Resolved: in.Resolved,
		Undelivered: append([]UndeliveredReport(nil), in.Undelivered...)}
	if err := workflow.SetQueryHandler(ctx, QueryStatus, func() (DriftStatus, error) { return r.status, nil }); err != nil {
		return DriftResult{}, err
	}
	r.upsert(ctx, AttrKind.ValueSet("Drift"), AttrTarget.ValueSet(in.Parent.Target()), AttrPhase.ValueSet(DriftPhaseDetected))
	// Drifts carried from an earlier run are believed only for a parent that
	// still exists as this workflow's; settings are read afresh.
	if len(r.status.Open) > 0 && !r.verify(ctx, drift.VerifyDriftInput{Parent: drift.DriftObject(in.Parent), Carried: true}) {
		r.status.Open = nil
	}
	workflow.Go(ctx, r.post)
	r.startApprovals(ctx)
	for {
		r.drain(ctx)
		if len(r.status.Open) == 0 {
			// Queued reports must go out, and a request about a drift that
			// resolved must be closed, before the run ends.
			if err := workflow.Await(ctx, func() bool { return r.idle() && !r.asking() }); err != nil {
				return r.result(), err
			}
			if r.drain(ctx); len(r.status.Open) == 0 {
				r.upsert(ctx, AttrPhase.ValueSet(DriftPhaseResolved))
				return r.result(), nil
			}
		}
		if r.shouldContinue(ctx) {
			if r.asking() {
				// Stop waiting with the request open; the next run resumes it.
				r.carrying = true
				if err := workflow.Await(ctx, func() bool { return !r.asking() }); err != nil {
					return r.result(), err
				}
			}
			if err := workflow.Await(ctx, r.idle); err != nil {
				return r.result(), err
			}
			r.drain(ctx)
			next := DriftInput{Parent: in.Parent, Open: r.status.Open, Resolved: r.status.Resolved, Undelivered: r.status.Undelivered}
			workflow.GetLogger(ctx).Info("continuing as new", "open", len(next.Open), "signals", r.signals)
			return r.result(), workflow.NewContinueAsNewError(ctx, DriftWorkflow, next)
		}
		r.wait(ctx)
	}
}

// shouldContinue reports whether the run should continue as new now, with
// an approval request open or not (the next run waits on it).
func (r *driftRun) shouldContinue(ctx workflow.Context) bool {
	info := workflow.GetInfo(ctx)
	over := r.signals >= maxDriftSignalsPerRun || info.GetContinueAsNewSuggested()
	return over || info.GetCurrentHistoryLength() >= driftEventBudget
}

type driftRun struct {
	// carrying stops the open approval wait, and further asks, so the run can
	// continue as new.
	carrying bool
	in       DriftInput
	sig      workflow.ReceiveChannel
	status   DriftStatus
	closed   []ResolvedDrift
	// signals counts the drift signals this run received.
	signals int
	// tick is the pending poll timer; signals never cancel it.
	tick workflow.Future
	// queue holds reports waiting for the poster; posting is true while it sends one.
	queue   []reportJob
	posting bool
	// asks holds the IDs waiting for an approval request; askingID is the one open.
	asks     []string
	askingID string
	// wake lets the approval coroutine interrupt the main loop's wait.
	wake workflow.Channel
}

func (r *driftRun) result() DriftResult {
	return DriftResult{Status: r.status, Closed: r.closed}
}

func (r *driftRun) idle() bool { return len(r.queue) == 0 && !r.posting }

// asking reports an open approval request; queued asks travel with their
// drifts when the run continues as new.
func (r *driftRun) asking() bool { return r.askingID != "" }

// drain handles every drift signal already delivered.
func (r *driftRun) drain(ctx workflow.Context) {
	var s DriftSignal
	for r.sig.ReceiveAsync(&s) {
		r.handle(ctx, s)
		s = DriftSignal{}
	}
}

// handle opens a new drift, ignores a repeated one, and resolves an open one
// the webhook says an approval let through.
func (r *driftRun) handle(ctx workflow.Context, s DriftSignal) {
	r.signals++
	logger := workflow.GetLogger(ctx)
	if s.ID == "" {
		logger.Warn("ignoring drift signal without an id", "child", s.Child.Target())
		return
	}
	if s.Parent != r.in.Parent {
		logger.Warn("ignoring drift signal about another parent", "id", s.ID, "parent", s.Parent.Target())
		return
	}
	if i := r.find(s.ID); i >= 0 {
		if s.Approved {
			r.resolve(ctx, i, drift.DriftApproved)
			return
		}
		r.resnooze(ctx, i, s)
		return
	}
	if !r.verify(ctx, drift.VerifyDriftInput{Parent: drift.DriftObject(s.Parent), Child: drift.DriftObject(s.Child),
		ParentSpecHash: s.ParentSpecHash}) {
		return
	}
	if s.Approved {
		// An approved change opens no drift, but receivers hear at once, as
		// kausality tells them, that the drifting change went through.
		logger.Info("drift let through by an approval", "id", s.ID, "child", s.Child.Target())
		r.report(OpenDrift{Signal: s}, driftReportResolved)
		return
	}
	r.status.Open = append(r.status.Open, OpenDrift{Signal: s})
	logger.Info("drift detected", "id", s.ID, "child", s.Child.Target(), "user", s.User, "operation", s.Operation,
		"mode", s.Mode, "denied", s.Denied, "snoozed", s.Snoozed)
	r.report(r.status.Open[len(r.status.Open)-1], driftReportDetected)
	if r.status.Settings.RequestApproval {
		r.asks = append(r.asks, s.ID)
	}
}

// verify has the worker confirm a drift's claims with the API server and
// read the parent's settings from its configuration; a run started or
// signalled by anyone else than the webhook gets nothing it claims.
// false: the claims do not hold, and the caller ignores them.
func (r *driftRun) verify(ctx workflow.Context, in drift.VerifyDriftInput) bool {
	var settings gate.DriftSettings
	err := workflow.ExecuteActivity(workflow.WithActivityOptions(ctx, driftCheckOptions), drifts.VerifyDrift, in).Get(ctx, &settings)
	if err != nil {
		workflow.GetLogger(ctx).Warn("ignoring a drift the API server does not confirm", "parent", in.Parent.String(), "child", in.Child.String(), "error", err)
		return false
	}
	r.status.Settings = settings
	return true
}

func (r *driftRun) find(id string) int {
	for i, d := range r.status.Open {
		if d.Signal.ID == id {
			return i
		}
	}
	return -1
}

// resolve closes the open drift at i and reports it resolved.
func (r *driftRun) resolve(ctx workflow.Context, i int, reason string) {
	d := r.status.Open[i]
	r.status.Open = append(r.status.Open[:i:i], r.status.Open[i+1:]...)
	r.status.Resolved++
	r.closed = append(r.closed, ResolvedDrift{ID: d.Signal.ID, Reason: reason})
	r.dropAsk(d.Signal.ID)
	workflow.GetLogger(ctx).Info("drift resolved", "id", d.Signal.ID, "child", d.Signal.Child.Target(), "reason", reason)
	r.report(d, driftReportResolved)
}

// resnooze takes what a repeat of the open drift at i says of its snooze:
// a snooze extended since keeps it silent longer; one lifted or expired
// ends its silence now.
func (r *driftRun) resnooze(ctx workflow.Context, i int, s DriftSignal) {
	d := &r.status.Open[i]
	if !d.Signal.Snoozed || d.Unsnoozed {
		return
	}
	if !s.Snoozed {
		d.Signal.SnoozedUntil = workflow.Now(ctx)
	} else if s.SnoozedUntil.After(d.Signal.SnoozedUntil) {
		d.Signal.SnoozedUntil = s.SnoozedUntil
	}
	r.reportUnsnoozed(ctx)
}

// wait sleeps until a signal, an approval outcome or the poll timer, and
// polls when the timer fired.
func (r *driftRun) wait(ctx workflow.Context) {
	if r.tick == nil {
		r.tick = workflow.NewTimer(ctx, driftPollInterval)
	}
	fired := false
	sel := workflow.NewSelector(ctx)
	sel.AddFuture(r.tick, func(workflow.Future) { fired = true })
	sel.AddReceive(r.sig, func(ch workflow.ReceiveChannel, _ bool) {
		var s DriftSignal
		ch.Receive(ctx, &s)
		r.handle(ctx, s)
	})
	sel.AddReceive(r.wake, func(ch workflow.ReceiveChannel, _ bool) {
		var woke bool
		ch.Receive(ctx, &woke)
	})
	sel.Select(ctx)
	if fired {
		r.tick = nil
		r.poll(ctx)
		r.reportUnsnoozed(ctx)
	}
}

// poll asks the cluster which open drifts resolved.
func (r *driftRun) poll(ctx workflow.Context) {
	if len(r.status.Open) == 0 {
		return
	}
	in := drift.CheckDriftsInput{Parent: drift.DriftObject(r.in.Parent)}
	for _, d := range r.status.Open {
		s := d.Signal
		in.Drifts = append(in.Drifts, drift.DriftCheck{ID: s.ID, Child: drift.DriftObject(s.Child), Operation: s.Operation,
			ParentSpecHash: s.ParentSpecHash, ParentGeneration: s.ParentGeneration})
	}
	var res drift.CheckDriftsResult
	err := workflow.ExecuteActivity(workflow.WithActivityOptions(ctx, driftCheckOptions), drifts.CheckDrifts, in).Get(ctx, &res)
	if err != nil {
		// The next tick tries again; a drift stays open until it is seen resolved.
		workflow.GetLogger(ctx).Warn("check drifts", "error", err)
		return
	}
	for _, res := range res.Resolved {
		if i := r.find(res.ID); i >= 0 {
			r.resolve(ctx, i, res.Reason)
		}
	}
}

func (r *driftRun) upsert(ctx workflow.Context, updates ...temporal.SearchAttributeUpdate) {
	if err := workflow.UpsertTypedSearchAttributes(ctx, updates...); err != nil {
		workflow.GetLogger(ctx).Warn("upsert search attributes", "error", err)
	}
}
