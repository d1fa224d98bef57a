package workflows

import (
	"fmt"
	"slices"
	"time"

	"go.temporal.io/sdk/workflow"

	"github.com/remedy-dev/remedy/activities/alerts"
	"github.com/remedy-dev/remedy/api/v1alpha1"
)

// Signals between alert workflows and their namespace's guard.
const (
	// SignalAcquire asks the guard for a permit (AcquireRequest).
	SignalAcquire = "acquire"
	// SignalRelease returns a permit, or withdraws a queued request (ReleaseRequest).
	SignalRelease = "release"
	// SignalPermit is the guard's answer to an alert workflow (Permit).
	SignalPermit = "permit"
	// SignalJoined tells an open alert run that another alert joined it,
	// or that a joined alert resolved (JoinNote).
	SignalJoined = "joined"
)

// JoinNote is an alert that joined an open run, or its resolve.
type JoinNote struct {
	AlertID  string `json:"alertID"`
	Resolved bool   `json:"resolved,omitempty"`
}

// maxGuardSignalsPerRun bounds the signals one guard run absorbs before it continues as new.
const maxGuardSignalsPerRun = 500

// AcquireRequest asks the guard for one run on one target.
type AcquireRequest = alerts.GuardAcquire

// ReleaseRequest ends a permit, or withdraws a queued request.
type ReleaseRequest struct {
	AlertID string `json:"alertID"`
	// Nonce is the request's (AcquireRequest.Nonce): a release without it
	// ends nothing a bound request holds.
	Nonce string `json:"nonce,omitempty"`
}

// Permit is the guard's answer: granted, or refused with the guard that tripped.
type Permit struct {
	Granted bool   `json:"granted"`
	Reason  string `json:"reason,omitempty"`
	Message string `json:"message,omitempty"`
	// StormUntil is set when the refusal is storm mode's.
	StormUntil *time.Time `json:"stormUntil,omitempty"`
	// RequestNonce is the nonce of the request this permit answers
	// (AcquireRequest.Nonce): the alert run takes no permit without its own.
	// Named unlike the request's field, so an acquire replayed as a permit carries none.
	RequestNonce string `json:"requestNonce,omitempty"`
	// Joined is the open run of the same rule and target this alert joined
	// instead of running (AcquireRequest.Join).
	Joined string `json:"joined,omitempty"`
}

// GuardState is everything the guard knows; it is carried across continue-as-new.
type GuardState struct {
	Namespace string           `json:"namespace"`
	Running   []AcquireRequest `json:"running,omitempty"`
	Queue     []AcquireRequest `json:"queue,omitempty"`
	// Ends is when each target's last run ended (cooldown), Runs when its runs started (breaker).
	Ends  map[string]time.Time   `json:"ends,omitempty"`
	Runs  map[string][]time.Time `json:"runs,omitempty"`
	Storm map[string]time.Time   `json:"storm,omitempty"`
}

// answer is one permit decided, for one alert workflow's request.
type answer struct {
	req    AcquireRequest
	permit Permit
}

// decide grants or refuses queued requests in arrival order, as far as the
// guards allow now; requests for a busy or cooling target, or over the
// namespace budget, stay queued. It returns the answers and when the next
// queued request could be granted by time alone (zero: no such time).
func (s *GuardState) decide(now time.Time) (out []answer, wake time.Time) {
	var keep []AcquireRequest
	for _, r := range s.Queue {
		if h := s.openRun(r, keep); h != "" {
			out = append(out, answer{r, Permit{Joined: h}})
			continue
		}
		if until, ok := s.Storm[r.Rule]; ok && now.Before(until) {
			out = append(out, answer{r, stormPermit(r.Rule, until)})
			continue
		}
		runs := recent(s.Runs[r.Target], now, r.BreakerWindow)
		if r.BreakerRuns > 0 && len(runs) >= r.BreakerRuns {
			out = append(out, answer{r, Permit{Reason: v1alpha1.ReasonCircuitOpen, Message: fmt.Sprintf(
				"%s was remediated %d times within %s and the alert fired again: stopped, a person must look", r.Target, len(runs), r.BreakerWindow)}})
			continue
		}
		if s.busy(r.Target) {
			keep = append(keep, r)
			continue
		}
		if end, ok := s.Ends[r.Target]; ok && now.Before(end.Add(r.Cooldown)) {
			keep = append(keep, r)
			if t := end.Add(r.Cooldown); wake.IsZero() || t.Before(wake) {
				wake = t
			}
			continue
		}
		if s.running(r.Rule) >= max(1, r.MaxConcurrent) {
			until := now.Add(r.Cooldown)
			if s.Storm == nil {
				s.Storm = map[string]time.Time{}
			}
			s.Storm[r.Rule] = until
			out = append(out, answer{r, stormPermit(r.Rule, until)})
			continue
		}
		if len(s.Running) >= max(1, r.Slots) {
			keep = append(keep, r)
			continue
		}
		s.Running = append(s.Running, r)
		if s.Runs == nil {
			s.Runs = map[string][]time.Time{}
		}
		s.Runs[r.Target] = append(runs, now)
		out = append(out, answer{r, Permit{Granted: true}})
	}
	s.Queue = keep
	return out, wake
}

// openRun is the alert workflow whose open request r joins: one of the
// same rule and target that joins too, holding a permit or queued ahead
// of r; "" when r runs on its own.
func (s *GuardState) openRun(r AcquireRequest, ahead []AcquireRequest) string {
	if !r.Join {
		return ""
	}
	for _, l := range [][]AcquireRequest{s.Running, ahead} {
		for _, o := range l {
			if o.Join && o.Rule == r.Rule && o.Target == r.Target && o.AlertID != r.AlertID {
				return o.AlertID
			}
		}
	}
	return ""
}

// proceed answers a request that continues a permit its run holds (the
// next rung of the run's escalation ladder): the target stays the run's,
// and the rung counts as a run for the circuit breaker, which may stop
// the ladder (the permit then ends, and the target's cooldown starts).
// ok is false when r continues no permit held: it is a request like any other.
func (s *GuardState) proceed(r AcquireRequest, now time.Time) (p Permit, ok bool) {
	if r.Continues == "" {
		return Permit{}, false
	}
	i := slices.IndexFunc(s.Running, func(o AcquireRequest) bool { return same(o, r.AlertID, r.Continues) })
	if i < 0 {
		return Permit{}, false
	}
	runs := recent(s.Runs[r.Target], now, r.BreakerWindow)
	if r.BreakerRuns > 0 && len(runs) >= r.BreakerRuns {
		s.release(r.AlertID, r.Continues, now)
		return Permit{Reason: v1alpha1.ReasonCircuitOpen, Message: fmt.Sprintf(
			"%s was remediated %d times within %s and the alert still fires: the escalation stopped, a person must look", r.Target, len(runs), r.BreakerWindow)}, true
	}
	s.Running[i] = r
	if s.Runs == nil {
		s.Runs = map[string][]time.Time{}
	}
	s.Runs[r.Target] = append(runs, now)
	return Permit{Granted: true}, true
}

func stormPermit(rule string, until time.Time) Permit {
	u := until
	return Permit{Reason: v1alpha1.ReasonStorm, StormUntil: &u, Message: fmt.Sprintf(
		"more alerts than rule %s's maxConcurrent: storm mode, the rule acts on no new alert until %s", rule, until.UTC().Format(time.RFC3339))}
}

func recent(ts []time.Time, now time.Time, window time.Duration) []time.Time {
	var out []time.Time
	for _, t := range ts {
		if now.Sub(t) < window {
			out = append(out, t)
		}
	}
	return out
}

func (s *GuardState) busy(target string) bool {
	return slices.ContainsFunc(s.Running, func(r AcquireRequest) bool { return r.Target == target })
}

func (s *GuardState) running(rule string) int {
	n := 0
	for _, r := range s.Running {
		if r.Rule == rule {
			n++
		}
	}
	return n
}

// same says whether o is the request of alertID with nonce (both empty
// for runs recorded before permits were bound to their requests).
func same(o AcquireRequest, alertID, nonce string) bool {
	return o.AlertID == alertID && o.Nonce == nonce
}

// add queues a request, unless it already holds or awaits a permit (a
// retried acquire): then it reports whether it holds one. A request of
// another run of the same alert is another request: it queues behind.
func (s *GuardState) add(r AcquireRequest) (known, granted bool) {
	if slices.ContainsFunc(s.Running, func(o AcquireRequest) bool { return same(o, r.AlertID, r.Nonce) }) {
		return true, true
	}
	if slices.ContainsFunc(s.Queue, func(o AcquireRequest) bool { return same(o, r.AlertID, r.Nonce) }) {
		return true, false
	}
	s.Queue = append(s.Queue, r)
	return false, false
}

// release ends the request's permit (its target's cooldown starts now) or
// drops it from the queue. Only the request's own nonce does: a release
// signalled by anyone else, or replayed from another run, ends nothing.
func (s *GuardState) release(alertID, nonce string, now time.Time) {
	s.Queue = slices.DeleteFunc(s.Queue, func(o AcquireRequest) bool { return same(o, alertID, nonce) })
	i := slices.IndexFunc(s.Running, func(o AcquireRequest) bool { return same(o, alertID, nonce) })
	if i < 0 {
		return
	}
	if s.Ends == nil {
		s.Ends = map[string]time.Time{}
	}
	s.Ends[s.Running[i].Target] = now
	s.Running = slices.Delete(s.Running, i, i+1)
}

// idle reports whether the guard holds nothing that still matters at now:
// no permit, no queue, and every cooldown, breaker window and storm over.
// The longest breaker window and cooldown are those of the requests seen.
func (s *GuardState) idle(now time.Time, horizon time.Duration) bool {
	if len(s.Running) > 0 || len(s.Queue) > 0 {
		return false
	}
	// Whether any entry is still live does not depend on the order the
	// maps are ranged in, hence the //workflowcheck:ignore lines.
	//workflowcheck:ignore
	for _, t := range s.Storm {
		if now.Before(t) {
			return false
		}
	}
	//workflowcheck:ignore
	for _, ts := range s.Runs {
		for _, t := range ts {
			if now.Sub(t) < horizon {
				return false
			}
		}
	}
	//workflowcheck:ignore
	for _, t := range s.Ends {
		if now.Sub(t) < horizon {
			return false
		}
	}
	return true
}

// GuardInput starts (or continues) a namespace's guard.
type GuardInput struct {
	State GuardState `json:"state"`
	// Horizon is the longest breaker window or cooldown seen: the guard
	// stays open while any run is younger.
	Horizon time.Duration `json:"horizon"`
}

// GuardResult is the guard's state when it ended.
type GuardResult struct {
	State GuardState `json:"state"`
}

// AlertGuardWorkflow is the one workflow per namespace that grants alert
// runs their permits, so that the per-target guard (one run at a time, a
// cooldown after each, a circuit breaker), each rule's maxConcurrent with
// storm mode, and the namespace budget hold across every rule and alert.
// It ends once nothing it holds matters any more.
func AlertGuardWorkflow(ctx workflow.Context, in GuardInput) (GuardResult, error) {
	s := in.State
	horizon := in.Horizon
	acquire := workflow.GetSignalChannel(ctx, SignalAcquire)
	release := workflow.GetSignalChannel(ctx, SignalRelease)
	if err := workflow.SetQueryHandler(ctx, QueryStatus, func() (GuardState, error) { return s, nil }); err != nil {
		return GuardResult{}, err
	}
	signals := 0
	rc := newReclaimer(ctx)
	for {
		got := false
		for {
			var r AcquireRequest
			if !acquire.ReceiveAsync(&r) {
				break
			}
			got, signals = true, signals+1
			horizon = max(horizon, r.BreakerWindow, r.Cooldown)
			if p, ok := s.proceed(r, workflow.Now(ctx)); ok {
				answerAlert(ctx, &s, answer{r, p})
			} else if known, granted := s.add(r); known && granted {
				answerAlert(ctx, &s, answer{r, Permit{Granted: true}})
			} else if !known {
				rc.arrived()
			}
		}
		for {
			var r ReleaseRequest
			if !release.ReceiveAsync(&r) {
				break
			}
			got, signals = true, signals+1
			s.release(r.AlertID, r.Nonce, workflow.Now(ctx))
		}
		now := workflow.Now(ctx)
		answers, wake := s.decide(now)
		for _, a := range answers {
			answerAlert(ctx, &s, a)
		}
		if got {
			continue
		}
		if rc.due(&s, now) {
			rc.reclaim(ctx, &s)
			continue
		}
		if s.idle(now, horizon) {
			return GuardResult{State: s}, nil
		}
		if signals >= maxGuardSignalsPerRun || workflow.GetInfo(ctx).GetContinueAsNewSuggested() {
			return GuardResult{State: s}, workflow.NewContinueAsNewError(ctx, AlertGuardWorkflow, GuardInput{State: s, Horizon: horizon})
		}
		// Sleep until a signal, a queued target's cooldown, or the horizon.
		timeout := horizon
		if !wake.IsZero() {
			timeout = wake.Sub(now)
		}
		timeout = rc.bound(&s, now, timeout)
		_, _ = workflow.AwaitWithTimeout(ctx, max(timeout, time.Second), func() bool {
			return acquire.Len() > 0 || release.Len() > 0
		})
	}
}

// answerAlert signals the alert workflow, with its request's nonce: the
// run takes no other permit. A workflow that is gone cannot use its
// permit, so it is released.
func answerAlert(ctx workflow.Context, s *GuardState, a answer) {
	a.permit.RequestNonce = a.req.Nonce
	if a.permit.Joined != "" {
		// The open run verifies the joined alert too.
		if err := workflow.SignalExternalWorkflow(ctx, a.permit.Joined, "", SignalJoined, JoinNote{AlertID: a.req.AlertID}).Get(ctx, nil); err != nil {
			workflow.GetLogger(ctx).Warn("open run not told of the alert that joined it", "run", a.permit.Joined, "alert", a.req.AlertID, "error", err)
		}
	}
	if err := workflow.SignalExternalWorkflow(ctx, a.req.AlertID, "", SignalPermit, a.permit).Get(ctx, nil); err != nil {
		workflow.GetLogger(ctx).Warn("alert workflow not answered", "alert", a.req.AlertID, "error", err)
		if a.permit.Granted {
			s.release(a.req.AlertID, a.req.Nonce, workflow.Now(ctx))
		}
	}
}
