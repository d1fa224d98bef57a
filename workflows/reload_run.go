package workflows

import (
	"errors"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/remedy-dev/remedy/activities/reload"
	"github.com/remedy-dev/remedy/internal/metrics"
	"github.com/remedy-dev/remedy/internal/reloadrule"
)

// reloadRun is one ReloadWorkflow run: the SDK side of the debounce. It
// receives signals, runs timers and activities, and asks d what they mean.
type reloadRun struct {
	in  ReloadInput
	d   reloadDebounce
	t   reloadTiming
	sig workflow.ReceiveChannel
	// dueAt, restarting and approvalRequest are the status query's view of
	// what the run is doing now; ReloadStatus says what each means.
	dueAt           string
	restarting      bool
	approvalRequest string
	// approval is the run's approval gate, created on the first ask.
	approval *approvalGate
	// rule is the selecting policies' combined approval, as last verified.
	rule reloadrule.ApprovalRule
	// approved names the request a person approved the pending changes in, until they are restarted.
	approved string
	// signals counts the config-changed signals this run received.
	signals int
}

// status is what the status query and the run's result report.
func (r *reloadRun) status() ReloadStatus {
	return ReloadStatus{
		Pending: r.d.Pending, DueAt: r.dueAt, Restarting: r.restarting,
		LastRestart: r.d.LastRestart, TotalRestarts: r.d.TotalRestarts, LastError: r.d.LastError,
		ApprovalRequest: r.approvalRequest,
	}
}

// continueAsNew carries everything the next run needs to go on as this one would.
func (r *reloadRun) continueAsNew(ctx workflow.Context) (ReloadResult, error) {
	r.drain(ctx)
	next := r.in
	next.reloadDebounce = r.d
	workflow.GetLogger(ctx).Info("continuing as new", "pending", len(next.Pending), "signals", r.signals)
	return ReloadResult{Status: r.status()}, workflow.NewContinueAsNewError(ctx, ReloadWorkflow, next)
}

// overBudget reports whether this run's history is long enough to continue as new.
func (r *reloadRun) overBudget(ctx workflow.Context) bool {
	return r.signals >= maxReloadSignalsPerRun || workflow.GetInfo(ctx).GetContinueAsNewSuggested()
}

// hold waits until the pending restart is due, absorbing changes; with no
// restart inside the window it returns at once (the leading edge). A change
// arriving while a restart is pending pushes the due time; pushes only ever
// move it later, so the timer is left running and, when it fires early, set
// again for the rest. It returns false when the run should continue as new first.
func (r *reloadRun) hold(ctx workflow.Context) bool {
	defer func() { r.dueAt = "" }()
	for {
		wait := r.d.holdFor(workflow.Now(ctx), r.t)
		if wait <= 0 {
			return true
		}
		if !r.waitFor(ctx, wait) {
			return false
		}
	}
}

// waitFor runs a timer for wait, absorbing changes meanwhile; it returns
// false, with the timer cancelled, when the run should continue as new.
func (r *reloadRun) waitFor(ctx workflow.Context, wait time.Duration) bool {
	tctx, cancel := workflow.WithCancel(ctx)
	defer cancel()
	timer := workflow.NewTimer(tctx, wait)
	for {
		r.dueAt = r.d.shownDue(r.t)
		fired := false
		sel := workflow.NewSelector(ctx)
		sel.AddFuture(timer, func(workflow.Future) { fired = true })
		sel.AddReceive(r.sig, func(ch workflow.ReceiveChannel, _ bool) {
			r.d.absorbHeld(workflow.Now(ctx), r.receive(ctx, ch))
		})
		sel.Select(ctx)
		if fired {
			return true
		}
		if r.overBudget(ctx) {
			return false
		}
	}
}

// receive takes one delivered signal, counting it against the run's budget.
func (r *reloadRun) receive(ctx workflow.Context, ch workflow.ReceiveChannel) reloadrule.ConfigChange {
	var c reloadrule.ConfigChange
	ch.Receive(ctx, &c)
	r.signals++
	return c
}

// drain absorbs every signal already delivered; it reports whether any carried new data.
func (r *reloadRun) drain(ctx workflow.Context) bool {
	changed := false
	var c reloadrule.ConfigChange
	for r.sig.ReceiveAsync(&c) {
		r.signals++
		changed = r.d.absorb(workflow.Now(ctx), c) || changed
	}
	return changed
}

// end closes the run on err; a workload that is gone is not a failure: its
// pending changes are dropped.
func (r *reloadRun) end(ctx workflow.Context, err error) (ReloadResult, error) {
	if reload.IsWorkloadGone(err) {
		workflow.GetLogger(ctx).Info("workload gone; dropping pending changes", "error", err, "pending", len(r.d.Pending))
		if dropped := r.d.workloadGone(err); dropped > 0 {
			count(ctx, metrics.ReloadDroppedRestarts.WithLabelValues(r.in.Scope), float64(dropped))
		}
		return ReloadResult{Status: r.status()}, nil
	}
	r.d.failed(err)
	return ReloadResult{Status: r.status()}, err
}

// verify re-reads, before the run asks anyone or restarts, that policies
// select the workload and their authors may restart it, and learns from
// them whether a person must approve: the run's input is not trusted for
// either. A forged start for a workload no policy selects ends here, having
// written nothing.
func (r *reloadRun) verify(ctx workflow.Context) error {
	var v reload.ReloadVerdict
	err := workflow.ExecuteLocalActivity(workflow.WithLocalActivityOptions(ctx, checkOptions), reloadActs.VerifyReload, reload.ChangesInput{
		Namespace: r.in.Namespace, Kind: r.in.Kind, Name: r.in.Name, Changes: r.d.Pending,
	}).Get(ctx, &v)
	if err != nil {
		return err
	}
	r.rule = v.Approval
	return nil
}

// restart runs one intent: the pending changes as they are now. A new change
// arriving meanwhile cancels it (a retrying intent is stale) and reports superseded.
func (r *reloadRun) restart(ctx workflow.Context) (superseded bool, err error) {
	intent := r.d.intent()
	asked := workflow.Now(ctx)
	actx, cancel := workflow.WithCancel(workflow.WithActivityOptions(ctx, reloadOptions(r.in)))
	fut := workflow.ExecuteActivity(actx, reloadActs.RestartWorkload, reload.RestartInput{
		Namespace: r.in.Namespace, Kind: r.in.Kind, Name: r.in.Name, Scope: r.in.Scope,
		Changes: intent, RestartedAt: restartToken(asked), Coalesced: r.d.Coalesced, Policy: r.in.Policy, ApprovalRequest: r.approved,
	})
	r.restarting = true
	defer func() { r.restarting = false }()
	var res reload.RestartResult
	var newer time.Time // when the first change newer than the intent arrived
	done := false
	for !done {
		sel := workflow.NewSelector(ctx)
		sel.AddFuture(fut, func(f workflow.Future) { done, err = true, f.Get(ctx, &res) })
		sel.AddReceive(r.sig, func(ch workflow.ReceiveChannel, _ bool) {
			if r.d.absorb(workflow.Now(ctx), r.receive(ctx, ch)) && !superseded {
				superseded, newer = true, workflow.Now(ctx)
				cancel()
			}
		})
		sel.Select(ctx)
	}
	var canceled *temporal.CanceledError
	switch {
	case superseded && errors.As(err, &canceled):
		r.d.restartCanceled(asked)
		return true, nil
	case err != nil:
		r.d.failed(err)
		return superseded, err
	}
	// The intent may have completed just as a newer change arrived: record
	// it, and keep the newer change pending.
	r.d.restarted(intent, asked, res.Restarted, newer)
	r.approved = ""
	return superseded, nil
}
