package metrics

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestNamesListsEveryRemedyMetric(t *testing.T) {
	names := Names()
	for _, want := range []string{
		"remedy_executions_total", "remedy_ownership_migrations_total", "remedy_configmap_reload_watch_errors_total",
		"remedy_configmap_reload_leader_state", "remedy_build_info", MetricReloadDroppedRestarts, MetricWorkflowUnknownSignals,
	} {
		assert.Contains(t, names, want)
	}
	assert.Len(t, names, len(collectors)+len(sdkCounted), "one name per collector")
	assert.IsNonDecreasing(t, names)
}
