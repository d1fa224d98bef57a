package webhook

import (
	"context"
	"sync"
	"time"

	"go.temporal.io/sdk/client"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/remedy-dev/remedy/api/v1alpha1"
	"github.com/remedy-dev/remedy/internal/metrics"
	"github.com/remedy-dev/remedy/workflows"
)

// signalDedupWindow: a controller retrying a denied revert sends the same
// report again and again; one signal per window is enough.
const signalDedupWindow = 30 * time.Second

// SignalQueue delivers drift signals to drift workflows in the background, so
// admission never waits on Temporal: Enqueue never blocks, a full queue drops
// (and counts) the signal, and sending retries with backoff.
type SignalQueue struct {
	temporal client.Client
	ch       chan workflows.DriftSignal
	backoff  wait.Backoff

	mu     sync.Mutex
	recent map[string]time.Time
}

// NewSignalQueue returns a queue holding at most size signals.
func NewSignalQueue(tc client.Client, size int) *SignalQueue {
	return &SignalQueue{
		temporal: tc, ch: make(chan workflows.DriftSignal, size), recent: map[string]time.Time{},
		backoff: wait.Backoff{Duration: 200 * time.Millisecond, Factor: 2, Jitter: 0.1, Steps: 8, Cap: 10 * time.Second},
	}
}

// Enqueue queues s unless the same report was queued within the window or
// the queue is full; it reports whether s was queued.
func (q *SignalQueue) Enqueue(s workflows.DriftSignal) bool {
	now := time.Now()
	q.mu.Lock()
	for id, at := range q.recent {
		if now.Sub(at) > signalDedupWindow {
			delete(q.recent, id)
		}
	}
	if _, dup := q.recent[s.ID]; dup && !s.Approved {
		q.mu.Unlock()
		metrics.DriftSignalsDropped.WithLabelValues("duplicate").Inc()
		return false
	}
	q.recent[s.ID] = now
	q.mu.Unlock()
	select {
	case q.ch <- s:
		metrics.DriftSignalQueueDepth.Set(float64(len(q.ch)))
		return true
	default:
		metrics.DriftSignalsDropped.WithLabelValues("full").Inc()
		return false
	}
}

// Run sends queued signals until ctx ends.
func (q *SignalQueue) Run(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case s := <-q.ch:
			metrics.DriftSignalQueueDepth.Set(float64(len(q.ch)))
			q.send(ctx, s)
		}
	}
}

func (q *SignalQueue) send(ctx context.Context, s workflows.DriftSignal) {
	logger := log.FromContext(ctx).WithValues("driftID", s.ID, "parent", s.Parent.Namespace+"/"+s.Parent.Name, "child", s.Child.Kind+"/"+s.Child.Name)
	opts := client.StartWorkflowOptions{ID: v1alpha1.DriftWorkflowID(s.Parent.UID), TaskQueue: workflows.TaskQueue}
	var lastErr error
	err := wait.ExponentialBackoffWithContext(ctx, q.backoff, func(ctx context.Context) (bool, error) {
		_, lastErr = q.temporal.SignalWithStartWorkflow(ctx, opts.ID, workflows.SignalDrift, s, opts,
			workflows.DriftWorkflow, workflows.DriftInput{Parent: s.Parent})
		if lastErr != nil {
			logger.V(1).Info("drift signal failed, retrying", "error", lastErr)
		}
		return lastErr == nil, nil
	})
	if err != nil {
		metrics.DriftSignalsDropped.WithLabelValues("failed").Inc()
		logger.Error(lastErr, "drift signal dropped after retries")
		return
	}
	metrics.DriftSignalsSent.Inc()
	logger.Info("drift signalled", "workflowID", opts.ID)
}
