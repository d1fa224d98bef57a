package execution

import (
	"context"
	"fmt"
	"sync"
	"time"

	"go.temporal.io/sdk/activity"
)

// beater heartbeats an activity on a ticker with the latest details, until
// stopped or the activity's context ends (a worker that stops hard falls
// silent, so the server times the attempt out and retries it elsewhere).
type beater struct {
	ctx    context.Context
	now    Heartbeater
	done   chan struct{}
	once   sync.Once
	mu     sync.Mutex
	detail any
}

func newBeater(ctx context.Context, now Heartbeater) *beater {
	return &beater{ctx: ctx, now: now, done: make(chan struct{})}
}

func (b *beater) every(d time.Duration) {
	if d <= 0 {
		d = 2 * time.Second
	}
	t := time.NewTicker(d)
	defer t.Stop()
	for {
		b.beat()
		select {
		case <-b.ctx.Done():
			return
		case <-b.done:
			return
		case <-t.C:
		}
	}
}

func (b *beater) beat() {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.detail == nil {
		activity.RecordHeartbeat(b.ctx)
		return
	}
	activity.RecordHeartbeat(b.ctx, b.detail)
}

// set makes detail what every later heartbeat carries.
func (b *beater) set(detail any) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.detail = detail
}

// record sets detail and has the server hold it before returning. The
// throttled heartbeat gets it too, so a held-back older one cannot replace it.
func (b *beater) record(detail any) error {
	b.set(detail)
	b.beat()
	if b.now == nil {
		return nil
	}
	if err := b.now.RecordActivityHeartbeat(b.ctx, activity.GetInfo(b.ctx).TaskToken, detail); err != nil {
		return fmt.Errorf("record heartbeat: %w", err)
	}
	return nil
}

func (b *beater) stop() { b.once.Do(func() { close(b.done) }) }
