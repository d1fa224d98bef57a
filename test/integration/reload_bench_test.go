package integration

import (
	"context"
	"fmt"
	"runtime"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrlclient "sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/remedy-dev/remedy/api/v1alpha1"
	"github.com/remedy-dev/remedy/test/harness"
)

// BenchmarkReloadReaction measures what the debounce window does not
// explain: from the last ConfigMap edit until the pod template carries the
// new hash, minus the window. It reports p50 and p95 of that overhead.
func BenchmarkReloadReaction(b *testing.B) {
	const debounce = time.Second
	ctx := context.Background()
	ns := harness.Namespace(b)
	web := reloadDeployment(b, ns, "web", "prod")
	cm := reloadConfigMap(b, ns, "app", "prod", "v0")
	reloadPolicy(b, ns, debounce)
	waitBaseline(b, web, "app")

	overheads := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		before := web.Spec.Template.Annotations[hashKey("app")]
		setData(b, cm, fmt.Sprintf("v%d", i+1))
		edited := time.Now()
		deadline := edited.Add(reloadTimeout)
		for {
			require.NoError(b, kubeGet(ctx, web))
			if h := web.Spec.Template.Annotations[hashKey("app")]; h != "" && h != before {
				break
			}
			require.True(b, time.Now().Before(deadline), "no restart after edit %d", i+1)
			time.Sleep(5 * time.Millisecond) // polls at the resolution the benchmark times; asserts nothing negative
		}
		overheads = append(overheads, time.Since(edited)-debounce)
	}
	b.StopTimer()
	sort.Slice(overheads, func(i, j int) bool { return overheads[i] < overheads[j] })
	b.ReportMetric(float64(percentile(overheads, 50).Milliseconds()), "p50-ms")
	b.ReportMetric(float64(percentile(overheads, 95).Milliseconds()), "p95-ms")
}

func percentile(sorted []time.Duration, p int) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	return sorted[(len(sorted)-1)*p/100]
}

func kubeGet(ctx context.Context, d *appsv1.Deployment) error {
	return harness.Kube().Get(ctx, ctrlclient.ObjectKeyFromObject(d), d)
}

// BenchmarkReloadOperatorMemory reports the heap a reload-only operator
// holds once its caches have synced 1,000 selected ConfigMaps and 1,000
// selected Deployments of one reconciled policy. The shared
// operator and worker live in the same process, so heap-MB is the growth
// measured around starting a private operator, after a forced GC.
func BenchmarkReloadOperatorMemory(b *testing.B) {
	const n = 1000
	ctx := context.Background()
	ns := harness.Namespace(b)
	for i := 0; i < n; i++ {
		reloadConfigMap(b, ns, fmt.Sprintf("cm-%04d", i), fmt.Sprintf("e%d", i%50), "v0")
		reloadDeployment(b, ns, fmt.Sprintf("web-%04d", i), fmt.Sprintf("e%d", i%50))
	}
	b.Cleanup(func() {
		_ = harness.Kube().DeleteAllOf(ctx, &appsv1.Deployment{}, ctrlclient.InNamespace(ns))
		_ = harness.Kube().DeleteAllOf(ctx, &corev1.ConfigMap{}, ctrlclient.InNamespace(ns))
	})
	p := reloadPolicy(b, ns, time.Second)
	harness.Eventually(b, p, 5*time.Minute, func(p *v1alpha1.ConfigReloadPolicy) bool {
		return len(p.Status.Workloads) == n && len(p.Status.WatchedConfigMaps) == n
	})

	var heap float64
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		before := heapInUse()
		// Measured while the operator runs with every informer synced.
		stop := startReloadOperator(b)
		heap += float64(heapInUse()-before) / (1 << 20)
		stop()
	}
	b.ReportMetric(heap/float64(b.N), "heap-MB")
}

func heapInUse() int64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return int64(m.HeapInuse)
}

// BenchmarkOperatorHeapLargeConfigMaps reports the heap an operator holds
// once its caches have synced 1,000 ConfigMaps of 100 KiB each (100 MiB
// raw), against that raw size (x-raw): the cache keeps metadata and a hash
// of the data, so the heap must not grow with it.
func BenchmarkOperatorHeapLargeConfigMaps(b *testing.B) {
	const n, size = 1000, 100 << 10
	ctx := context.Background()
	ns := harness.Namespace(b)
	value := strings.Repeat("x", size)
	sem := make(chan struct{}, 20)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("big-%04d", i), Namespace: ns, Labels: map[string]string{"reload": "true"}},
				Data: map[string]string{"value": value}}
			require.NoError(b, harness.Kube().Create(ctx, cm))
		}()
	}
	wg.Wait()
	b.Cleanup(func() { _ = harness.Kube().DeleteAllOf(ctx, &corev1.ConfigMap{}, ctrlclient.InNamespace(ns)) })

	var heap float64
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		before := heapInUse()
		stop := startReloadOperator(b)
		heap += float64(heapInUse()-before) / (1 << 20)
		stop()
	}
	raw := float64(n*size) / (1 << 20)
	b.ReportMetric(heap/float64(b.N), "heap-MB")
	b.ReportMetric(raw, "raw-MB")
	b.ReportMetric(heap/float64(b.N)/raw, "x-raw")
}
