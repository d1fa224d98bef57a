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
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	ctrlclient "sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/remedy-dev/remedy/api/v1alpha1"
	"github.com/remedy-dev/remedy/operator"
	"github.com/remedy-dev/remedy/test/harness"
)

func bareNoop(context.Context) error { return nil }

func bareWorkflow(ctx workflow.Context) error {
	ctx = workflow.WithActivityOptions(ctx, workflow.ActivityOptions{StartToCloseTimeout: 10 * time.Second})
	return workflow.ExecuteActivity(ctx, bareNoop).Get(ctx, nil)
}

// bareThroughput is the floor of the same Temporal server: n workflows with
// one no-op activity each, started at once, until all completed, in runs/s,
// and the ID of the first.
func bareThroughput(b *testing.B, n int) (float64, string) {
	ctx := context.Background()
	queue := "bench-bare"
	w := sdkworker.New(harness.Temporal(), queue, sdkworker.Options{})
	w.RegisterWorkflow(bareWorkflow)
	w.RegisterActivity(bareNoop)
	require.NoError(b, w.Start())
	defer w.Stop()
	prefix := harness.Namespace(b)
	start := time.Now()
	runs := make([]client.WorkflowRun, n)
	for j := range runs {
		r, err := harness.Temporal().ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: fmt.Sprintf("%s-%d", prefix, j), TaskQueue: queue}, bareWorkflow)
		require.NoError(b, err)
		runs[j] = r
	}
	for _, r := range runs {
		require.NoError(b, r.Get(ctx, nil))
	}
	return float64(n) / time.Since(start).Seconds(), runs[0].GetID()
}

// BenchmarkConcurrentExecutions creates N scale executions at once (no
// rollback window, one target each) and waits until all read Completed:
// runs/s, and the p50 and p95 of create -> Completed. At N=200 it also runs
// 200 bare workflows on the same server just before, and reports the ratio
// (x-bare), with the CPU seconds each part spent on the executions.
func BenchmarkConcurrentExecutions(b *testing.B) {
	for _, n := range []int{10, 100, 200} {
		b.Run(fmt.Sprintf("N=%d", n), func(b *testing.B) {
			var bare, rate float64
			var latencies []time.Duration
			var cpu map[string]time.Duration
			for i := 0; i < b.N; i++ {
				b.StopTimer()
				if n == 200 {
					rate, _ := bareThroughput(b, n)
					bare += rate
				}
				ns := harness.Namespace(b)
				for t := range n {
					harness.Deployment(b, ns, fmt.Sprintf("web-%d", t), 1)
				}
				before := partsCPU()
				b.StartTimer()
				took, lat := executionsAtOnce(b, ns, n)
				b.StopTimer()
				cpu = cpuSince(before)
				rate += float64(n) / took.Seconds()
				latencies = append(latencies, lat...)
			}
			b.ReportMetric(rate/float64(b.N), "runs/s")
			report(b, latencies, "ms")
			if n == 200 {
				b.ReportMetric(bare/float64(b.N), "bare-runs/s")
				b.ReportMetric(rate/bare, "x-bare")
				for _, part := range []string{"remedy", "temporal", "kube-apiserver", "etcd"} {
					b.ReportMetric(cpu[part].Seconds(), "cpu-s-"+part)
				}
			}
		})
	}
}

// executionsAtOnce creates n scale executions at once in ns and returns when
// every one has been seen Completed, with each one's create -> Completed.
func executionsAtOnce(b *testing.B, ns string, n int) (time.Duration, []time.Duration) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	start := time.Now()
	created := make([]time.Time, n)
	var wg sync.WaitGroup
	for j := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			created[j] = time.Now()
			require.NoError(b, harness.Kube().Create(ctx, manyScale(ns, j, n)))
		}()
	}
	done := map[string]time.Time{}
	deadline := time.Now().Add(10 * time.Minute)
	for len(done) < n {
		require.True(b, time.Now().Before(deadline), "%d of %d executions completed in 10 minutes", len(done), n)
		watchCompleted(ctx, b, ns, done, n)
	}
	took := time.Since(start)
	wg.Wait()
	latencies := make([]time.Duration, 0, n)
	for name, at := range done {
		var j int
		_, _ = fmt.Sscanf(name, "scale-%d", &j)
		latencies = append(latencies, at.Sub(created[j]))
	}
	sort.Slice(latencies, func(i, j int) bool { return latencies[i] < latencies[j] })
	return took, latencies
}

// watchCompleted records in done when each execution in ns is first seen
// Completed: one list, then a watch from it until all n are done or the
// API server closes the watch (it does under load; the caller watches again).
// A watch, not a poll: listing n full objects every few milliseconds was most
// of the test process's CPU and loaded the API server.
func watchCompleted(ctx context.Context, b *testing.B, ns string, done map[string]time.Time, n int) {
	seen := func(k *v1alpha1.KubernetesExecution) {
		if !k.Status.Phase.Terminal() {
			return
		}
		require.Equal(b, v1alpha1.PhaseCompleted, k.Status.Phase, k.Status.Message)
		if _, ok := done[k.Name]; !ok {
			done[k.Name] = time.Now()
		}
	}
	wc, err := ctrlclient.NewWithWatch(harness.Config(), ctrlclient.Options{Scheme: operator.Scheme()})
	require.NoError(b, err)
	var list v1alpha1.KubernetesExecutionList
	require.NoError(b, wc.List(ctx, &list, ctrlclient.InNamespace(ns)))
	for i := range list.Items {
		seen(&list.Items[i])
	}
	w, err := wc.Watch(ctx, &v1alpha1.KubernetesExecutionList{},
		ctrlclient.InNamespace(ns), &ctrlclient.ListOptions{Raw: &metav1.ListOptions{ResourceVersion: list.ResourceVersion}})
	require.NoError(b, err)
	defer w.Stop()
	for len(done) < n {
		ev, ok := <-w.ResultChan()
		if !ok {
			return
		}
		if k, isExec := ev.Object.(*v1alpha1.KubernetesExecution); isExec && ev.Type != watch.Deleted {
			seen(k)
		}
	}
}
