package metrics

import (
	"github.com/prometheus/client_golang/prometheus"
)

// Alert-driven remediation metrics (docs/operate.md).
var (
	// AlertsReceived counts alerts the receiver read, by result: accepted
	// (handed to Temporal), unmatched, stale, malformed, unauthorized, too_large, temporal_unavailable.
	AlertsReceived = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "remedy_alerts_received_total",
		Help: "Alerts (or whole payloads, for refusals before decoding) received by the Alertmanager receiver, by result.",
	}, []string{"result"})
	// AlertsMatched counts alerts that started a rule's workflow.
	AlertsMatched = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "remedy_alerts_matched_total",
		Help: "Alert firings matched by a RemediationRule (one per alert workflow), by namespace.",
	}, []string{"namespace"})
	// AlertsRefused counts alerts a rule did not act on, by reason.
	AlertsRefused = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "remedy_alerts_refused_total",
		Help: "Alerts a RemediationRule refused to act on, by reason.",
	}, []string{"reason"})
	// AlertOutcomes counts alert runs by outcome (alerts.outcomeOf): each
	// run's entry into each outcome once, as RemediationRuleStatus.Outcomes.
	AlertOutcomes = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "remedy_alert_outcomes_total",
		Help: "Alert runs by outcome (Refused, Held, Gated, WaitingApproval, Done, Verified, Ineffective, Joined, Canceled, Shadow), one per run and outcome.",
	}, []string{"outcome"})
	// AlertRunsStarted counts remediations (or shadow runs) started for alerts.
	AlertRunsStarted = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "remedy_alert_runs_started_total",
		Help: "Remediations started for alerts, by namespace.",
	}, []string{"namespace"})
	// AlertGuardTrips counts guard trips: CircuitOpen, Storm.
	AlertGuardTrips = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "remedy_alert_guard_trips_total",
		Help: "Alert guards tripped (circuit breaker, storm mode), by guard.",
	}, []string{"guard"})
	// AlertSweeps counts the receiver's rounds looking for lost resolves, by
	// result: ok, unreachable (Alertmanager could not be read: nothing was
	// resolved), restarted (Alertmanager started within the grace: its alerts
	// are still coming back, nothing was resolved).
	AlertSweeps = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "remedy_alert_sweeps_total",
		Help: "Rounds of the receiver's sweep for lost resolves, by result (ok, unreachable, restarted).",
	}, []string{"result"})
	// AlertGateWaits counts alert runs held before acting, by gate: Frozen
	// (a freeze calendar), GatedByAlert (blockWhileFiring) and GateUnknown
	// (Alertmanager could not be read, so the gate held the run).
	AlertGateWaits = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "remedy_alert_gate_waits_total",
		Help: "Alert runs held before acting by a freeze or a health gate, by gate (one per hold).",
	}, []string{"gate"})
	// AlertsRedelivered counts repeats the receiver answered without
	// signalling again: the same firing handed to Temporal within
	// alerts.RedeliveryWindow (a resent notification, an HA duplicate).
	// Repeats that reach the run are remedy_alerts_deduplicated_total.
	AlertsRedelivered = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "remedy_alerts_redelivered_total",
		Help: "Repeats of an alert firing already handed to Temporal within the redelivery window, answered without signalling its workflow again.",
	})
	// AlertSilences counts Alertmanager silences held by alert runs, by operation.
	AlertSilences = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "remedy_alert_silences_total",
		Help: "Alertmanager silences of alerts under remediation, by operation: created, renewed, expired, failed.",
	}, []string{"op"})
)

// Results of AlertsReceived and guards of AlertGuardTrips, exposed at 0 from the start.
var (
	AlertResults = []string{"accepted", "unmatched", "stale", "malformed", "unauthorized", "too_large", "temporal_unavailable"}
	AlertGuards  = []string{"CircuitOpen", "Storm"}
	AlertGates   = []string{"Frozen", "GatedByAlert", "GateUnknown"}
	SilenceOps   = []string{"created", "renewed", "expired", "failed"}
	SweepResults = []string{"ok", "unreachable", "restarted"}
	// AlertRefusalReasons are the refusals of AlertsRefused exposed at 0 from
	// the start: a proven alert's missing target (NotFound), a template
	// that does not render (InvalidParameters), a suspended rule, a rule
	// without an author (Forbidden), a GitOps-managed target, a tripped
	// guard, a rejected approval. Other reasons appear from their first refusal.
	AlertRefusalReasons = []string{"NotFound", "InvalidParameters", "Suspended", "Forbidden", "GitOpsManaged", "CircuitOpen", "Storm", "Rejected"}
	// AlertOutcomeNames are the outcomes of AlertOutcomes (alerts.outcomeOf).
	AlertOutcomeNames = []string{"Refused", "Held", "Gated", "WaitingApproval", "Done", "Verified", "Ineffective", "Joined", "Canceled", "Shadow"}
)

func init() {
	register(AlertsReceived, AlertsRedelivered, AlertsMatched, AlertsRefused, AlertOutcomes, AlertRunsStarted, AlertGuardTrips, AlertGateWaits, AlertSilences, AlertSweeps)
	for _, r := range AlertRefusalReasons {
		AlertsRefused.WithLabelValues(r)
	}
	for _, o := range AlertOutcomeNames {
		AlertOutcomes.WithLabelValues(o)
	}
	for _, r := range SweepResults {
		AlertSweeps.WithLabelValues(r)
	}
	for _, r := range AlertResults {
		AlertsReceived.WithLabelValues(r)
	}
	for _, g := range AlertGuards {
		AlertGuardTrips.WithLabelValues(g)
	}
	for _, g := range AlertGates {
		AlertGateWaits.WithLabelValues(g)
	}
	for _, op := range SilenceOps {
		AlertSilences.WithLabelValues(op)
	}
}

// AlertsDeduplicated counts repeated notifications of an alert folded into
// its open workflow, by the rule's namespace; the workflow counts it when not
// replaying (workflows.count).
var AlertsDeduplicated = prometheus.NewCounterVec(prometheus.CounterOpts{
	Name: "remedy_alerts_deduplicated_total",
	Help: "Repeated notifications of a firing alert folded into its open run, by namespace.",
}, []string{"namespace"})

func init() { register(AlertsDeduplicated) }
