package integration

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/client"
	sdkworker "go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"
	ctrlclient "sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/remedy-dev/remedy/api/v1alpha1"
	"github.com/remedy-dev/remedy/test/harness"
)

// concurrentN is how many runs the throughput benchmarks start at once.
const concurrentN = 200

func bareNoop(context.Context) error { return nil }

func bareWorkflow(ctx workflow.Context) error {
	ctx = workflow.WithActivityOptions(ctx, workflow.ActivityOptions{StartToCloseTimeout: 10 * time.Second})
	return workflow.ExecuteActivity(ctx, bareNoop).Get(ctx, nil)
}

// BenchmarkBaselineBareWorkflows is the throughput floor of the same Temporal
// server: concurrentN workflows with one no-op activity each, started at once,
// until all completed (metric runs/s).
func BenchmarkBaselineBareWorkflows(b *testing.B) {
	ctx := context.Background()
	queue := "bench-bare"
	w := sdkworker.New(harness.Temporal(), queue, sdkworker.Options{})
	w.RegisterWorkflow(bareWorkflow)
	w.RegisterActivity(bareNoop)
	require.NoError(b, w.Start())
	defer w.Stop()
	prefix := harness.Namespace(b)
	var total time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		start := time.Now()
		runs := make([]client.WorkflowRun, concurrentN)
		for j := range runs {
			r, err := harness.Temporal().ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: fmt.Sprintf("%s-%d-%d", prefix, i, j), TaskQueue: queue}, bareWorkflow)
			require.NoError(b, err)
			runs[j] = r
		}
		for _, r := range runs {
			require.NoError(b, r.Get(ctx, nil))
		}
		total += time.Since(start)
	}
	b.ReportMetric(float64(concurrentN*b.N)/total.Seconds(), "runs/s")
}

// BenchmarkConcurrentExecutions creates concurrentN scale executions at once
// (no rollback window) and waits until all read Completed: runs/s, and the
// p95 of create -> Completed.
func BenchmarkConcurrentExecutions(b *testing.B) {
	ctx := context.Background()
	var total time.Duration
	var latencies []time.Duration
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		ns := harness.Namespace(b)
		// One target each: runs on a shared target only contend on its resourceVersion.
		for t := range concurrentN {
			harness.Deployment(b, ns, fmt.Sprintf("web-%d", t), 1)
		}
		b.StartTimer()
		start := time.Now()
		created := make([]time.Time, concurrentN)
		var wg sync.WaitGroup
		for j := range concurrentN {
			wg.Add(1)
			go func() {
				defer wg.Done()
				created[j] = time.Now()
				require.NoError(b, harness.Kube().Create(ctx, manyScale(ns, j, concurrentN)))
			}()
		}
		wg.Wait()
		done := map[string]bool{}
		for len(done) < concurrentN {
			var list v1alpha1.KubernetesExecutionList
			require.NoError(b, harness.Kube().List(ctx, &list, ctrlclient.InNamespace(ns)))
			for _, k := range list.Items {
				if k.Status.Phase.Terminal() && !done[k.Name] {
					require.Equal(b, v1alpha1.PhaseCompleted, k.Status.Phase, k.Status.Message)
					done[k.Name] = true
					var j int
					_, _ = fmt.Sscanf(k.Name, "scale-%d", &j)
					// Seen by a 50 ms poll: transition times have only second precision.
					latencies = append(latencies, time.Since(created[j]))
				}
			}
			time.Sleep(50 * time.Millisecond)
		}
		total += time.Since(start)
	}
	sort.Slice(latencies, func(i, j int) bool { return latencies[i] < latencies[j] })
	b.ReportMetric(float64(concurrentN*b.N)/total.Seconds(), "runs/s")
	b.ReportMetric(float64(latencies[len(latencies)*95/100].Milliseconds()), "p95-ms")
}
