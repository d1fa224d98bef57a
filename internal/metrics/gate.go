package metrics

import "github.com/prometheus/client_golang/prometheus"

// GateDecisions counts the write gate's answers: every write Remedy makes to
// an object it does not own is asked for once, immediately before it.
var GateDecisions = prometheus.NewCounterVec(prometheus.CounterOpts{
	Name: "remedy_write_gate_decisions_total",
	Help: "Write gate checks, by subject kind and result (passed, refused).",
}, []string{"subject", "result"})

// GateSubjects are the kinds of object Remedy writes for (gate.Subject*).
var GateSubjects = []string{"KubernetesExecution", "ConfigReloadPolicy", "DriftParent"}

func init() {
	register(GateDecisions)
	for _, s := range GateSubjects {
		GateDecisions.WithLabelValues(s, "passed")
		GateDecisions.WithLabelValues(s, "refused")
	}
}

// PayloadsRefused counts payloads refused at the Temporal trust boundary
// (internal/seal): unsealed, sealed under an unknown key, forged, or a
// person's payload where only Remedy's parts may speak.
var PayloadsRefused = prometheus.NewCounterVec(prometheus.CounterOpts{
	Name: "remedy_payloads_refused_total",
	Help: "Temporal payloads refused before any workflow or activity code read them, by kind (unsealed, unknown-key, forged, person).",
}, []string{"kind"})

func init() {
	register(PayloadsRefused)
	for _, k := range []string{"unsealed", "unknown-key", "forged", "person"} {
		PayloadsRefused.WithLabelValues(k)
	}
}
