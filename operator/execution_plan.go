package operator

import (
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/remedy-dev/remedy/api/v1alpha1"
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
	queryRetry = 2 * time.Second
)

type event struct{ eventType, reason, note string }

// executionPlan is what one reconcile does.
type executionPlan struct {
	start        bool
	status       *v1alpha1.KubernetesExecutionStatus // nil: no write
	events       []event
	requeueAfter time.Duration
}

// planExecution decides the next status from the object and the workflow's
// status query (nil when not queried). It takes no client.
func planExecution(kexec *v1alpha1.KubernetesExecution, workflowID string, observed *v1alpha1.KubernetesExecutionStatus, now time.Time) executionPlan {
	cur := kexec.Status
	if cur.WorkflowID == "" {
		next := cur.DeepCopy()
		next.WorkflowID = workflowID
		next.Phase = v1alpha1.PhasePending
		next.ObservedGeneration = kexec.Generation
		setReady(next, kexec.Generation, now)
		return executionPlan{
			start:        true,
			status:       next,
			events:       []event{{corev1.EventTypeNormal, "Started", "workflow " + workflowID + " started on task queue remedy"}},
			requeueAfter: freshPoll,
		}
	}
	if observed == nil {
		return executionPlan{}
	}

	next := observed.DeepCopy()
	next.WorkflowID = cur.WorkflowID
	next.ObservedGeneration = kexec.Generation
	next.Conditions = cur.Conditions
	setReady(next, kexec.Generation, now)

	lastChange := kexec.CreationTimestamp.Time
	if n := len(next.PhaseTransitions); n > 0 {
		lastChange = next.PhaseTransitions[n-1].Time.Time
	}
	p := executionPlan{requeueAfter: pollInterval(next.Phase, now.Sub(lastChange))}
	// One Event per phase entered since the last mirror, including phases
	// that began and ended between two queries.
	if n := len(cur.PhaseTransitions); n <= len(next.PhaseTransitions) {
		for _, tr := range next.PhaseTransitions[n:] {
			t := corev1.EventTypeNormal
			if tr.Phase == v1alpha1.PhaseFailed {
				t = corev1.EventTypeWarning
			}
			p.events = append(p.events, event{t, string(tr.Phase), joinReason(tr.Reason, tr.Message)})
		}
	}
	if !equality.Semantic.DeepEqual(&cur, next) {
		p.status = next
	}
	return p
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

// setReady maps the phase onto the Ready condition: True once Completed,
// False once Failed, Unknown while the run is going.
func setReady(s *v1alpha1.KubernetesExecutionStatus, generation int64, now time.Time) {
	status := metav1.ConditionUnknown
	switch s.Phase {
	case v1alpha1.PhaseCompleted:
		status = metav1.ConditionTrue
	case v1alpha1.PhaseFailed:
		status = metav1.ConditionFalse
	}
	reason := s.Reason
	if reason == "" {
		reason = string(s.Phase)
	}
	c := metav1.Condition{Type: v1alpha1.ConditionReady, Status: status, Reason: reason, Message: s.Message, ObservedGeneration: generation}
	// SetStatusCondition keeps the transition time unless the status flips.
	c.LastTransitionTime = metav1.NewTime(now)
	meta.SetStatusCondition(&s.Conditions, c)
}

func joinReason(reason, message string) string {
	if message == "" {
		return reason
	}
	return reason + ": " + message
}
