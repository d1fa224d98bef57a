package metrics

import (
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestTemporalHandlerExportsSDKMetrics(t *testing.T) {
	reg := prometheus.NewRegistry()
	h := NewTemporalHandler(reg).WithTags(map[string]string{"namespace": "default"})
	wf := h.WithTags(map[string]string{"workflow_type": "DriftWorkflow"})

	wf.Counter("temporal_workflow_completed").Inc(2)
	wf.Counter("temporal_workflow_completed").Inc(1)
	// Another tag set for the same name keeps the first one's labels.
	h.WithTags(map[string]string{"task-queue": "remedy"}).Counter("temporal_workflow_completed").Inc(5)
	h.Gauge("temporal_num_pollers").Update(3)
	wf.Timer("temporal_workflow_endtoend_latency").Record(1500 * time.Millisecond)
	// A name already used for another type is dropped, not a panic.
	h.Gauge("temporal_workflow_completed").Update(1)

	want := `
# HELP temporal_workflow_completed Temporal SDK counter temporal_workflow_completed.
# TYPE temporal_workflow_completed counter
temporal_workflow_completed{namespace="default",workflow_type=""} 5
temporal_workflow_completed{namespace="default",workflow_type="DriftWorkflow"} 3
# HELP temporal_num_pollers Temporal SDK gauge temporal_num_pollers.
# TYPE temporal_num_pollers gauge
temporal_num_pollers{namespace="default"} 3
`
	require.NoError(t, testutil.GatherAndCompare(reg, strings.NewReader(want), "temporal_workflow_completed", "temporal_num_pollers"))
	n, err := testutil.GatherAndCount(reg, "temporal_workflow_endtoend_latency")
	require.NoError(t, err)
	assert.Equal(t, 1, n)
	assert.Equal(t, "temporal_task_queue", sanitize("temporal.task-queue"))
}
