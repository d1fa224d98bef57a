package workflows

import (
	"errors"
	"fmt"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/remedy-dev/remedy/activities/drift"
	"github.com/remedy-dev/remedy/activities/fail"
	"github.com/remedy-dev/remedy/activities/gate"
	"github.com/remedy-dev/remedy/api/v1alpha1"
)

// DriftApprovalAction is the approval context's action of a drift's request.
const DriftApprovalAction = gate.DriftApprovalAction

// driftWriteOptions retry an annotation write on a busy API server.
var driftWriteOptions = workflow.ActivityOptions{
	StartToCloseTimeout: 30 * time.Second,
	RetryPolicy: &temporal.RetryPolicy{
		InitialInterval:        time.Second,
		BackoffCoefficient:     2,
		MaximumInterval:        30 * time.Second,
		MaximumAttempts:        5,
		NonRetryableErrorTypes: fail.NonRetryable,
	},
}

// DriftApprovalRequestName names the request asked about one drift: the
// time keeps a second ask about the same drift, in a later run, distinct.
func DriftApprovalRequestName(id string, at time.Time) string {
	return fmt.Sprintf("drift-%s-%d", id, at.Unix())
}

// startApprovals queues the carried drifts that still wait for an ask and
// starts the coroutine that asks people about drifts, one request at a time
// through the shared approval gate, so approve, reject and decide always
// reach the one open request.
func (r *driftRun) startApprovals(ctx workflow.Context) {
	r.wake = workflow.NewBufferedChannel(ctx, 1)
	// A request an earlier run left open is waited on first.
	for _, d := range r.status.Open {
		if !d.ApprovalRequiredBy.IsZero() {
			r.asks = append(r.asks, d.Signal.ID)
		}
	}
	for _, d := range r.status.Open {
		if r.status.Settings.RequestApproval && d.ApprovalRequest == "" {
			r.asks = append(r.asks, d.Signal.ID)
		}
	}
	workflow.Go(ctx, func(ctx workflow.Context) {
		gate := &approvalGate{}
		for {
			if err := workflow.Await(ctx, func() bool { return len(r.asks) > 0 && !r.carrying }); err != nil {
				return
			}
			id := r.asks[0]
			r.asks = r.asks[1:]
			r.askingID = id
			r.ask(ctx, gate, id)
			r.askingID = ""
			r.wake.SendAsync(true)
		}
	})
}

// ask opens a RemediationApprovalRequest about one drift and applies the
// decision: approve writes a once approval for the child onto the parent
// (the drift resolves), reject writes a rejection with the reason (the
// drift stays open until the parent changes or the child goes), expiry
// leaves the drift as it was. A drift that resolves meanwhile closes the
// request as superseded.
func (r *driftRun) ask(ctx workflow.Context, gate *approvalGate, id string) {
	logger := workflow.GetLogger(ctx)
	i := r.find(id)
	if i < 0 {
		return
	}
	s := r.status.Open[i].Signal
	if s.Parent.Namespace == "" {
		logger.Warn("no approval request for a cluster-scoped parent", "id", id, "parent", s.Parent.Target())
		return
	}
	name, resumeBy := DriftApprovalRequestName(id, workflow.Now(ctx)), r.status.Open[i].ApprovalRequiredBy
	if !resumeBy.IsZero() {
		name = r.status.Open[i].ApprovalRequest
	}
	r.status.Open[i].ApprovalRequest, r.status.Open[i].ApprovalRequiredBy = name, time.Time{}
	var requiredBy time.Time
	d, err := gate.awaitDecision(ctx, ApprovalAsk{
		ResumeBy:   resumeBy,
		Opened:     func(_ workflow.Context, by time.Time) { requiredBy = by },
		Carry:      func() bool { return r.carrying },
		Namespace:  s.Parent.Namespace,
		Name:       name,
		Subject:    v1alpha1.ObjectRef{APIVersion: s.Parent.APIVersion, Kind: s.Parent.Kind, Namespace: s.Parent.Namespace, Name: s.Parent.Name},
		SubjectUID: s.Parent.UID,
		Context: v1alpha1.ApprovalContext{
			Reason: driftApprovalReason(s), Action: DriftApprovalAction,
			Target: v1alpha1.ObjectRef{APIVersion: s.Child.APIVersion, Kind: s.Child.Kind, Namespace: s.Child.Namespace, Name: s.Child.Name},
		},
		Superseded: func() string {
			if r.find(id) >= 0 {
				return ""
			}
			return "the drift resolved: " + r.closedReason(id)
		},
	})
	if errors.Is(err, errApprovalSuperseded) {
		return
	}
	if errors.Is(err, errApprovalCarried) {
		if i := r.find(id); i >= 0 {
			r.status.Open[i].ApprovalRequiredBy = requiredBy
		}
		logger.Info("approval request carried to the next run", "id", id, "approvalRequest", name)
		return
	}
	if err != nil {
		logger.Warn("drift approval request failed", "id", id, "approvalRequest", name, "error", err)
		return
	}
	r.setDecision(id, string(d.Decision))
	logger.Info("drift decided", "id", id, "approvalRequest", name, "decision", d.Decision, "approver", d.DecidedBy, "via", d.Via)
	in := drift.DriftDecisionInput{Parent: drift.DriftObject(s.Parent), Child: drift.DriftObject(s.Child), Generation: s.ParentGeneration,
		ApprovalRequest: name}
	wctx := workflow.WithActivityOptions(ctx, driftWriteOptions)
	switch d.Decision {
	case v1alpha1.DecisionApproved:
		if err := workflow.ExecuteActivity(wctx, drifts.WriteApproval, in).Get(ctx, nil); err != nil {
			logger.Warn("write drift approval", "id", id, "error", err)
			return
		}
		if i := r.find(id); i >= 0 {
			r.resolve(ctx, i, drift.DriftApproved)
		}
	case v1alpha1.DecisionRejected:
		in.Reason = fmt.Sprintf("rejected by %s", d.DecidedBy)
		if d.Message != "" {
			in.Reason += ": " + d.Message
		}
		if err := workflow.ExecuteActivity(wctx, drifts.WriteRejection, in).Get(ctx, nil); err != nil {
			logger.Warn("write drift rejection", "id", id, "error", err)
		}
	}
}

func (r *driftRun) setDecision(id, decision string) {
	if i := r.find(id); i >= 0 {
		r.status.Open[i].Decision = decision
	}
}

func (r *driftRun) closedReason(id string) string {
	for j := len(r.closed) - 1; j >= 0; j-- {
		if r.closed[j].ID == id {
			return r.closed[j].Reason
		}
	}
	return "unknown"
}

// dropAsk forgets a queued ask whose drift resolved before it was asked.
func (r *driftRun) dropAsk(id string) {
	for i, a := range r.asks {
		if a == id {
			r.asks = append(r.asks[:i:i], r.asks[i+1:]...)
			return
		}
	}
}

func driftApprovalReason(s DriftSignal) string {
	verb := map[string]string{"CREATE": "create", "UPDATE": "update", "DELETE": "delete"}[s.Operation]
	if verb == "" {
		verb = s.Operation
	}
	return fmt.Sprintf("drift %s: %s wants to %s %s %s while %s %s (generation %d) has not changed; "+
		"approve lets this change through once, reject blocks it until the %s changes",
		s.ID, orUnknown(s.User), verb, s.Child.Kind, s.Child.Name, s.Parent.Kind, s.Parent.Name, s.ParentGeneration, s.Parent.Kind)
}
