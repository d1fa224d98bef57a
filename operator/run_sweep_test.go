package operator

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/remedy-dev/remedy/api/v1alpha1"
)

func TestStray(t *testing.T) {
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	every := 2 * time.Minute
	quiet := now.Add(-every)
	running := map[string]bool{"kexec/shop/up/u1": true}
	for _, tt := range []struct {
		name       string
		workflowID string
		phase      v1alpha1.Phase
		sequence   int64
		quiet      time.Time
		want       bool
	}{
		{"quiet and not running", "kexec/shop/gone/u2", v1alpha1.PhaseRollbackReady, 4, quiet, true},
		{"quiet and running", "kexec/shop/up/u1", v1alpha1.PhaseRollbackReady, 4, quiet, false},
		{"moved within the interval (visibility may lag)", "kexec/shop/gone/u2", v1alpha1.PhaseExecuting, 3, now.Add(-time.Second), false},
		{"final phase", "kexec/shop/gone/u2", v1alpha1.PhaseCompleted, 5, quiet, false},
		{"not pushing: queried instead", "kexec/shop/gone/u2", v1alpha1.PhaseRollbackReady, 0, quiet, false},
		{"not started", "", v1alpha1.PhasePending, 0, quiet, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, stray(tt.workflowID, tt.phase, tt.sequence, tt.quiet, running, now, every))
		})
	}
}

// A mark is taken once; forgetting an object drops it.
func TestRunChecksFlags(t *testing.T) {
	var c runChecks
	key := runSubject{}.key
	assert.False(t, c.take(key))
	c.flag(key)
	assert.True(t, c.take(key))
	assert.False(t, c.take(key), "a mark is taken once")
	c.flag(key)
	c.forget(key)
	assert.False(t, c.take(key), "forgetting drops the mark")
}
