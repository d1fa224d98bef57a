package drift

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	ctrlclient "sigs.k8s.io/controller-runtime/pkg/client"

	kv1 "github.com/remedy-dev/remedy/api/kausality/v1alpha1"
	"github.com/remedy-dev/remedy/api/v1alpha1"
	"github.com/remedy-dev/remedy/test/harness"
)

// A denied revert shows on the parent as a DriftDenied Warning Event, where
// kubectl describe finds it; the controller's retries within the minute add
// no second one.
func TestDriftDeniedEventOncePerParentPerMinute(t *testing.T) {
	f := newNamedFamily(t, kv1.ModeEnforce, "denied")
	denied := decisions("drift-denied")
	_, err := f.scale(t, 2)
	require.NoError(t, err)
	require.Eventually(t, func() bool { return decisions("drift-denied") >= denied+3 }, driftTimeout, 50*time.Millisecond,
		"the Deployment controller retries its denied revert")
	events := func() []corev1.Event {
		var list corev1.EventList
		require.NoError(t, harness.Kube().List(context.Background(), &list, ctrlclient.InNamespace(f.ns)))
		var out []corev1.Event
		for _, e := range list.Items {
			if e.Reason == v1alpha1.ReasonDriftDenied {
				out = append(out, e)
			}
		}
		return out
	}
	require.Eventually(t, func() bool { return len(events()) > 0 }, driftTimeout, 100*time.Millisecond, "no DriftDenied Event")
	// The controller retried, denied twice more after the Event was written.
	after := decisions("drift-denied")
	require.Eventually(t, func() bool { return decisions("drift-denied") >= after+2 }, driftTimeout, 50*time.Millisecond,
		"the Deployment controller retries its denied revert")
	require.Len(t, events(), 1, "more than one DriftDenied Event within the minute")
	e := events()[0]
	assert.LessOrEqual(t, e.Count, int32(1), "the DriftDenied Event was repeated within the minute")
	assert.Equal(t, corev1.EventTypeWarning, e.Type)
	assert.Equal(t, f.dep.UID, e.InvolvedObject.UID, "on the parent")
	assert.Equal(t, "Deployment", e.InvolvedObject.Kind)
	assert.Contains(t, e.Message, "ReplicaSet "+f.rs.Name)
	assert.Contains(t, e.Message, "deployment-controller")
	assert.Greater(t, decisions("drift-denied"), denied+2, "several denials, one Event")
}
