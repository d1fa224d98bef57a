package durability

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	commonpb "go.temporal.io/api/common/v1"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/proxy"

	"github.com/remedy-dev/remedy/api/v1alpha1"
	"github.com/remedy-dev/remedy/internal/seal"
	"github.com/remedy-dev/remedy/test/harness"
)

// Keys rotate with a run in flight: a run waits for approval under the first
// key; the operator and the worker restart with a new active key and the old
// one kept; the approval, sealed under the new key, completes the run, whose
// history holds payloads sealed under both.
func TestKeyRotationWithARunInFlight(t *testing.T) {
	stopOperator := harness.StartOperator(t)
	stopWorker := runWorker(t, nil)
	ns := harness.Namespace(t)
	harness.Deployment(t, ns, "web", 2)
	k := awaitApproval(t, ns, "scale-rotated", 4)
	first := harness.Keys().Active()
	stopWorker()
	stopOperator()

	harness.RotateKeys(t, "rotated-2")
	require.Equal(t, "rotated-2", harness.Keys().Active())
	harness.StartOperator(t)
	runWorker(t, nil)
	approve(t, k)
	k = waitPhase(t, k, v1alpha1.PhaseRollbackReady, time.Minute)
	requirePhase(t, k, v1alpha1.PhaseRollbackReady)
	assert.Equal(t, int32(4), *deployment(t, ns, "web").Spec.Replicas)

	keys := map[string]int{}
	ctx := context.Background()
	it := harness.Temporal().GetWorkflowHistory(ctx, k.Status.WorkflowID, "", false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	for it.HasNext() {
		e, err := it.Next()
		require.NoError(t, err)
		require.NoError(t, proxy.VisitPayloads(ctx, e, proxy.VisitPayloadsOptions{SkipSearchAttributes: true,
			Visitor: func(_ *proxy.VisitPayloadsContext, ps []*commonpb.Payload) ([]*commonpb.Payload, error) {
				for _, p := range ps {
					id, _ := seal.SealedWith(p)
					keys[id]++
				}
				return ps, nil
			}}))
	}
	assert.Positive(t, keys[first], "payloads sealed before the rotation: %v", keys)
	assert.Positive(t, keys["rotated-2"], "payloads sealed after it: %v", keys)
	assert.Zero(t, keys[""], "nothing unsealed: %v", keys)
}
