package kausality

import (
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// BenchmarkDecide times the hot path of a drifting controller in log mode:
// the deployment controller scaling a ReplicaSet of an unchanged
// Deployment. It reports the p50 and p99 of single decisions besides the mean.
func BenchmarkDecide(b *testing.B) {
	req := update()
	res := Decide(req)
	require.Equal(b, DecisionDriftLogged, res.Decision)

	samples := make([]time.Duration, 0, b.N)
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		start := time.Now()
		res = Decide(req)
		samples = append(samples, time.Since(start))
	}
	b.StopTimer()
	require.True(b, res.Allowed)
	slices.Sort(samples)
	pct := func(p float64) float64 { return float64(samples[int(p*float64(len(samples)-1))].Nanoseconds()) }
	b.ReportMetric(pct(0.50), "p50-ns/op")
	b.ReportMetric(pct(0.99), "p99-ns/op")
}
