package workflows

import (
	"encoding/json"
	"errors"
	"fmt"
	"path"
	"strings"
	"time"

	"go.temporal.io/sdk/workflow"

	"github.com/remedy-dev/remedy/activities/approval"
	"github.com/remedy-dev/remedy/activities/gate"
	"github.com/remedy-dev/remedy/api/v1alpha1"
)

// Values of the ApprovalStatus search attribute besides the decisions.
const (
	ApprovalPending  = "Pending"
	ApprovalCanceled = "Canceled"
)

// defaultApprovalTimeout is the last level of the timeout hierarchy.
const defaultApprovalTimeout = 15 * time.Minute

// SupersededBy is the decidedBy of a request the workflow closed itself
// because the change it asked about was replaced by a newer one.
const SupersededBy = "remedy"

// ApprovalSignal is the payload of the approve and reject signals.
type ApprovalSignal struct {
	Approver string `json:"approver"`
	Reason   string `json:"reason,omitempty"`
	// Via is set by the operator when it relays a kubectl decision.
	Via string `json:"via,omitempty"`
	// Request names the RemediationApprovalRequest decided. The operator always
	// sets it, so a late relay cannot decide a newer request of the same run;
	// people may leave it out to decide whichever request is open.
	Request string `json:"request,omitempty"`
	// Namespace of the request decided. The operator always sets it, so a
	// request in another namespace that names this workflow cannot decide it;
	// when set it must be the open request's namespace.
	Namespace string `json:"namespace,omitempty"`
}

// DecideRequest is the payload of the decide update.
type DecideRequest struct {
	Approved bool   `json:"approved"`
	Approver string `json:"approver"`
	Reason   string `json:"reason,omitempty"`
	// Request and Namespace, when set, must name the open request (see ApprovalSignal).
	Request   string `json:"request,omitempty"`
	Namespace string `json:"namespace,omitempty"`
}

var approvals *approval.Approvals

// errApprovalSuperseded is returned by awaitDecision when ApprovalAsk.Superseded
// closed the request; the decision returned with it is what the RAR records.
var errApprovalSuperseded = errors.New("approval request superseded")

// errApprovalCarried is returned by awaitDecision when ApprovalAsk.Carry
// stopped the wait with the request still open.
var errApprovalCarried = errors.New("approval request carried to the next run")

// ApprovalAsk is one question to a person: the RemediationApprovalRequest to
// create and how long it may stay open.
type ApprovalAsk struct {
	Namespace string
	// Name of the RAR; unique per ask (its spec is immutable), e.g.
	// "<execution>-approval" or "drift-<id>-<unix>".
	Name string
	// Subject is what waits for the decision, of any kind; it owns the RAR.
	Subject v1alpha1.ObjectRef
	// SubjectUID of Subject; empty lets the activity read it when creating the RAR.
	SubjectUID string
	// RemediationRequest, when set, owns the RAR instead of Subject.
	RemediationRequest string
	// Context is what the approver reads; the gate enforces its
	// RequireDistinctApprover against its Requester, so the request shows
	// exactly the rule that applies.
	Context v1alpha1.ApprovalContext
	// TTLSecondsAfterFinished goes into the RAR's spec: how long it stays
	// once decided and its workflow closed (nil: the operator's default).
	TTLSecondsAfterFinished *int32
	// Timeout is the spec or policy level of the hierarchy; 0 asks the
	// namespace's remedy-config, then 15m applies.
	Timeout time.Duration
	// Opened, if set, runs once the RAR exists, before waiting: callers mirror
	// their phase here.
	Opened func(ctx workflow.Context, requiredBy time.Time)
	// Superseded, if set, is polled from the waiting coroutine whenever the run
	// wakes (it may drain the caller's channels). A non-empty message closes
	// the request as Expired with "superseded: <message>" and awaitDecision
	// returns errApprovalSuperseded.
	Superseded func() string
	// ResumeBy, when set, waits on a request an earlier run of the same
	// workflow created with this requiredBy, instead of creating one.
	ResumeBy time.Time
	// Carry, if set, is polled as Superseded is; true stops waiting with the
	// request left open, and awaitDecision returns errApprovalCarried: the run
	// continues as new and the next run resumes the request (ResumeBy).
	Carry func() bool
}

// approvalGate is the approval core shared by every workflow that asks a
// person before acting. A run creates one gate and asks through it as often as
// it likes, one request at a time:
//
//	d, err := g.awaitDecision(ctx, ApprovalAsk{...})
//
// awaitDecision creates the RAR (approval.Approvals), sets ApprovalStatus,
// waits for the approve/reject signals, the decide update or the requiredBy
// timer, records the decision on the RAR and returns it. Handlers are
// registered on the first ask and stay for the whole run (a run may register
// an update name only once), routing every decision to the open request;
// decisions naming another request, or arriving while none is open, are
// logged and dropped (signals) or refused by the validator (update).
// Errors are activity failures or cancellation; the caller names its phase.
type approvalGate struct {
	listening bool
	open      *openApproval
}

// openApproval is the request decisions currently go to.
type openApproval struct {
	namespace  string
	name       string
	requiredBy time.Time
	// requester may not approve when distinct is set.
	requester string
	distinct  bool
	decision  *gate.Decision
}

// awaitDecision asks once and waits for the answer (see approvalGate).
func (g *approvalGate) awaitDecision(ctx workflow.Context, ask ApprovalAsk) (gate.Decision, error) {
	id := workflow.GetInfo(ctx).WorkflowExecution.ID
	requiredBy := ask.ResumeBy
	if requiredBy.IsZero() {
		var err error
		if requiredBy, err = g.create(ctx, ask); err != nil {
			return gate.Decision{}, err
		}
	}
	open := &openApproval{namespace: ask.Namespace, name: ask.Name, requiredBy: requiredBy, requester: ask.Context.Requester, distinct: ask.Context.RequireDistinctApprover}
	g.open = open
	upsertApprovalStatus(ctx, ApprovalPending)
	if ask.Opened != nil {
		ask.Opened(ctx, requiredBy)
	}
	g.listen(ctx)

	superseded, carried := "", false
	ok, err := workflow.AwaitWithTimeout(ctx, requiredBy.Sub(workflow.Now(ctx)), func() bool {
		if open.decision == nil && ask.Superseded != nil {
			superseded = ask.Superseded()
		}
		if open.decision == nil && superseded == "" && ask.Carry != nil {
			carried = ask.Carry()
		}
		return open.decision != nil || superseded != "" || carried
	})
	if err != nil {
		g.open = nil
		upsertApprovalStatus(ctx, ApprovalCanceled)
		return gate.Decision{}, err
	}
	if carried && open.decision == nil && superseded == "" {
		g.open = nil
		return gate.Decision{}, errApprovalCarried
	}
	switch {
	case open.decision != nil:
	case superseded != "":
		open.decision = &gate.Decision{Decision: v1alpha1.DecisionExpired, DecidedBy: SupersededBy, Via: v1alpha1.DecidedViaTimer,
			At: workflow.Now(ctx), Message: "superseded: " + superseded}
	case !ok:
		open.decision = &gate.Decision{Decision: v1alpha1.DecisionExpired, DecidedBy: "timer", Via: v1alpha1.DecidedViaTimer,
			At: workflow.Now(ctx), Message: "no decision before " + requiredBy.UTC().Format(time.RFC3339)}
	}
	g.open = nil
	d, err := record(ctx, approval.DecisionInput{Namespace: ask.Namespace, Name: ask.Name, WorkflowID: id, Decision: *open.decision}, open.requiredBy)
	if err != nil {
		return gate.Decision{}, fmt.Errorf("record decision: %w", err)
	}
	upsertApprovalStatus(ctx, string(d.Decision))
	if superseded != "" {
		return d, errApprovalSuperseded
	}
	return d, nil
}

// create reads the timeout hierarchy and creates the RAR; it returns requiredBy.
func (g *approvalGate) create(ctx workflow.Context, ask ApprovalAsk) (time.Time, error) {
	quick := workflow.WithActivityOptions(ctx, quickOptions)
	timeout := ask.Timeout
	if timeout <= 0 {
		if err := workflow.ExecuteActivity(quick, approvals.NamespaceApprovalTimeout, ask.Namespace).Get(ctx, &timeout); err != nil {
			return time.Time{}, fmt.Errorf("read namespace approval timeout: %w", err)
		}
	}
	if timeout <= 0 {
		timeout = defaultApprovalTimeout
	}
	// RAR times are stored in whole seconds: round up so the timer and the record agree.
	requiredBy := workflow.Now(ctx).Add(timeout + time.Second - 1).Truncate(time.Second)
	in := approval.ApprovalRequestInput{
		Namespace: ask.Namespace, Name: ask.Name, Subject: ask.Subject, SubjectUID: ask.SubjectUID,
		RemediationRequest: ask.RemediationRequest, WorkflowID: workflow.GetInfo(ctx).WorkflowExecution.ID, Context: ask.Context, RequiredBy: requiredBy,
		TTLSecondsAfterFinished: ask.TTLSecondsAfterFinished,
	}
	if err := workflow.ExecuteActivity(quick, approvals.CreateApprovalRequest, in).Get(ctx, nil); err != nil {
		return time.Time{}, fmt.Errorf("create approval request: %w", err)
	}
	return requiredBy, nil
}

// offer gives a decision to the open request; late, duplicate or misaddressed
// ones are logged and ignored, and so, with a Warning, are anonymous ones and
// a requester's approval of their own request when it needs another approver.
func (g *approvalGate) offer(ctx workflow.Context, namespace, request string, d gate.Decision) {
	err := named(d.DecidedBy)
	if err == nil && (g.open == nil || g.open.decision != nil || !g.open.is(namespace, request)) {
		workflow.GetLogger(ctx).Info("ignoring approval decision", "decision", d.Decision, "approver", d.DecidedBy, "via", d.Via,
			"namespace", namespace, "request", request)
		return
	}
	if err == nil {
		err = g.open.refuses(d.DecidedBy, d.Decision)
	}
	if err != nil {
		workflow.GetLogger(ctx).Warn("ignoring approval decision: "+err.Error(), "decision", d.Decision, "approver", d.DecidedBy, "via", d.Via,
			"namespace", namespace, "request", request)
		return
	}
	g.open.decision = &d
}

// named refuses an anonymous decision: an empty or blank approver.
func named(approver string) error {
	if strings.TrimSpace(approver) == "" {
		return errors.New("approver is required: an anonymous decision is not taken")
	}
	return nil
}

// refuses says why approver may not take decision on this request: the
// requester approves a request that needs another approver (rejecting their
// own request only withdraws it).
func (o *openApproval) refuses(approver string, decision v1alpha1.Decision) error {
	if approver = strings.TrimSpace(approver); o.distinct && decision == v1alpha1.DecisionApproved && o.requester != "" && approver == o.requester {
		return fmt.Errorf("%s requested this change, and approval request %s/%s needs an approver other than the requester", approver, o.namespace, o.name)
	}
	return nil
}

// is reports whether a decision addressed to namespace/request (either may
// be empty: any) is for this request. Matching the namespace too keeps a
// request created elsewhere under the same name from deciding this one.
func (o *openApproval) is(namespace, request string) bool {
	return (request == "" || request == o.name) && (namespace == "" || namespace == o.namespace)
}

// validate refuses an update that could not be the first, timely decision
// of the open request, before it is written to history.
func (g *approvalGate) validate(ctx workflow.Context, req DecideRequest) error {
	if err := named(req.Approver); err != nil {
		return err
	}
	switch {
	case g.open == nil || g.open.decision != nil:
		return errors.New("no approval request is open: a decision was already taken")
	case !g.open.is(req.Namespace, req.Request):
		return fmt.Errorf("approval request %s is not open (the open one is %s/%s)", path.Join(req.Namespace, req.Request), g.open.namespace, g.open.name)
	case !workflow.Now(ctx).Before(g.open.requiredBy):
		return fmt.Errorf("the approval request expired at %s", g.open.requiredBy.UTC().Format(time.RFC3339))
	}
	if req.Approved {
		return g.open.refuses(req.Approver, v1alpha1.DecisionApproved)
	}
	return nil
}

// listen installs the decide update and drains both signals for the rest of
// the run, once, so a late decision is logged rather than left unhandled.
func (g *approvalGate) listen(ctx workflow.Context) {
	if g.listening {
		return
	}
	g.listening = true
	err := workflow.SetUpdateHandlerWithOptions(ctx, UpdateDecide, func(ctx workflow.Context, in decisionPayload) (string, error) {
		// The validator refused anything but a strict payload.
		var req DecideRequest
		//workflowcheck:ignore
		if err := json.Unmarshal(in.raw, &req); err != nil {
			return "", fmt.Errorf("decode decide: %w", err)
		}
		d := gate.Decision{Decision: v1alpha1.DecisionRejected, DecidedBy: req.Approver, Via: v1alpha1.DecidedViaUpdate, At: workflow.Now(ctx), Message: req.Reason}
		if req.Approved {
			d.Decision = v1alpha1.DecisionApproved
		}
		if in.by != nil {
			// A person: their Kubernetes identity, authorized, never the name they typed.
			if why := g.offerPerson(ctx, req.Namespace, req.Request, *in.by, d); why != "" {
				return "", errors.New(why)
			}
			return string(d.Decision), nil
		}
		g.offer(ctx, req.Namespace, req.Request, d)
		return string(d.Decision), nil
	}, workflow.UpdateHandlerOptions{Validator: func(ctx workflow.Context, in decisionPayload) error {
		req, err := decodeDecide(in.raw)
		if err != nil {
			return err
		}
		if in.by != nil {
			req.Approver = in.by.Username
		}
		return g.validate(ctx, req)
	}})
	if err != nil {
		workflow.GetLogger(ctx).Error("register decide update", "error", err)
	}
	// A slice, not a map: coroutines must start in the same order on replay.
	for _, s := range []struct {
		name     string
		decision v1alpha1.Decision
	}{{SignalApprove, v1alpha1.DecisionApproved}, {SignalReject, v1alpha1.DecisionRejected}} {
		ch, decision := workflow.GetSignalChannel(ctx, s.name), s.decision
		workflow.Go(ctx, func(ctx workflow.Context) {
			for {
				var in decisionPayload
				ch.Receive(ctx, &in)
				var s ApprovalSignal
				if !useSignal(ctx, ch, in.raw, &s, strict) {
					continue
				}
				if in.by != nil {
					// A person's: never the kubectl relay, whatever "via" says.
					d := gate.Decision{Decision: decision, Via: v1alpha1.DecidedViaSignal, Message: s.Reason}
					if why := g.offerPerson(ctx, s.Namespace, s.Request, *in.by, d); why != "" {
						warnRefused(ctx, ch.Name(), fmt.Sprintf("signal %q from %s was accepted by Temporal but refused: %s", ch.Name(), in.by.Username, why))
					}
					continue
				}
				via := v1alpha1.DecidedViaSignal
				if s.Via == string(v1alpha1.DecidedViaKubectl) {
					via = v1alpha1.DecidedViaKubectl
				}
				g.offer(ctx, s.Namespace, s.Request, gate.Decision{Decision: decision, DecidedBy: s.Approver, Via: via, At: workflow.Now(ctx), Message: s.Reason})
			}
		})
	}
}

func upsertApprovalStatus(ctx workflow.Context, value string) {
	if err := workflow.UpsertTypedSearchAttributes(ctx, AttrApprovalStatus.ValueSet(value)); err != nil {
		workflow.GetLogger(ctx).Warn("upsert ApprovalStatus", "error", err)
	}
}

// record writes the decision on the RAR and returns the one that stands
// there (a decision written first, e.g. by kubectl, wins). It writes as a
// local activity in the workflow task that received the decision, so the run
// leaves its waiting phase one activity round trip (an activity task and a
// workflow task) sooner; when that fails, an activity retries until requiredBy.
func record(ctx workflow.Context, in approval.DecisionInput, requiredBy time.Time) (gate.Decision, error) {
	var d gate.Decision
	err := workflow.ExecuteLocalActivity(workflow.WithLocalActivityOptions(ctx, recordLocalOptions), approvals.RecordDecision, in).Get(ctx, &d)
	if err == nil {
		return d, nil
	}
	workflow.GetLogger(ctx).Warn("recording the decision locally failed; retrying as an activity until requiredBy",
		"approvalRequest", in.Name, "error", err)
	opts := workflow.WithActivityOptions(ctx, recordOptions(workflow.Now(ctx), requiredBy))
	err = workflow.ExecuteActivity(opts, approvals.RecordDecision, in).Get(ctx, &d)
	return d, err
}
