package integration

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.temporal.io/api/workflowservice/v1"
	"k8s.io/utils/ptr"
	ctrlclient "sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/remedy-dev/remedy/api/v1alpha1"
	"github.com/remedy-dev/remedy/test/harness"
)

// Idle CPU: how many runs wait in RollbackReady, over how long a window.
const (
	idleRuns    = 1000
	idleTargets = 100
	idleWindow  = 20 * time.Second
)

// BenchmarkIdleCPUOpenRuns measures the CPU of operator + worker (this
// process) + Temporal over idleWindow with no run open, then with idleRuns
// executions waiting out an hour's rollback window, and reports both and
// their ratio (x-none). The API server's CPU is reported alongside.
func BenchmarkIdleCPUOpenRuns(b *testing.B) {
	ctx := context.Background()
	var none, open, apiNone, apiOpen time.Duration
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		ns := harness.Namespace(b)
		for t := range idleTargets {
			harness.Deployment(b, ns, fmt.Sprintf("web-%d", t), 1)
		}
		// Settle the setup's own work before the first window.
		time.Sleep(5 * time.Second) // paces the measurement; asserts nothing
		b.StartTimer()
		n, a := idleCPU()
		none, apiNone = none+n, apiNone+a

		b.StopTimer()
		openRuns(b, ns)
		time.Sleep(5 * time.Second) // the runs' start settles: paces the measurement; asserts nothing
		b.StartTimer()
		o, a := idleCPU()
		open, apiOpen = open+o, apiOpen+a
		b.StopTimer()
		// Deleting cancels the runs; waiting until the objects and their
		// workflows are gone lets later benchmarks start from none, not behind
		// a thousand cancellations.
		require.NoError(b, harness.Kube().DeleteAllOf(ctx, &v1alpha1.KubernetesExecution{}, ctrlclient.InNamespace(ns)))
		require.Eventually(b, func() bool {
			var left v1alpha1.KubernetesExecutionList
			return harness.Kube().List(ctx, &left, ctrlclient.InNamespace(ns)) == nil && len(left.Items) == 0
		}, 10*time.Minute, time.Second, "the deleted runs were not finalized")
		require.Eventually(b, func() bool {
			resp, err := harness.Temporal().ListWorkflow(ctx, &workflowservice.ListWorkflowExecutionsRequest{Query: "ExecutionStatus = 'Running'", PageSize: 1})
			return err == nil && len(resp.GetExecutions()) == 0
		}, 10*time.Minute, time.Second, "the canceled runs did not end")
	}
	per := func(d time.Duration) float64 { return d.Seconds() / idleWindow.Seconds() / float64(b.N) }
	b.ReportMetric(per(none), "cpu-none")
	b.ReportMetric(per(open), "cpu-open")
	b.ReportMetric(per(open)/per(none), "x-none")
	b.ReportMetric(per(apiNone), "apiserver-cpu-none")
	b.ReportMetric(per(apiOpen), "apiserver-cpu-open")
}

// idleCPU waits idleWindow and returns the CPU that operator + worker +
// Temporal, and the API server, used in it.
func idleCPU() (remedy, apiserver time.Duration) {
	before := partsCPU()
	time.Sleep(idleWindow) // the measurement window itself; asserts nothing
	used := cpuSince(before)
	return used["remedy"] + used["temporal"], used["kube-apiserver"]
}

// openRuns creates idleRuns scale executions with an hour's rollback window
// and waits until every one reads RollbackReady. It creates them in batches,
// each once the last is ready, so no run waits behind a queue of hundreds:
// the figure is what open runs cost, not how fast they open.
func openRuns(b *testing.B, ns string) {
	const batch = 100
	for from := 0; from < idleRuns; from += batch {
		var wg sync.WaitGroup
		for j := from; j < from+batch; j++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				k := manyScale(ns, j, idleTargets)
				k.Spec.Parameters.Replicas = ptr.To(int32(j%3 + 2))
				k.Spec.RollbackWindow = v1alpha1.DurationOf(time.Hour)
				assert.NoError(b, harness.Kube().Create(context.Background(), k))
			}()
		}
		wg.Wait()
		waitReady(b, ns, from+batch)
	}
}

// waitReady waits until n runs in ns read RollbackReady, and fails on any that failed.
func waitReady(b *testing.B, ns string, n int) {
	var list v1alpha1.KubernetesExecutionList
	var failed []string
	require.Eventually(b, func() bool {
		if err := harness.Kube().List(context.Background(), &list, ctrlclient.InNamespace(ns)); err != nil {
			return false
		}
		ready := 0
		for _, k := range list.Items {
			if k.Status.Phase == v1alpha1.PhaseFailed {
				failed = append(failed, k.Name+": "+k.Status.Message)
			}
			if k.Status.Phase == v1alpha1.PhaseRollbackReady {
				ready++
			}
		}
		return ready == n || len(failed) > 0
	}, 10*time.Minute, time.Second, "%d runs did not reach RollbackReady", n)
	require.Empty(b, failed)
}
