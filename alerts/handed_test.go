package alerts

import (
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

func TestHandedOverRemembersAnAlertInstanceForTheWindow(t *testing.T) {
	t0 := time.Date(2026, 11, 26, 0, 0, 0, 0, time.UTC)
	started := t0.Add(-time.Minute)
	for _, tc := range []struct {
		name     string
		act      func(h *handedOver)
		id       string
		startsAt time.Time
		at       time.Time
		want     bool
	}{
		{"never handed", func(*handedOver) {}, "a", started, t0, false},
		{"handed just now", func(h *handedOver) { h.remember("a", started, t0) }, "a", started, t0.Add(time.Second), true},
		{"handed a window ago", func(h *handedOver) { h.remember("a", started, t0) }, "a", started, t0.Add(RedeliveryWindow), false},
		{"another alert", func(h *handedOver) { h.remember("a", started, t0) }, "b", started, t0, false},
		{"the same alert firing anew", func(h *handedOver) { h.remember("a", started, t0) }, "a", t0, t0, false},
		{"resolved since", func(h *handedOver) { h.remember("a", started, t0); h.forget("a", started) }, "a", started, t0, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var h handedOver
			tc.act(&h)
			assert.Equal(t, tc.want, h.recently(tc.id, tc.startsAt, tc.at))
		})
	}
}

func TestHandedOverIsBounded(t *testing.T) {
	var h handedOver
	t0 := time.Now()
	for i := range maxHanded + 1 {
		h.remember(strconv.Itoa(i), t0, t0)
	}
	assert.LessOrEqual(t, len(h.at), maxHanded/2+1)
	assert.True(t, h.recently(strconv.Itoa(maxHanded), t0, t0), "the newest stays")
}
