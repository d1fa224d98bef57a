package webhook

import (
	"context"
	"fmt"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/tools/record"

	"github.com/remedy-dev/remedy/api/v1alpha1"
)

// A denial is recorded on the parent as a Warning Event, where kubectl
// describe shows it.
// +kubebuilder:rbac:groups="",resources=events,verbs=create;patch

// DefaultDeniedEventWindow: at most one DriftDenied Event per parent per
// window, however often its controller retries the denied change.
const DefaultDeniedEventWindow = time.Minute

// DeniedEvents records DriftDenied Events in the background: Record never
// blocks admission (the broadcaster drops an Event when its queue is full)
// and records one per parent per window.
type DeniedEvents struct {
	recorder record.EventRecorder
	window   time.Duration
	now      func() time.Time

	mu   sync.Mutex
	last map[types.UID]time.Time
}

// NewDeniedEvents sends Events through kube until ctx ends.
func NewDeniedEvents(ctx context.Context, kube kubernetes.Interface, window time.Duration) *DeniedEvents {
	b := record.NewBroadcaster(record.WithContext(ctx))
	b.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: kube.CoreV1().Events("")})
	go func() { <-ctx.Done(); b.Shutdown() }()
	return newDeniedEvents(b.NewRecorder(scheme.Scheme, corev1.EventSource{Component: "remedy-drift-webhook"}), window, time.Now)
}

func newDeniedEvents(r record.EventRecorder, window time.Duration, now func() time.Time) *DeniedEvents {
	return &DeniedEvents{recorder: r, window: window, now: now, last: map[types.UID]time.Time{}}
}

// Record records a DriftDenied Event on parent unless one was recorded for
// it within the window; it reports whether it did.
func (e *DeniedEvents) Record(parent, child *unstructured.Unstructured, operation, user, reason string) bool {
	if e == nil || parent == nil {
		return false
	}
	now := e.now()
	e.mu.Lock()
	for uid, at := range e.last {
		if now.Sub(at) >= e.window {
			delete(e.last, uid)
		}
	}
	if _, recent := e.last[parent.GetUID()]; recent {
		e.mu.Unlock()
		return false
	}
	e.last[parent.GetUID()] = now
	e.mu.Unlock()
	e.recorder.Event(parent, corev1.EventTypeWarning, v1alpha1.ReasonDriftDenied,
		fmt.Sprintf("denied %s's %s of %s %s: %s", user, operation, child.GetKind(), child.GetName(), reason))
	return true
}
