package workflows

import (
	"errors"
	"slices"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/remedy-dev/remedy/activities"
	"github.com/remedy-dev/remedy/api/v1alpha1"
	"github.com/remedy-dev/remedy/internal/metrics"
	"github.com/remedy-dev/remedy/internal/reloadrule"
)

// ReloadApprovalOf combines the approval of every policy selecting a
// workload with these labels: required if any requires it (the shortest
// timeout any of them sets), nil if none does.
func ReloadApprovalOf(policies []v1alpha1.ConfigReloadPolicy, workload map[string]string) *ReloadApproval {
	var selecting []v1alpha1.ConfigReloadPolicy
	for i := range policies {
		if reloadrule.Selects(&policies[i], workload) {
			selecting = append(selecting, policies[i])
		}
	}
	rule := reloadrule.CombineApproval(selecting)
	if !rule.Required {
		return nil
	}
	return &ReloadApproval{Timeout: rule.Timeout}
}

// Reload defaults, for inputs built without the CRD's defaulting.
const (
	defaultDebounce     = 5 * time.Second
	defaultMaxWait      = 5 * time.Minute
	defaultRetryInitial = time.Second
	defaultRetryMax     = 30 * time.Second
	// maxCyclesPerRun bounds the debounce-and-restart cycles of one run before it continues as new.
	maxCyclesPerRun = 50
	// maxReloadSignalsPerRun bounds the signals one run absorbs before it
	// continues as new: edits faster than the debounce add a few events each.
	maxReloadSignalsPerRun = 200
	reloadRestartDeadline  = 30 * time.Second
)

// ReloadInput identifies the workload and carries the policy's timing. The
// operator starts the workflow with it; a continued run also carries the
// changes still pending and the last restart.
type ReloadInput struct {
	Namespace string        `json:"namespace"`
	Kind      string        `json:"kind"`
	Name      string        `json:"name"`
	Scope     string        `json:"scope"`
	Debounce  time.Duration `json:"debounce"`
	// MaxWait bounds how far changes within the window push a pending restart.
	MaxWait       time.Duration             `json:"maxWait,omitempty"`
	RetryInitial  time.Duration             `json:"retryInitial"`
	RetryMax      time.Duration             `json:"retryMax"`
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
	// Approval, when set, puts every restart to a person first.
	Approval *ReloadApproval `json:"approval,omitempty"`
	// Policy names the ConfigReloadPolicy, for the approval request's context.
	Policy string `json:"policy,omitempty"`
}

// ReloadStatus is what the status query returns.
type ReloadStatus struct {
	Pending []reloadrule.ConfigChange `json:"pending,omitempty"`
	// DueAt is when the pending changes restart the workload (RFC3339); a
	// change arriving before then pushes it, up to maxWait after the first.
	DueAt         string `json:"dueAt,omitempty"`
	Restarting    bool   `json:"restarting,omitempty"`
	LastRestart   string `json:"lastRestart,omitempty"`
	TotalRestarts int    `json:"totalRestarts"`
	LastError     string `json:"lastError,omitempty"`
	// ApprovalRequest names the RemediationApprovalRequest waiting for a decision.
	ApprovalRequest string `json:"approvalRequest,omitempty"`
}

// ReloadResult is the final status of one run.
type ReloadResult struct {
	Status ReloadStatus `json:"status"`
}

var reload *activities.Reload

// reloadOptions retry a failed restart with the policy's bounded backoff and
// no attempt limit: a newer change cancels and supersedes the intent instead.
func reloadOptions(in ReloadInput) workflow.ActivityOptions {
	initial, max := in.RetryInitial, in.RetryMax
	if initial <= 0 {
		initial = defaultRetryInitial
	}
	if max < initial {
		max = defaultRetryMax
	}
	return workflow.ActivityOptions{
		StartToCloseTimeout: reloadRestartDeadline,
		RetryPolicy: &temporal.RetryPolicy{
			InitialInterval:        initial,
			BackoffCoefficient:     2,
			MaximumInterval:        max,
			NonRetryableErrorTypes: []string{v1alpha1.ReasonWorkloadGone, v1alpha1.ReasonInvalidParameters},
		},
	}
}

// ReloadWorkflow restarts one workload when the ConfigMaps it uses change,
// as the seed's pending restart queue does. A change restarts the workload
// at once when its last restart is older than the debounce window (the
// leading edge); a change within the window schedules one trailing restart
// when the window closes, and each further change before then pushes it to
// a window after that change, but never later than maxWait after the first
// change it carries. Changes to any of the workload's ConfigMaps coalesce
// alike. The run ends when nothing is pending and the window since its last
// restart has passed; the operator's signal-with-start begins the next one.
func ReloadWorkflow(ctx workflow.Context, in ReloadInput) (ReloadResult, error) {
	r := &reloadRun{in: in, sig: workflow.GetSignalChannel(ctx, SignalConfigChanged), coalesced: in.Coalesced,
		lastRestartAt: in.LastRestartAt, lastAskAt: in.LastAskAt, applied: in.Applied,
		pendingSince: in.PendingSince, pushedAt: in.PushedAt}
	r.status.Pending = append([]reloadrule.ConfigChange(nil), in.Pending...)
	if len(r.status.Pending) > 0 && r.pendingSince.IsZero() {
		r.pendingSince = workflow.Now(ctx)
	}
	r.status.LastRestart, r.status.TotalRestarts, r.status.LastError = in.LastRestart, in.TotalRestarts, in.LastError
	if err := workflow.SetQueryHandler(ctx, QueryStatus, func() (ReloadStatus, error) { return r.status, nil }); err != nil {
		return ReloadResult{}, err
	}
	t := reloadTimingOf(in)
	logger := workflow.GetLogger(ctx)
	for cycles := 0; ; cycles++ {
		r.drain(ctx)
		if len(r.status.Pending) == 0 {
			r.pendingSince, r.pushedAt = time.Time{}, time.Time{}
		}
		if cycles >= maxCyclesPerRun || r.overBudget(ctx) || !r.hold(ctx, t) {
			return r.continueAsNew(ctx)
		}
		if len(r.status.Pending) == 0 {
			return ReloadResult{Status: r.status}, nil
		}
		if err := r.verify(ctx); err != nil {
			return r.end(ctx, err)
		}
		if r.gated() {
			approved, err := r.approve(ctx)
			if err != nil {
				return r.end(ctx, err)
			}
			if !approved {
				continue
			}
		}
		superseded, err := r.restart(ctx)
		if superseded {
			logger.Info("newer change superseded the restart intent", "pending", len(r.status.Pending))
			continue
		}
		if err != nil {
			return r.end(ctx, err)
		}
	}
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

// continueAsNew carries everything the next run needs to go on as this one would.
func (r *reloadRun) continueAsNew(ctx workflow.Context) (ReloadResult, error) {
	r.drain(ctx)
	next := r.in
	next.Pending, next.LastRestart, next.TotalRestarts = r.status.Pending, r.status.LastRestart, r.status.TotalRestarts
	next.LastRestartAt, next.Coalesced, next.LastError = r.lastRestartAt, r.coalesced, r.status.LastError
	next.LastAskAt, next.Applied = r.lastAskAt, r.applied
	next.PendingSince, next.PushedAt = r.pendingSince, r.pushedAt
	workflow.GetLogger(ctx).Info("continuing as new", "pending", len(next.Pending), "signals", r.signals)
	return ReloadResult{Status: r.status}, workflow.NewContinueAsNewError(ctx, ReloadWorkflow, next)
}

// overBudget reports whether this run's history is long enough to continue as new.
func (r *reloadRun) overBudget(ctx workflow.Context) bool {
	return r.signals >= maxReloadSignalsPerRun || workflow.GetInfo(ctx).GetContinueAsNewSuggested()
}

// hold waits until the pending restart is due (dueAt), absorbing changes;
// with no restart inside the window it returns at once (the leading edge).
// A change arriving while a restart is pending pushes the due time; pushes
// only ever move it later, so the timer is left running and, when it
// fires early, set again for the rest. It returns false when the run
// should continue as new first.
func (r *reloadRun) hold(ctx workflow.Context, t reloadTiming) bool {
	defer func() { r.status.DueAt = "" }()
	for {
		due := r.dueAt(t)
		if due.IsZero() || !due.After(workflow.Now(ctx)) {
			return true
		}
		if !r.waitFor(ctx, t, due) {
			return false
		}
	}
}

// waitFor runs a timer until due, absorbing changes meanwhile; it returns
// false, with the timer cancelled, when the run should continue as new.
func (r *reloadRun) waitFor(ctx workflow.Context, t reloadTiming, due time.Time) bool {
	tctx, cancel := workflow.WithCancel(ctx)
	defer cancel()
	timer := workflow.NewTimer(tctx, due.Sub(workflow.Now(ctx)))
	for {
		r.showDue(r.dueAt(t))
		holding := len(r.status.Pending) > 0
		fired, changed := r.timerOrChange(ctx, timer)
		if fired {
			return true
		}
		if changed && holding {
			r.pushedAt = workflow.Now(ctx)
		}
		if r.overBudget(ctx) {
			return false
		}
	}
}

// showDue puts the due time in the status while something is pending.
func (r *reloadRun) showDue(due time.Time) {
	r.status.DueAt = ""
	if len(r.status.Pending) > 0 {
		r.status.DueAt = due.UTC().Format(time.RFC3339Nano)
	}
}

// dueAt is when the pending changes restart: a window after the last
// restart (or superseded ask), or a window after the last change that
// arrived while they were pending, whichever is later; a push never goes
// past maxWait after the oldest pending change. Zero: nothing restarted
// yet, so nothing holds (the leading edge).
func (r *reloadRun) dueAt(t reloadTiming) time.Time {
	edge := r.lastRestartAt
	if r.lastAskAt.After(edge) {
		edge = r.lastAskAt
	}
	if edge.IsZero() {
		return time.Time{}
	}
	due := edge.Add(t.window)
	if r.pushedAt.IsZero() {
		return due
	}
	pushed := r.pushedAt.Add(t.window)
	if bound := r.pendingSince.Add(t.maxWait); !r.pendingSince.IsZero() && bound.Before(pushed) {
		pushed = bound
	}
	if pushed.After(due) {
		return pushed
	}
	return due
}

// end closes the run on err; a workload that is gone is not a failure: its
// pending changes are dropped.
func (r *reloadRun) end(ctx workflow.Context, err error) (ReloadResult, error) {
	if activities.IsWorkloadGone(err) {
		workflow.GetLogger(ctx).Info("workload gone; dropping pending changes", "error", err, "pending", len(r.status.Pending))
		if len(r.status.Pending) > 0 {
			count(ctx, metrics.ReloadDroppedRestarts.WithLabelValues(r.in.Scope), float64(len(r.status.Pending)))
		}
		r.status.Pending, r.status.LastError = nil, err.Error()
		return ReloadResult{Status: r.status}, nil
	}
	r.status.LastError = err.Error()
	return ReloadResult{Status: r.status}, err
}

// verify re-reads, before the run asks anyone or restarts, that policies
// select the workload and their authors may restart it, and learns from
// them whether a person must approve: the run's input is not trusted for
// either. A forged start for a workload no policy selects ends here, having
// written nothing.
func (r *reloadRun) verify(ctx workflow.Context) error {
	var v activities.ReloadVerdict
	err := workflow.ExecuteLocalActivity(workflow.WithLocalActivityOptions(ctx, checkOptions), reload.VerifyReload, activities.ChangesInput{
		Namespace: r.in.Namespace, Kind: r.in.Kind, Name: r.in.Name, Changes: r.status.Pending,
	}).Get(ctx, &v)
	if err != nil {
		return err
	}
	r.rule = v.Approval
	return nil
}

type reloadRun struct {
	in     ReloadInput
	sig    workflow.ReceiveChannel
	status ReloadStatus
	// coalesced counts new changes since the last restart beyond the first.
	coalesced int
	// approval is the run's approval gate, created on the first ask.
	approval *approvalGate
	// rule is the selecting policies' combined approval, as last verified.
	rule reloadrule.ApprovalRule
	// approved names the request a person approved the pending changes in, until they are restarted.
	approved string
	// signals counts the config-changed signals this run received.
	signals int
	// lastRestartAt is when the last restart was asked for; zero when unknown.
	lastRestartAt time.Time
	// lastAskAt is when the last approval request closed as superseded.
	lastAskAt time.Time
	// pendingSince is when the oldest pending change arrived; pushedAt when
	// the last one arrived while a restart was pending (zero: none did).
	pendingSince, pushedAt time.Time
	// applied holds the hashes of the last restart.
	applied []reloadrule.ConfigChange
}

// absorb merges a change into the pending set; it reports whether the change
// is new, so repeated signals of a hash already pending (replays, several
// operators) neither push the due time nor count as debounced.
func (r *reloadRun) absorb(ctx workflow.Context, c reloadrule.ConfigChange) bool {
	r.signals++
	if r.isApplied(c) {
		return false
	}
	if len(r.status.Pending) == 0 {
		r.pendingSince = workflow.Now(ctx)
	}
	for i, p := range r.status.Pending {
		if p.ConfigMap == c.ConfigMap {
			if p.Hash == c.Hash {
				return false
			}
			r.status.Pending[i].Hash = c.Hash
			r.coalesced++
			return true
		}
	}
	if len(r.status.Pending) > 0 {
		r.coalesced++
	}
	r.status.Pending = append(r.status.Pending, c)
	return true
}

// isApplied reports whether c is the data the last restart applied, and
// nothing newer for its ConfigMap is pending.
func (r *reloadRun) isApplied(c reloadrule.ConfigChange) bool {
	for _, p := range r.status.Pending {
		if p.ConfigMap == c.ConfigMap {
			return false
		}
	}
	for _, a := range r.applied {
		if a == c {
			return true
		}
	}
	return false
}

// drain absorbs every signal already delivered.
func (r *reloadRun) drain(ctx workflow.Context) bool {
	changed := false
	var c reloadrule.ConfigChange
	for r.sig.ReceiveAsync(&c) {
		changed = r.absorb(ctx, c) || changed
	}
	return changed
}

// timerOrChange waits for the timer or one signal, which it absorbs; changed
// reports a signal that carried new data.
func (r *reloadRun) timerOrChange(ctx workflow.Context, timer workflow.Future) (fired, changed bool) {
	sel := workflow.NewSelector(ctx)
	sel.AddFuture(timer, func(workflow.Future) { fired = true })
	sel.AddReceive(r.sig, func(ch workflow.ReceiveChannel, _ bool) {
		var c reloadrule.ConfigChange
		ch.Receive(ctx, &c)
		changed = r.absorb(ctx, c)
	})
	sel.Select(ctx)
	return fired, changed
}

// restart runs one intent: the pending changes as they are now. A new change
// arriving meanwhile cancels it (a retrying intent is stale) and reports superseded.
func (r *reloadRun) restart(ctx workflow.Context) (superseded bool, err error) {
	intent := append([]reloadrule.ConfigChange(nil), r.status.Pending...)
	asked := workflow.Now(ctx)
	token := asked.UTC().Format(time.RFC3339)
	actx, cancel := workflow.WithCancel(workflow.WithActivityOptions(ctx, reloadOptions(r.in)))
	fut := workflow.ExecuteActivity(actx, reload.RestartWorkload, activities.RestartInput{
		Namespace: r.in.Namespace, Kind: r.in.Kind, Name: r.in.Name, Scope: r.in.Scope,
		Changes: intent, RestartedAt: token, Coalesced: r.coalesced, Policy: r.in.Policy, ApprovalRequest: r.approved,
	})
	r.status.Restarting = true
	defer func() { r.status.Restarting = false }()
	var res activities.RestartResult
	var newer time.Time // when the first change newer than the intent arrived
	done := false
	for !done {
		sel := workflow.NewSelector(ctx)
		sel.AddFuture(fut, func(f workflow.Future) { done, err = true, f.Get(ctx, &res) })
		sel.AddReceive(r.sig, func(ch workflow.ReceiveChannel, _ bool) {
			var c reloadrule.ConfigChange
			ch.Receive(ctx, &c)
			if r.absorb(ctx, c) && !superseded {
				superseded, newer = true, workflow.Now(ctx)
				cancel()
			}
		})
		sel.Select(ctx)
	}
	var canceled *temporal.CanceledError
	switch {
	case superseded && errors.As(err, &canceled):
		// The canceled patch may have landed: its window holds the newer change.
		r.lastRestartAt = asked
		return true, nil
	case err != nil:
		r.status.LastError = err.Error()
		return superseded, err
	}
	// The intent may have completed just as a newer change arrived: record
	// it, and keep the newer change pending.
	r.status.LastError = ""
	r.applied = appliedAfter(r.applied, intent)
	if res.Restarted {
		r.lastRestartAt = asked
		r.status.LastRestart = token
		r.status.TotalRestarts++
	}
	r.coalesced, r.approved = 0, ""
	r.status.Pending = pendingAfter(r.status.Pending, intent)
	// What is left arrived during the restart: its own wait starts then.
	r.pendingSince, r.pushedAt = newer, time.Time{}
	return superseded, nil
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
		keep := true
		for _, a := range applied {
			if a == p {
				keep = false
				break
			}
		}
		if keep {
			left = append(left, p)
		}
	}
	return left
}
