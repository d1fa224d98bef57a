package status

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"time"

	"go.temporal.io/sdk/activity"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/remedy-dev/remedy/activities/fail"
)

// Note is one Event the worker records about an object, of any type and
// reason (the phase Events of RecordEvent are named after a phase).
type Note struct {
	Regarding corev1.ObjectReference
	// Key names the Event with the object's UID, so a retry records it once.
	Key                        string
	Type, Action, Reason, Text string
}

// RecordNote creates n in its object's namespace; a lost Event is logged,
// not failed: what it reports is already in a status. A function, not a
// method, so that it registers no activity of Statuses.
func RecordNote(ctx context.Context, s *Statuses, n Note) {
	if s == nil || s.Kube == nil {
		return
	}
	ref := n.Regarding
	sum := sha256.Sum256([]byte(string(ref.UID) + "/" + n.Key))
	ev := &eventsv1.Event{
		ObjectMeta:          metav1.ObjectMeta{Name: ref.Name + ".note-" + hex.EncodeToString(sum[:])[:10], Namespace: ref.Namespace},
		EventTime:           metav1.NewMicroTime(time.Now()),
		ReportingController: "remedy-worker",
		ReportingInstance:   "remedy-worker",
		Action:              n.Action,
		Reason:              n.Reason,
		Type:                n.Type,
		Note:                fail.Truncate(n.Text, 1024),
		Regarding:           ref,
	}
	if _, err := s.Kube.EventsV1().Events(ref.Namespace).Create(ctx, ev, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		activity.GetLogger(ctx).Warn("event not recorded", "kind", ref.Kind, "object", ref.Namespace+"/"+ref.Name, "reason", n.Reason, "error", err)
	}
}
