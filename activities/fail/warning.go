package fail

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// Warning is a Warning Event the worker records on an object it does not
// act on for a run: a broken policy ConfigMap, a workflow's object that got
// a signal nobody reads.
type Warning struct {
	Regarding corev1.ObjectReference
	// Key names the Event with the object, so the same report, from a
	// retry or another replica, is recorded once.
	Key, Action, Reason, Note string
}

// RecordWarning creates w as the worker; a repeated report is not an error.
func RecordWarning(ctx context.Context, kube kubernetes.Interface, w Warning) error {
	sum := sha256.Sum256([]byte(w.Key))
	ns := w.Regarding.Namespace
	if ns == "" {
		// A cluster-scoped object's Events live in default, as kubectl looks for them.
		ns = metav1.NamespaceDefault
	}
	ev := &eventsv1.Event{
		ObjectMeta:          metav1.ObjectMeta{Name: w.Regarding.Name + "." + hex.EncodeToString(sum[:])[:16], Namespace: ns},
		EventTime:           metav1.NewMicroTime(time.Now()),
		ReportingController: "remedy-worker",
		ReportingInstance:   "remedy-worker",
		Action:              w.Action,
		Reason:              w.Reason,
		Type:                corev1.EventTypeWarning,
		Note:                Truncate(w.Note, 1024),
		Regarding:           w.Regarding,
	}
	if _, err := kube.EventsV1().Events(ns).Create(ctx, ev, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("create event: %w", err)
	}
	return nil
}
