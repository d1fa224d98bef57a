package alerts

import (
	"sync"
	"time"
)

// RedeliveryWindow is how long the receiver remembers the firing alerts it
// handed to Temporal. Alertmanager resends a whole notification when any
// of its alerts failed (a 503), and an HA replica sends its duplicate
// within seconds; inside the window the alerts already handed over cost
// Temporal nothing again. Without it, a notification larger than Temporal
// can take within the receiver's timeout signals its first alerts again on
// every retry and never reaches its last ones.
const RedeliveryWindow = time.Minute

// maxHanded bounds the memory: past it, expired entries go, then others
// until half remain (a repeat of one of those costs one more signal,
// which its run absorbs).
const maxHanded = 100_000

// handedOver remembers which alert instance (workflow ID and startsAt) was
// handed to Temporal when. A resolve forgets it, so the next firing starts
// a new run; an alert that fires again gets a new startsAt from Alertmanager.
type handedOver struct {
	mu sync.Mutex
	at map[handedKey]time.Time
}

type handedKey struct {
	id       string
	startsAt int64
}

func (h *handedOver) recently(id string, startsAt, now time.Time) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	at, ok := h.at[handedKey{id, startsAt.UnixNano()}]
	return ok && now.Sub(at) < RedeliveryWindow
}

func (h *handedOver) remember(id string, startsAt, now time.Time) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.at == nil {
		h.at = map[handedKey]time.Time{}
	}
	if len(h.at) >= maxHanded {
		for k, at := range h.at {
			if now.Sub(at) >= RedeliveryWindow || len(h.at) >= maxHanded/2 {
				delete(h.at, k)
			}
		}
	}
	h.at[handedKey{id, startsAt.UnixNano()}] = now
}

func (h *handedOver) forget(id string, startsAt time.Time) {
	h.mu.Lock()
	defer h.mu.Unlock()
	delete(h.at, handedKey{id, startsAt.UnixNano()})
}
