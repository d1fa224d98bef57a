package workflows

import "go.temporal.io/sdk/workflow"

// startApprovals starts the coroutine that asks people about drifts, one
// request at a time.
func (r *driftRun) startApprovals(ctx workflow.Context) {
	r.wake = workflow.NewBufferedChannel(ctx, 1)
}

// dropAsk forgets a drift that resolved before anyone decided on it.
func (r *driftRun) dropAsk(id string) {
	for i, a := range r.asks {
		if a == id {
			r.asks = append(r.asks[:i:i], r.asks[i+1:]...)
			return
		}
	}
}
