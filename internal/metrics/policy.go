package metrics

import "github.com/prometheus/client_golang/prometheus"

var (
	// SafetyPolicyBroken is 1 while the safety policy in the policy
	// ConfigMaps does not compile: the worker then decides with the last
	// policy that did, or, having none, fails every execution PolicyDenied.
	SafetyPolicyBroken = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "remedy_safety_policy_broken",
		Help: "1 while the safety policy's ConfigMaps do not compile and the worker decides with the last good policy (or none); 0 otherwise.",
	})
	// SafetyPolicyFallbacks counts policy evaluations decided by the last good
	// policy (result last_good) or failed for want of one (result none).
	SafetyPolicyFallbacks = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "remedy_safety_policy_fallbacks_total",
		Help: "Safety policy evaluations made while the current policy is broken, by result (last_good, none).",
	}, []string{"result"})
)

func init() {
	register(SafetyPolicyBroken, SafetyPolicyFallbacks)
	SafetyPolicyFallbacks.WithLabelValues("last_good")
	SafetyPolicyFallbacks.WithLabelValues("none")
}
