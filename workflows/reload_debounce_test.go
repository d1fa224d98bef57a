package workflows

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/remedy-dev/remedy/internal/reloadrule"
)

// debounceT0 is the scenarios' clock origin; steps and times are offsets from it.
var debounceT0 = time.Date(2026, 11, 29, 1, 0, 0, 0, time.UTC)

func at(d time.Duration) time.Time { return debounceT0.Add(d) }

func cm(name, hash string) reloadrule.ConfigChange {
	return reloadrule.ConfigChange{ConfigMap: name, Hash: hash}
}

func changes(c ...reloadrule.ConfigChange) []reloadrule.ConfigChange { return c }

// debounceSim plays the run's part around a reloadDebounce: it remembers a
// restart's intent, and the first new change during it, as reloadRun does.
type debounceSim struct {
	d          reloadDebounce
	intent     []reloadrule.ConfigChange
	asked      time.Time
	restarting bool
	newer      time.Time
	news       []bool
	dropped    int
}

type debounceStep struct {
	at time.Duration
	do func(s *debounceSim, now time.Time)
}

// change is a signal the run drains, or receives while restarting.
func change(after time.Duration, c reloadrule.ConfigChange) debounceStep {
	return debounceStep{after, func(s *debounceSim, now time.Time) {
		isNew := s.d.absorb(now, c)
		if s.restarting && isNew && s.newer.IsZero() {
			s.newer = now
		}
		s.news = append(s.news, isNew)
	}}
}

// heldChange is a signal the run receives while it waits for the due time.
func heldChange(after time.Duration, c reloadrule.ConfigChange) debounceStep {
	return debounceStep{after, func(s *debounceSim, now time.Time) { s.news = append(s.news, s.d.absorbHeld(now, c)) }}
}

// ask starts a restart of the pending changes.
func ask(after time.Duration) debounceStep {
	return debounceStep{after, func(s *debounceSim, now time.Time) {
		s.intent, s.asked, s.restarting, s.newer = s.d.intent(), now, true, time.Time{}
	}}
}

// done completes the restart ask started; rolled: the pods rolled.
func done(after time.Duration, rolled bool) debounceStep {
	return debounceStep{after, func(s *debounceSim, _ time.Time) {
		s.d.restarted(s.intent, s.asked, rolled, s.newer)
		s.restarting = false
	}}
}

func canceled(after time.Duration) debounceStep {
	return debounceStep{after, func(s *debounceSim, _ time.Time) { s.d.restartCanceled(s.asked); s.restarting = false }}
}

func failed(after time.Duration, msg string) debounceStep {
	return debounceStep{after, func(s *debounceSim, _ time.Time) { s.d.failed(errors.New(msg)); s.restarting = false }}
}

func declined(after time.Duration, c ...reloadrule.ConfigChange) debounceStep {
	return debounceStep{after, func(s *debounceSim, _ time.Time) { s.d.drop(c) }}
}

func askSuperseded(after time.Duration) debounceStep {
	return debounceStep{after, func(s *debounceSim, now time.Time) { s.d.askSuperseded(now) }}
}

func gone(after time.Duration) debounceStep {
	return debounceStep{after, func(s *debounceSim, _ time.Time) { s.dropped = s.d.workloadGone(errors.New("workload gone")) }}
}

func settle(after time.Duration) debounceStep {
	return debounceStep{after, func(s *debounceSim, _ time.Time) { s.d.settle() }}
}

func resume(after time.Duration) debounceStep {
	return debounceStep{after, func(s *debounceSim, now time.Time) { s.d.resume(now) }}
}

// continuedAsNew carries the state through the JSON of ReloadInput, as
// continue-as-new does, and starts the next run on it.
func continuedAsNew(after time.Duration) debounceStep {
	return debounceStep{after, func(s *debounceSim, now time.Time) {
		b, err := json.Marshal(ReloadInput{Namespace: "shop", Kind: "Deployment", Name: "web", reloadDebounce: s.d})
		if err != nil {
			panic(err)
		}
		var next ReloadInput
		if err := json.Unmarshal(b, &next); err != nil {
			panic(err)
		}
		s.d = next.reloadDebounce
		s.d.resume(now)
	}}
}

func TestReloadDebounce(t *testing.T) {
	require.GreaterOrEqual(t, len(debounceCases), 20)
	for _, tc := range debounceCases {
		t.Run(tc.name, func(t *testing.T) {
			timing := tc.timing
			if timing == (reloadTiming{}) {
				timing = reloadTiming{window: 5 * time.Second, maxWait: 30 * time.Second}
			}
			s := &debounceSim{d: tc.start}
			for _, st := range tc.steps {
				st.do(s, at(st.at))
			}
			assert.Equal(t, tc.want, s.d)
			assert.Equal(t, tc.news, s.news, "which changes were new")
			assert.Equal(t, tc.dropped, s.dropped)
			assert.Equal(t, tc.hold, s.d.holdFor(at(tc.holdAt), timing), "wait at %s", tc.holdAt)
		})
	}
}

func TestReloadDebounceShownDue(t *testing.T) {
	timing := reloadTiming{window: 5 * time.Second, maxWait: 30 * time.Second}
	d := reloadDebounce{LastRestartAt: at(0)}
	assert.Empty(t, d.shownDue(timing), "nothing pending: no due time, though the window holds")
	d.absorbHeld(at(time.Second), cm("app", "a1"))
	assert.Equal(t, "2026-11-29T01:00:05Z", d.shownDue(timing))
	d.absorbHeld(at(2*time.Second+time.Millisecond), cm("app", "a2"))
	assert.Equal(t, "2026-11-29T01:00:07.001Z", d.shownDue(timing), "to the nanosecond")
}

func TestReloadDebounceIntentIsACopy(t *testing.T) {
	d := reloadDebounce{}
	d.absorb(at(0), cm("app", "a1"))
	intent := d.intent()
	d.absorb(at(time.Second), cm("app", "a2"))
	assert.Equal(t, changes(cm("app", "a1")), intent, "a change during the restart does not alter what it applies")
}

// A v0.1.0 run continued as new with the state then copied field by field;
// the embedded type reads and writes exactly that JSON.
func TestReloadInputKeepsTheReleasedShape(t *testing.T) {
	b, err := os.ReadFile("testdata/histories/v0.1.0/reload-continued-as-new.json")
	require.NoError(t, err)
	var h struct {
		Events []struct {
			Attrs *struct {
				Input struct {
					Payloads []struct {
						Data string `json:"data"`
					} `json:"payloads"`
				} `json:"input"`
			} `json:"workflowExecutionContinuedAsNewEventAttributes"`
		} `json:"events"`
	}
	require.NoError(t, json.Unmarshal(b, &h))
	var carried []byte
	for _, e := range h.Events {
		if e.Attrs != nil {
			carried, err = base64.StdEncoding.DecodeString(e.Attrs.Input.Payloads[0].Data)
			require.NoError(t, err)
		}
	}
	require.NotEmpty(t, carried, "the history continues as new")

	var in ReloadInput
	require.NoError(t, json.Unmarshal(carried, &in))
	assert.Len(t, in.Pending, 1)
	assert.Equal(t, 200, in.Coalesced)
	assert.False(t, in.PushedAt.IsZero())
	again, err := json.Marshal(in)
	require.NoError(t, err)
	assert.Equal(t, string(carried), string(again), "the same fields, names and order")
}
