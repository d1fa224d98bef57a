package operator

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/remedy-dev/remedy/api/v1alpha1"
)

// A reconcile of a stale object starts the same workflow again; the Started
// Event is still recorded once per run.
func TestStartedRecordedOnce(t *testing.T) {
	c := fake.NewClientBuilder().WithScheme(Scheme()).Build()
	ctx := context.Background()
	kexec := &v1alpha1.KubernetesExecution{ObjectMeta: metav1.ObjectMeta{Name: "scale-web", Namespace: "shop", UID: "u1"}}
	for range 2 {
		require.NoError(t, recordStarted(ctx, c, kexec, "KubernetesExecution", "workflow kexec/shop/scale-web/u1 started"))
	}
	other := &v1alpha1.KubernetesExecution{ObjectMeta: metav1.ObjectMeta{Name: "scale-web", Namespace: "shop", UID: "u2"}}
	require.NoError(t, recordStarted(ctx, c, other, "KubernetesExecution", "workflow kexec/shop/scale-web/u2 started"))

	var list eventsv1.EventList
	require.NoError(t, c.List(ctx, &list))
	require.Len(t, list.Items, 2, "one Started per run, a new run of the same name gets its own")
	uids := []string{}
	for _, e := range list.Items {
		assert.Equal(t, reasonStarted, e.Reason)
		uids = append(uids, string(e.Regarding.UID))
	}
	assert.ElementsMatch(t, []string{"u1", "u2"}, uids)
}
