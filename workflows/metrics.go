package workflows

import (
	"github.com/prometheus/client_golang/prometheus"
	"go.temporal.io/sdk/workflow"
)

// count adds n to one of Remedy's own counters from workflow code, once per
// event: a replay of the same history counts nothing again. Remedy's counters
// carry Remedy's labels only; the SDK's metrics handler would add its own
// (namespace, task_queue, workflow_type).
func count(ctx workflow.Context, c prometheus.Counter, n float64) {
	if workflow.IsReplaying(ctx) {
		return
	}
	//workflowcheck:ignore a counter is not workflow state; replays skip it above
	c.Add(n)
}
