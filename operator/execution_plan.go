package operator

import (
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/remedy-dev/remedy/api/v1alpha1"
	"github.com/remedy-dev/remedy/workflows"
)

const (
	// freshPoll mirrors a run that changed phase recently: most actions
	// finish within a second, and users watch them do it.
	freshPoll = 100 * time.Millisecond
	// activePoll mirrors a run that has been in one phase for a while.
	activePoll = time.Second
	// waitingPoll is for phases that wait on people or timers.
	waitingPoll = 2 * time.Second
	// freshFor is how long after a phase change freshPoll applies.
	freshFor   = 5 * time.Second
	queryRetry = 500 * time.Millisecond
	// firstPushWait is how long a run just started has to write its first
	// phase before it is queried as a run that does not push. Its write wakes
	// the next reconcile, which then needs no query; querying it at freshPoll
	// cost every new run a query (a workflow task on the worker) that, under
	// load, timed out and was retried.
	firstPushWait = 2 * time.Second
)

type event struct{ eventType, reason, note string }

// plan is what one reconcile does, for a resource whose status is S.
type plan[S any] struct {
	start        bool
	status       *S // nil: no write
	events       []event
	requeueAfter time.Duration
	// entered lists phases entered since the last mirror, with the time spent in the one before.
	entered []phaseEntry
	// rollback asks the workflow to roll back (the rollback annotation).
	rollback *workflows.RollbackRequest
	// limited: the open-runs cap holds the run back, as of this reconcile.
	limited bool
}

type phaseEntry struct {
	phase, reason string
	prevPhase     string
	prevDuration  time.Duration
}

// RollbackAnnotation asks a RollbackReady execution to roll back; its value is the reason.
const RollbackAnnotation = v1alpha1.RollbackAnnotation

type executionPlan = plan[v1alpha1.KubernetesExecutionStatus]

// planExecution decides the next status from the object, the workflow's
// status query (nil when not queried; for a closed workflow, its final
// status when it could be read) and what a look at the workflow found (run).
// It takes no client. Runs that write their own status (status.sequence > 0)
// are only started, signalled and, when quiet, looked at (run.recheck); the
// query mirror is for runs none of whose writes landed. A run whose
// workflow is gone before it wrote a final phase fails WorkflowLost.
//
// decided says the execution's approval request already carries a decision,
// so the workflow is about to leave WaitingApproval.
func planExecution(kexec *v1alpha1.KubernetesExecution, workflowID string, observed *v1alpha1.KubernetesExecutionStatus, run runLook, decided bool, now time.Time) executionPlan {
	cur := kexec.Status
	if cur.WorkflowID == "" {
		return planUnstarted(kexec, workflowID, now)
	}
	if p := planLateRollback(kexec, now); p != nil {
		return *p
	}
	if p := planLostExecution(kexec, observed, run, now); p != nil {
		return *p
	}
	// A workflow that ended by itself with a final phase its push did not
	// store (or not yet, as the cache says) is mirrored from its last query.
	late := run.state == runClosed && observed != nil && observed.Phase.Terminal() && !cur.Phase.Terminal() && observed.Sequence >= cur.Sequence
	if cur.Sequence > 0 && !late {
		// The workflow writes its own status: nothing to mirror, nothing to
		// poll; a quiet run is looked at again after run.recheck.
		return executionPlan{rollback: rollbackRequest(kexec, cur.Phase), requeueAfter: run.recheck}
	}
	if observed == nil || (observed.Sequence > 0 && !late) {
		// Not queried, or the query found a run that pushes and whose first
		// write is on its way: its watch event wakes the next reconcile.
		return executionPlan{}
	}

	return planMirror(kexec, observed, decided, now)
}

// planUnstarted records the workflow a new execution gets: a step's is
// started by its RemediationRequest's workflow, any other's by this
// reconcile, unless its spec is one the schema should have refused.
func planUnstarted(kexec *v1alpha1.KubernetesExecution, workflowID string, now time.Time) executionPlan {
	cur := kexec.Status
	if isStep(kexec) {
		// A RemediationRequest's workflow starts its steps as child workflows.
		next := cur.DeepCopy()
		next.WorkflowID = workflowID
		next.Phase = v1alpha1.PhasePending
		next.ObservedGeneration = kexec.Generation
		setReady(next, kexec.Generation, now)
		return executionPlan{status: next, requeueAfter: freshPoll}
	}
	if invalid := kexec.Spec.ValidateDurations(); invalid != nil {
		return refuseExecution(kexec, invalid, now)
	}
	next := cur.DeepCopy()
	next.WorkflowID = workflowID
	next.Phase = v1alpha1.PhasePending
	next.Reason, next.Message = "", "" // no longer held back by the open-runs cap
	next.ObservedGeneration = kexec.Generation
	setReady(next, kexec.Generation, now)
	return executionPlan{
		start:        true,
		status:       next,
		events:       []event{{corev1.EventTypeNormal, reasonStarted, "workflow " + workflowID + " started on task queue remedy"}},
		requeueAfter: firstPushWait,
	}
}

// planMirror mirrors the status query of a run none of whose writes landed.
func planMirror(kexec *v1alpha1.KubernetesExecution, observed *v1alpha1.KubernetesExecutionStatus, decided bool, now time.Time) executionPlan {
	cur := kexec.Status
	next := observed.DeepCopy()
	next.WorkflowID, next.RunID = cur.WorkflowID, cur.RunID
	next.ObservedGeneration = kexec.Generation
	next.Conditions = cur.Conditions
	setReady(next, kexec.Generation, now)

	lastChange := kexec.CreationTimestamp.Time
	if n := len(next.PhaseTransitions); n > 0 {
		lastChange = next.PhaseTransitions[n-1].Time.Time
	}
	p := executionPlan{requeueAfter: pollInterval(next.Phase, now.Sub(lastChange))}
	if decided && next.Phase == v1alpha1.PhaseWaitingApproval {
		p.requeueAfter = freshPoll
	}
	p.entered, p.events = phasesEntered(cur.PhaseTransitions, next.PhaseTransitions)
	if !equality.Semantic.DeepEqual(&cur, next) {
		p.status = next
	}
	if cur.Phase == next.Phase {
		p.rollback = rollbackRequest(kexec, cur.Phase)
	}
	return p
}

// phasesEntered is one entry and one Event per phase entered since the
// last mirror (cur), including phases that began and ended between two
// queries.
func phasesEntered(cur, next []v1alpha1.PhaseTransition) ([]phaseEntry, []event) {
	var entered []phaseEntry
	var events []event
	n := len(cur)
	if n > len(next) {
		return nil, nil
	}
	for i, tr := range next[n:] {
		e := phaseEntry{phase: string(tr.Phase), reason: tr.Reason}
		if j := n + i - 1; j >= 0 {
			prev := next[j]
			e.prevPhase, e.prevDuration = string(prev.Phase), tr.Time.Sub(prev.Time.Time)
		}
		entered = append(entered, e)
		t := corev1.EventTypeNormal
		if tr.Phase == v1alpha1.PhaseFailed {
			t = corev1.EventTypeWarning
		}
		events = append(events, event{t, string(tr.Phase), joinReason(tr.Reason, tr.Message)})
	}
	return entered, events
}

// maxPhaseTransitions is the schema's bound on status.phaseTransitions.
const maxPhaseTransitions = 32

// planLostExecution fails a run whose workflow is gone before it wrote a
// final phase (lostMessage); nil when it is not lost, or not known to be.
// The sequence stays: should the workflow write after all, its write wins.
func planLostExecution(kexec *v1alpha1.KubernetesExecution, observed *v1alpha1.KubernetesExecutionStatus, run runLook, now time.Time) *executionPlan {
	cur := kexec.Status
	if cur.Phase.Terminal() {
		return nil
	}
	if run.state == runMissing && cur.Sequence == 0 && now.Sub(kexec.CreationTimestamp.Time) < missingGrace {
		// A step's workflow is started by its parent just after the step exists.
		return &executionPlan{requeueAfter: queryRetry}
	}
	var final *v1alpha1.Phase
	if observed != nil {
		final = &observed.Phase
	}
	msg := lostMessage(cur.WorkflowID, cur.Phase, run, final)
	if msg == "" {
		return nil
	}
	next := cur.DeepCopy()
	next.Phase, next.Reason, next.Message, next.ObservedGeneration = v1alpha1.PhaseFailed, v1alpha1.ReasonWorkflowLost, msg, kexec.Generation
	e := phaseEntry{phase: string(v1alpha1.PhaseFailed), reason: v1alpha1.ReasonWorkflowLost}
	if n := len(cur.PhaseTransitions); n > 0 {
		prev := cur.PhaseTransitions[n-1]
		e.prevPhase, e.prevDuration = string(prev.Phase), now.Sub(prev.Time.Time)
	}
	if len(next.PhaseTransitions) < maxPhaseTransitions {
		next.PhaseTransitions = append(next.PhaseTransitions, v1alpha1.PhaseTransition{Phase: v1alpha1.PhaseFailed, Reason: v1alpha1.ReasonWorkflowLost, Message: msg, Time: metav1.NewMicroTime(now)})
	}
	setReady(next, kexec.Generation, now)
	return &executionPlan{status: next, entered: []phaseEntry{e},
		events: []event{{corev1.EventTypeWarning, string(v1alpha1.PhaseFailed), joinReason(v1alpha1.ReasonWorkflowLost, msg)}}}
}

// refuseExecution fails a run whose spec the schema should have refused
// (stored before it checked durations) without starting its workflow; once
// the status says so, there is nothing more to do.
func refuseExecution(kexec *v1alpha1.KubernetesExecution, invalid error, now time.Time) executionPlan {
	cur := kexec.Status
	if cur.Phase == v1alpha1.PhaseFailed && cur.Reason == v1alpha1.ReasonInvalidSpec {
		return executionPlan{}
	}
	msg := invalidSpecMessage(invalid)
	next := cur.DeepCopy()
	next.Phase, next.Reason, next.Message, next.ObservedGeneration = v1alpha1.PhaseFailed, v1alpha1.ReasonInvalidSpec, msg, kexec.Generation
	next.PhaseTransitions = append(next.PhaseTransitions, v1alpha1.PhaseTransition{Phase: v1alpha1.PhaseFailed, Reason: v1alpha1.ReasonInvalidSpec, Message: msg, Time: metav1.NewMicroTime(now)})
	setReady(next, kexec.Generation, now)
	return executionPlan{status: next, events: []event{{corev1.EventTypeWarning, string(v1alpha1.PhaseFailed), joinReason(v1alpha1.ReasonInvalidSpec, msg)}}}
}

// rollbackRequest relays the rollback annotation of an execution in RollbackReady.
func rollbackRequest(kexec *v1alpha1.KubernetesExecution, phase v1alpha1.Phase) *workflows.RollbackRequest {
	reason, ok := kexec.Annotations[RollbackAnnotation]
	if !ok || phase != v1alpha1.PhaseRollbackReady {
		return nil
	}
	who := kexec.Annotations[v1alpha1.RollbackRequesterAnnotation]
	if who == "" {
		who = "annotation " + RollbackAnnotation
	}
	return &workflows.RollbackRequest{Requester: who, Reason: reason}
}

// isStep reports whether a RemediationRequest controls the execution.
func isStep(kexec *v1alpha1.KubernetesExecution) bool {
	owner := metav1.GetControllerOf(kexec)
	return kexec.Spec.RemediationRequestRef != nil && owner != nil && owner.Kind == "RemediationRequest" && owner.APIVersion == v1alpha1.GroupVersion.String()
}

func pollInterval(phase v1alpha1.Phase, sinceChange time.Duration) time.Duration {
	switch {
	case phase.Terminal():
		return 0
	case phase == v1alpha1.PhaseWaitingApproval || phase == v1alpha1.PhaseRollbackReady:
		return waitingPoll
	case sinceChange < freshFor:
		return freshPoll
	default:
		return activePoll
	}
}

func setReady(s *v1alpha1.KubernetesExecutionStatus, generation int64, now time.Time) {
	setCondition(&s.Conditions, s.Phase, s.Reason, s.Message, generation, now)
}

// setCondition maps a phase onto the Ready condition.
func setCondition(conds *[]metav1.Condition, phase v1alpha1.Phase, reason, message string, generation int64, now time.Time) {
	v1alpha1.SetReady(conds, phase, reason, message, generation, now)
}

func joinReason(reason, message string) string {
	if message == "" {
		return reason
	}
	return reason + ": " + message
}
