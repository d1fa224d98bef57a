package durability

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	eventsv1 "k8s.io/api/events/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrlclient "sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/remedy-dev/remedy/api/v1alpha1"
	"github.com/remedy-dev/remedy/internal/metrics"
	"github.com/remedy-dev/remedy/test/harness"
)

// With --max-open-runs-per-namespace=1, a second execution in a namespace
// whose first waits for approval is not started: it stays Pending with reason
// OpenRunsLimited, one Warning Event and one count of the metric, however
// often it looks again. Another namespace is not held, and a run offering its
// rollback does not count. Once the first run is gone, the second starts.
func TestOpenRunsCapHoldsAStartUntilARunEnds(t *testing.T) {
	ctx := context.Background()
	o := harness.RemedyOptions()
	o.MaxOpenRunsPerNamespace = 1
	harness.StartOperatorWith(t, o)
	runWorker(t, nil)
	ns, other := harness.Namespace(t), harness.Namespace(t)
	harness.Deployment(t, ns, "web", 1)
	harness.Deployment(t, other, "web", 1)

	approved := scaleSpec(ns, "web", 2)
	approved.Approval = &v1alpha1.ApprovalSpec{Required: true}
	first := waitPhase(t, createExecution(t, ns, "first", approved), v1alpha1.PhaseWaitingApproval, time.Minute)
	requirePhase(t, first, v1alpha1.PhaseWaitingApproval)

	second := createExecution(t, ns, "second", scaleSpec(ns, "web", 3))
	second = harness.Eventually(t, second, time.Minute, func(k *v1alpha1.KubernetesExecution) bool {
		return k.Status.Reason == v1alpha1.ReasonOpenRunsLimited
	})
	assert.Equal(t, v1alpha1.PhasePending, second.Status.Phase)
	assert.Empty(t, second.Status.WorkflowID, "not started")
	assert.Contains(t, second.Status.Message, "namespace "+ns+" has reached the operator's limit of 1 open runs (--max-open-runs-per-namespace)")

	// Not held elsewhere; and RollbackReady there leaves that namespace's slot free.
	elsewhere := waitPhase(t, createExecution(t, other, "elsewhere", scaleSpec(other, "web", 2)), v1alpha1.PhaseRollbackReady, time.Minute)
	requirePhase(t, elsewhere, v1alpha1.PhaseRollbackReady)
	next := waitPhase(t, createExecution(t, other, "next", scaleSpec(other, "web", 3)), v1alpha1.PhaseRollbackReady, time.Minute)
	requirePhase(t, next, v1alpha1.PhaseRollbackReady)

	// Still held after several looks, counted and announced once. Each touch
	// is a look; a third run, held after them, shows they have been taken.
	for i := range 3 {
		touch := ctrlclient.RawPatch(types.MergePatchType, fmt.Appendf(nil, `{"metadata":{"annotations":{"test/look":"%d"}}}`, i))
		require.NoError(t, harness.Kube().Patch(ctx, second.DeepCopy(), touch))
	}
	harness.Deployment(t, ns, "api", 1)
	harness.Eventually(t, createExecution(t, ns, "third", scaleSpec(ns, "api", 2)), time.Minute, func(k *v1alpha1.KubernetesExecution) bool {
		return k.Status.Reason == v1alpha1.ReasonOpenRunsLimited
	})
	require.NoError(t, harness.Kube().Get(ctx, ctrlclient.ObjectKeyFromObject(second), second))
	assert.Equal(t, v1alpha1.ReasonOpenRunsLimited, second.Status.Reason)
	assert.Empty(t, second.Status.WorkflowID)
	assert.Equal(t, 2.0, testutil.ToFloat64(metrics.OpenRunsLimited.WithLabelValues(ns)), "one count for each held run, none for a look again")
	assert.Equal(t, 0.0, testutil.ToFloat64(metrics.OpenRunsLimited.WithLabelValues(other)))
	var evs eventsv1.EventList
	require.NoError(t, harness.Kube().List(ctx, &evs, ctrlclient.InNamespace(ns)))
	held := 0
	for _, e := range evs.Items {
		if e.Regarding.Name == "second" && e.Reason == v1alpha1.ReasonOpenRunsLimited {
			held++
			assert.Equal(t, "Warning", e.Type)
		}
	}
	assert.Equal(t, 1, held, "one Event for the wait")

	// The first run goes: the second starts and scales.
	require.NoError(t, harness.Kube().Delete(ctx, first))
	second = waitPhase(t, second, v1alpha1.PhaseRollbackReady, time.Minute)
	requirePhase(t, second, v1alpha1.PhaseRollbackReady)
	assert.Equal(t, int32(3), *deployment(t, ns, "web").Spec.Replicas)
}
