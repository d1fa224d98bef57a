package status

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"time"

	"go.temporal.io/sdk/activity"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/util/retry"
	ctrlclient "sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/remedy-dev/remedy/activities/fail"
	"github.com/remedy-dev/remedy/activities/gate"
	"github.com/remedy-dev/remedy/api/v1alpha1"
	"github.com/remedy-dev/remedy/internal/metrics"
)

// +kubebuilder:rbac:groups=remedy.dev,resources=kubernetesexecutions/status;remediationrequests/status,verbs=update
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create

// Statuses writes the .status that a workflow pushes at each phase change,
// with the Events and metrics of the phases entered, so the operator need not
// poll open runs.
type Statuses struct {
	// Client reads the object and updates its status subresource.
	Client ctrlclient.Client
	// Kube creates the Events.
	Kube kubernetes.Interface
	// Seen, when set, keeps what each push wrote: the next push of the run
	// starts from it instead of reading the object again (subject_seen.go).
	Seen *gate.Seen
}

// ExecutionStatusPush is one KubernetesExecution status write.
type ExecutionStatusPush struct {
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
	UID       string `json:"uid"`
	// Action labels the phase metrics.
	Action string                             `json:"action"`
	Status v1alpha1.KubernetesExecutionStatus `json:"status"`
}

// RemediationStatusPush is one RemediationRequest status write.
type RemediationStatusPush struct {
	Namespace string                            `json:"namespace"`
	Name      string                            `json:"name"`
	UID       string                            `json:"uid"`
	Status    v1alpha1.RemediationRequestStatus `json:"status"`
}

// Outcomes of a push, the result label of remedy_status_writes_total.
const (
	pushWritten = "written"
	pushStale   = "stale"
	pushGone    = "gone"
	// pushRefused: the caller is not the object's own run.
	pushRefused = "refused"
)

// statusRun accepts a status only from the object's own run: the workflow
// ID and run ID its status records, compared with the caller as Temporal's
// server names it, never with anything in the pushed status. A status pushed
// by another run (a run started under a closed run's workflow ID, a rogue
// workflow scheduling this activity) would otherwise set any phase, and the
// rollback a later write is checked against (Gate.verifyExecution). Before
// the operator records the run (it does right after the start), the push is
// retried.
func statusRun(callerID, callerRun, kind string, obj ctrlclient.Object, workflowID, runID string) error {
	ref := gate.SubjectRef{Namespace: obj.GetNamespace(), Name: obj.GetName(), UID: string(obj.GetUID())}
	if workflowID != "" && workflowID != callerID {
		return fail.Permanent(v1alpha1.ReasonSubjectMismatch, fmt.Errorf("%s %s/%s takes its status from workflow %s only, not %s", kind, ref.Namespace, ref.Name, workflowID, callerID))
	}
	return gate.CallerIsRun(callerRun, kind, ref, runID)
}

// PushExecutionStatus stores the workflow's status unless a newer one is
// stored already, then records one Event per phase entered. Only the
// execution's own run writes it (statusRun).
func (s *Statuses) PushExecutionStatus(ctx context.Context, in ExecutionStatusPush) error {
	var entered []phaseEntered
	caller := activity.GetInfo(ctx).WorkflowExecution
	obj, result, err := WriteStatus(ctx, s.Client, s.Seen, "KubernetesExecution", ctrlclient.ObjectKey{Namespace: in.Namespace, Name: in.Name}, in.UID,
		func(k *v1alpha1.KubernetesExecution) error {
			return statusRun(caller.ID, caller.RunID, "KubernetesExecution", k, k.Status.WorkflowID, k.Status.RunID)
		},
		func(k *v1alpha1.KubernetesExecution) bool {
			next, e, ok := mergeExecutionStatus(k.Status, in.Status, k.Generation, time.Now())
			next.Target = k.Spec.Target.KindName()
			k.Status, entered = next, e
			return ok
		})
	if err != nil || result != pushWritten {
		return err
	}
	for _, e := range entered {
		metrics.ExecutionPhases.WithLabelValues(in.Action, string(e.Phase), e.Reason).Inc()
		if e.prev != "" {
			metrics.PhaseDuration.WithLabelValues(in.Action, string(e.prev)).Observe(e.prevFor.Seconds())
		}
		s.event(ctx, obj, "KubernetesExecution", strconv.Itoa(e.index), e.Phase, e.Reason, e.Message)
	}
	return nil
}

// PushRemediationStatus stores the workflow's status unless a newer one is
// stored already, with an Event when the phase or reason changed. Only the
// request's own run writes it (statusRun).
func (s *Statuses) PushRemediationStatus(ctx context.Context, in RemediationStatusPush) error {
	changed := false
	caller := activity.GetInfo(ctx).WorkflowExecution
	obj, result, err := WriteStatus(ctx, s.Client, s.Seen, "RemediationRequest", ctrlclient.ObjectKey{Namespace: in.Namespace, Name: in.Name}, in.UID,
		func(r *v1alpha1.RemediationRequest) error {
			return statusRun(caller.ID, caller.RunID, "RemediationRequest", r, r.Status.WorkflowID, r.Status.RunID)
		},
		func(r *v1alpha1.RemediationRequest) bool {
			next, c, ok := mergeRemediationStatus(r.Status, in.Status, r.Generation, time.Now())
			next.Progress = v1alpha1.StepsProgress(next.Steps, len(r.Spec.Steps))
			r.Status, changed = next, c
			return ok
		})
	if err != nil || result != pushWritten || !changed {
		return err
	}
	st := in.Status
	s.event(ctx, obj, "RemediationRequest", strconv.FormatInt(st.Sequence, 10), st.Phase, st.Reason, st.Message)
	return nil
}

type phaseEntered struct {
	v1alpha1.PhaseTransition
	index   int
	prev    v1alpha1.Phase
	prevFor time.Duration
}

// mergeExecutionStatus lays the pushed status over the stored one. It refuses
// (ok false) a push whose sequence is not newer than the stored one: a retried
// or delayed writer never takes a run back to an older phase. It keeps the
// stored workflowID, runID and conditions, sets Ready from the phase, and lists the
// phases entered since the stored status.
func mergeExecutionStatus(cur, pushed v1alpha1.KubernetesExecutionStatus, generation int64, now time.Time) (next v1alpha1.KubernetesExecutionStatus, entered []phaseEntered, ok bool) {
	if pushed.Sequence <= cur.Sequence {
		return cur, nil, false
	}
	next = *pushed.DeepCopy()
	if cur.WorkflowID != "" {
		next.WorkflowID = cur.WorkflowID
	}
	next.RunID = cur.RunID
	next.ObservedGeneration = generation
	next.Conditions = cur.Conditions
	v1alpha1.SetReady(&next.Conditions, next.Phase, next.Reason, next.Message, generation, now)
	if n := len(cur.PhaseTransitions); n <= len(next.PhaseTransitions) {
		for i := n; i < len(next.PhaseTransitions); i++ {
			e := phaseEntered{PhaseTransition: next.PhaseTransitions[i], index: i}
			if i > 0 {
				prev := next.PhaseTransitions[i-1]
				e.prev, e.prevFor = prev.Phase, e.Time.Sub(prev.Time.Time)
			}
			entered = append(entered, e)
		}
	}
	return next, entered, true
}

// mergeRemediationStatus is mergeExecutionStatus for a RemediationRequest;
// changed says the phase or reason moved.
func mergeRemediationStatus(cur, pushed v1alpha1.RemediationRequestStatus, generation int64, now time.Time) (next v1alpha1.RemediationRequestStatus, changed, ok bool) {
	if pushed.Sequence <= cur.Sequence {
		return cur, false, false
	}
	next = *pushed.DeepCopy()
	if cur.WorkflowID != "" {
		next.WorkflowID = cur.WorkflowID
	}
	next.RunID = cur.RunID
	next.ObservedGeneration = generation
	next.Conditions = cur.Conditions
	v1alpha1.SetReady(&next.Conditions, next.Phase, next.Reason, next.Message, generation, now)
	return next, next.Phase != cur.Phase || next.Reason != cur.Reason, true
}

// WriteStatus reads the object afresh and updates its status subresource with
// the resourceVersion it read, retrying on conflict; merge returns false to
// write nothing. A deleted or replaced object (other UID) is not written;
// bound, when set, refuses a caller that may not write the object (its error
// is returned as is, so a permanent refusal stays permanent).
func WriteStatus[T any, PT interface {
	*T
	ctrlclient.Object
}](ctx context.Context, c ctrlclient.Client, seen *gate.Seen, kind string, key ctrlclient.ObjectKey, uid string, bound func(PT) error, merge func(PT) bool) (PT, string, error) {
	var obj PT
	var result string
	var refused error
	// A run's first push usually races the operator's write of its run ID
	// by milliseconds: an unrecorded run is read again in place, briefly,
	// before the push fails retryably.
	wait, deadline := 25*time.Millisecond, time.Now().Add(gate.RunRecordWait)
	for {
		var err error
		obj, result, refused, err = writeStatusOnce(ctx, c, seen, kind, key, uid, bound, merge)
		if err != nil {
			return nil, "", err
		}
		if !errors.Is(refused, gate.ErrRunNotRecorded) || time.Now().After(deadline) {
			break
		}
		select {
		case <-ctx.Done():
			return nil, "", fmt.Errorf("write %s %s status: %w", kind, key, ctx.Err())
		case <-time.After(wait):
		}
		wait = min(2*wait, time.Second)
	}
	metrics.StatusWrites.WithLabelValues(kind, result).Inc()
	if refused != nil {
		activity.GetLogger(ctx).Warn("status not written: the caller is not the object's own run", "kind", kind, "object", key.String(), "error", refused)
		return nil, result, refused
	}
	if result != pushWritten {
		activity.GetLogger(ctx).Info("status not written", "kind", kind, "object", key.String(), "result", result)
	}
	return obj, result, nil
}

// writeStatusOnce is one read-merge-update of writeStatus, retried on conflict.
//
// It starts from the copy the last push of the object wrote, or the last
// live read returned (Seen), without reading: the update carries the copy's
// resourceVersion, so the API server takes it only if nothing wrote the
// object since, and then the binding was checked and the status merged
// against the object as it is. Only a landed write is taken from the copy;
// a refusal, a stale push, a conflict or any error is redone from a live
// read, so nothing is decided on a stale copy.
func writeStatusOnce[T any, PT interface {
	*T
	ctrlclient.Object
}](ctx context.Context, c ctrlclient.Client, seen *gate.Seen, kind string, key ctrlclient.ObjectKey, uid string, bound func(PT) error, merge func(PT) bool) (obj PT, result string, refused, err error) {
	if obj = PT(new(T)); seen.Get(uid, obj) && string(obj.GetUID()) == uid && (bound == nil || bound(obj) == nil) && merge(obj) {
		err := c.Status().Update(ctx, obj)
		if err == nil {
			seen.Put(obj)
			return obj, pushWritten, nil, nil
		}
		if apierrors.IsConflict(err) {
			// Written since: the copy is old.
			seen.Forget(uid)
		}
	}
	err = retry.RetryOnConflict(retry.DefaultBackoff, func() error {
		result, refused = pushWritten, nil
		obj = PT(new(T))
		if err := c.Get(ctx, key, obj); err != nil {
			return err
		}
		if string(obj.GetUID()) != uid {
			result = pushGone
			return nil
		}
		if bound != nil {
			if refused = bound(obj); refused != nil {
				result = pushRefused
				return nil
			}
		}
		if !merge(obj) {
			result = pushStale
			return nil
		}
		err := c.Status().Update(ctx, obj)
		if apierrors.IsConflict(err) {
			metrics.StatusWrites.WithLabelValues(kind, "conflict").Inc()
		}
		if err == nil {
			seen.Put(obj)
		}
		return err
	})
	if apierrors.IsNotFound(err) {
		result, err = pushGone, nil
	}
	if err != nil {
		return nil, "", nil, fmt.Errorf("write %s %s status: %w", kind, key, err)
	}
	return obj, result, refused, nil
}

// event records a phase Event on obj, named after the object's UID and key so a
// retried push does not duplicate it. A lost Event does not fail the push: the
// status is written.
func (s *Statuses) event(ctx context.Context, obj ctrlclient.Object, kind, key string, phase v1alpha1.Phase, reason, message string) {
	typ := corev1.EventTypeNormal
	if phase == v1alpha1.PhaseFailed {
		typ = corev1.EventTypeWarning
	}
	note := reason
	if message != "" {
		note += ": " + message
	}
	sum := sha256.Sum256([]byte(string(obj.GetUID()) + "/" + key))
	ev := &eventsv1.Event{
		ObjectMeta:          metav1.ObjectMeta{Name: obj.GetName() + ".phase-" + hex.EncodeToString(sum[:])[:10], Namespace: obj.GetNamespace()},
		EventTime:           metav1.NewMicroTime(time.Now()),
		ReportingController: "remedy-worker",
		ReportingInstance:   "remedy-worker",
		Action:              "PushStatus",
		Reason:              string(phase),
		Type:                typ,
		Note:                fail.Truncate(note, 1024),
		Regarding: corev1.ObjectReference{APIVersion: v1alpha1.GroupVersion.String(), Kind: kind, Namespace: obj.GetNamespace(),
			Name: obj.GetName(), UID: obj.GetUID(), ResourceVersion: obj.GetResourceVersion()},
	}
	_, err := s.Kube.EventsV1().Events(obj.GetNamespace()).Create(ctx, ev, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		activity.GetLogger(ctx).Warn("phase event not recorded", "kind", kind, "object", obj.GetNamespace()+"/"+obj.GetName(), "phase", phase, "error", err)
	}
}
