package metrics

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
)

func TestNamesListsEveryRemedyMetric(t *testing.T) {
	names := Names()
	for _, want := range []string{
		"remedy_executions_total", "remedy_ownership_migrations_total", "remedy_configmap_reload_watch_errors_total",
		"remedy_configmap_reload_leader_state", "remedy_build_info", "remedy_configmap_reload_dropped_restarts_total", "remedy_workflow_unknown_signals_total", "remedy_alerts_deduplicated_total",
	} {
		assert.Contains(t, names, want)
	}
	assert.Len(t, names, len(collectors), "one name per collector")
	assert.IsNonDecreasing(t, names)
}

// TestFixedOutcomesAreExposedFromTheStart: alerts on migration failures and
// dropped drift signals see a 0 series before the first event.
func TestFixedOutcomesAreExposedFromTheStart(t *testing.T) {
	for _, name := range AfterFirstEvent() {
		assert.Contains(t, Names(), name, "AfterFirstEvent names a metric Remedy does not define")
	}
	families, err := ctrlmetrics.Registry.Gather()
	require.NoError(t, err)
	series := map[string]int{}
	for _, f := range families {
		series[f.GetName()] = len(f.GetMetric())
	}
	assert.Equal(t, 3, series["remedy_ownership_migrations_total"], "success, skipped, failure")
	assert.Equal(t, 3, series["remedy_drift_signals_dropped_total"], "full, failed, duplicate")
	assert.Equal(t, len(AlertOutcomeNames), series["remedy_alert_outcomes_total"], "every outcome")
	assert.Equal(t, len(AlertRefusalReasons), series["remedy_alerts_refused_total"], "a refused alert is seen before the first refusal")
}
