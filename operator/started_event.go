package operator

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
	ctrlclient "sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/remedy-dev/remedy/api/v1alpha1"
)

// reasonStarted is the Event of a run whose workflow the operator started.
const reasonStarted = "Started"

// recordStarted records the Started Event under a name derived from the
// object's UID, so it is recorded once per run: a reconcile that read a stale
// object (status.workflowID not yet in the cache) starts the same workflow
// again, harmlessly, and used to record Started a second time.
func recordStarted(ctx context.Context, c ctrlclient.Client, obj ctrlclient.Object, kind, note string) error {
	ev := &eventsv1.Event{
		ObjectMeta:          metav1.ObjectMeta{Name: obj.GetName() + ".started-" + uidHash(obj), Namespace: obj.GetNamespace()},
		EventTime:           metav1.NewMicroTime(time.Now()),
		ReportingController: "remedy-operator",
		ReportingInstance:   "remedy-operator",
		Action:              "Reconcile",
		Reason:              reasonStarted,
		Type:                corev1.EventTypeNormal,
		Note:                note,
		Regarding: corev1.ObjectReference{APIVersion: v1alpha1.GroupVersion.String(), Kind: kind, Namespace: obj.GetNamespace(),
			Name: obj.GetName(), UID: obj.GetUID()},
	}
	if err := c.Create(ctx, ev); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("record Started event: %w", err)
	}
	return nil
}

// uidHash keeps the Event's name short whatever the object's name.
func uidHash(obj ctrlclient.Object) string {
	sum := sha256.Sum256([]byte(obj.GetUID()))
	return hex.EncodeToString(sum[:])[:10]
}
