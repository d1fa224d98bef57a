package integration

import (
	"bytes"
	"context"
	"fmt"
	"path/filepath"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	ctrlclient "sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/remedy-dev/remedy/api/v1alpha1"
	"github.com/remedy-dev/remedy/internal/plugin"
	"github.com/remedy-dev/remedy/test/harness"
	"github.com/remedy-dev/remedy/workflows"
)

// minApprovals is the smallest sample the percentiles are taken over.
const minApprovals = 50

// waitingExecutions creates n executions that need approval, in parallel,
// and returns them once every one has created its approval request.
func waitingExecutions(b *testing.B, ns, prefix string, n int, timeout time.Duration) []*v1alpha1.KubernetesExecution {
	b.Helper()
	ks := make([]*v1alpha1.KubernetesExecution, n)
	var wg sync.WaitGroup
	for i := range ks {
		ks[i] = &v1alpha1.KubernetesExecution{
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("%s-%d", prefix, i), Namespace: ns},
			Spec: v1alpha1.KubernetesExecutionSpec{
				Action: "scale", Target: target(ns, "web"), Parameters: &v1alpha1.ActionParameters{Replicas: ptr.To(int32(i%5 + 2))},
				Approval:       &v1alpha1.ApprovalSpec{Required: true, Timeout: v1alpha1.DurationOf(timeout)},
				RollbackWindow: v1alpha1.DurationOf(0),
			},
		}
		require.NoError(b, harness.Kube().Create(context.Background(), ks[i]))
	}
	for _, k := range ks {
		wg.Add(1)
		go func() {
			defer wg.Done()
			harness.Eventually(b, k, time.Minute, func(k *v1alpha1.KubernetesExecution) bool { return k.Status.ApprovalRequestRef != nil })
		}()
	}
	wg.Wait()
	return ks
}

// leftWaiting measures from start until the workflow's status query, then
// .status.phase, no longer reads WaitingApproval.
func leftWaiting(b *testing.B, k *v1alpha1.KubernetesExecution, start time.Time) (toWorkflow, toStatus time.Duration) {
	ctx := context.Background()
	for {
		v, err := harness.Temporal().QueryWorkflow(ctx, k.Status.WorkflowID, "", workflows.QueryStatus)
		require.NoError(b, err)
		var s v1alpha1.KubernetesExecutionStatus
		require.NoError(b, v.Get(&s))
		if s.Phase != v1alpha1.PhaseWaitingApproval {
			toWorkflow = time.Since(start)
			break
		}
	}
	for k.Status.Phase == v1alpha1.PhaseWaitingApproval {
		time.Sleep(2 * time.Millisecond) // polls at the resolution the benchmark times; asserts nothing negative
		require.NoError(b, harness.Kube().Get(ctx, ctrlclient.ObjectKeyFromObject(k), k))
	}
	return toWorkflow, time.Since(start)
}

func report(b *testing.B, samples []time.Duration, unit string) {
	sort.Slice(samples, func(i, j int) bool { return samples[i] < samples[j] })
	at := func(q float64) float64 { return float64(samples[int(q*float64(len(samples)-1))].Microseconds()) / 1000 }
	b.ReportMetric(at(0.50), "p50-"+unit)
	b.ReportMetric(at(0.95), "p95-"+unit)
}

// benchmarkApproval approves b.N, but at least minSamples, waiting
// executions one by one with decide (the b.N=1 probe run takes one sample).
func benchmarkApproval(b *testing.B, minSamples int, decide func(k *v1alpha1.KubernetesExecution)) {
	ns := harness.Namespace(b)
	harness.Deployment(b, ns, "web", 1)
	n := b.N
	if n > 1 {
		n = max(n, minSamples)
	}
	ks := waitingExecutions(b, ns, "approve", n, time.Hour)
	var toWorkflow, toStatus []time.Duration
	b.ResetTimer()
	for _, k := range ks {
		start := time.Now()
		decide(k)
		w, s := leftWaiting(b, k, start)
		toWorkflow, toStatus = append(toWorkflow, w), append(toStatus, s)
	}
	b.StopTimer()
	report(b, toWorkflow, "ms-to-workflow")
	report(b, toStatus, "ms-to-status")
}

// BenchmarkApprovalLatencySignal: from the approve signal until the workflow,
// then .status.phase, leaves WaitingApproval (target: p95 to workflow < 100 ms).
func BenchmarkApprovalLatencySignal(b *testing.B) {
	benchmarkApproval(b, minApprovals, func(k *v1alpha1.KubernetesExecution) {
		require.NoError(b, harness.Temporal().SignalWorkflow(context.Background(), k.Status.WorkflowID, "", workflows.SignalApprove,
			workflows.ApprovalSignal{Approver: "bench"}))
	})
}

// BenchmarkApprovalLatencyKubectl: the same from `kubectl patch rar
// --subresource=status`, through the webhook, the operator's relay and the signal.
func BenchmarkApprovalLatencyKubectl(b *testing.B) {
	benchmarkApproval(b, minApprovals, func(k *v1alpha1.KubernetesExecution) {
		rar := &v1alpha1.RemediationApprovalRequest{ObjectMeta: metav1.ObjectMeta{Namespace: k.Namespace, Name: k.Status.ApprovalRequestRef.Name}}
		require.NoError(b, harness.Kube().Status().Patch(context.Background(), rar,
			ctrlclient.RawPatch(types.MergePatchType, []byte(`{"status":{"decision":"Approved","decisionMessage":"bench"}}`))))
	})
}

// BenchmarkApprovalLatencyPlugin: the same from `kubectl remedy approve kexec
// NAME`, each a whole invocation (kubeconfig, discovery, read, status patch),
// over at least 20 approvals.
func BenchmarkApprovalLatencyPlugin(b *testing.B) {
	kubeconfig := filepath.Join(b.TempDir(), "kubeconfig")
	require.NoError(b, harness.WriteKubeconfig(kubeconfig))
	benchmarkApproval(b, 20, func(k *v1alpha1.KubernetesExecution) {
		var out bytes.Buffer
		err := plugin.Run(context.Background(), []string{"--kubeconfig", kubeconfig, "-n", k.Namespace, "approve", "kexec", k.Name, "-m", "bench"}, &out, &out)
		require.NoError(b, err, out.String())
	})
}

// BenchmarkApprovalExpiryAccuracy: how late Expired is written after
// requiredBy, observed on the RAR (target: < 1 s).
func BenchmarkApprovalExpiryAccuracy(b *testing.B) {
	ns := harness.Namespace(b)
	harness.Deployment(b, ns, "web", 1)
	// Every request must be waiting, and watched, before the first one
	// expires, or setup time would count as lateness.
	ks := waitingExecutions(b, ns, "expire", b.N, 10*time.Second+time.Duration(b.N)*time.Second)
	errs := make([]time.Duration, len(ks))
	var wg sync.WaitGroup
	for i, k := range ks {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rar := &v1alpha1.RemediationApprovalRequest{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: k.Status.ApprovalRequestRef.Name}}
			require.NoError(b, harness.Kube().Get(context.Background(), ctrlclient.ObjectKeyFromObject(rar), rar))
			// Sleep until just before requiredBy, so 50 pollers do not load the API server for minutes.
			time.Sleep(time.Until(rar.Spec.RequiredBy.Time) - 200*time.Millisecond) // paces the load; asserts nothing
			for rar.Status.Decision != v1alpha1.DecisionExpired {
				time.Sleep(25 * time.Millisecond) // polls at the resolution the benchmark times; asserts nothing negative
				require.NoError(b, harness.Kube().Get(context.Background(), ctrlclient.ObjectKeyFromObject(rar), rar))
			}
			errs[i] = time.Since(rar.Spec.RequiredBy.Time)
		}()
	}
	wg.Wait()
	report(b, errs, "ms-late")
}
