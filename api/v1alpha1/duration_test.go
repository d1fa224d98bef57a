package v1alpha1

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestDurationParse(t *testing.T) {
	tests := []struct {
		in      string
		want    time.Duration
		wantErr string
	}{
		{"5m", 5 * time.Minute, ""},
		{"1h30m", 90 * time.Minute, ""},
		{"0", 0, ""},
		{"1.5s", 1500 * time.Millisecond, ""},
		{"5 s", 0, `"5 s" is not a duration`},
		{"5", 0, `"5" is not a duration`},
		{"-1s", 0, `"-1s" is negative`},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			d := Duration(tt.in)
			got, err := d.Parse()
			if tt.wantErr != "" {
				require.Error(t, err)
				assert.Contains(t, err.Error(), tt.wantErr)
				assert.Equal(t, time.Minute, d.Or(time.Minute), "a bad value falls back")
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tt.want, got)
			assert.Equal(t, tt.want, d.Or(time.Minute))
		})
	}
	var unset *Duration
	assert.Equal(t, time.Minute, unset.Or(time.Minute))
	assert.Equal(t, Duration("2m0s"), *DurationOf(2 * time.Minute))
}

func TestValidateDurationsNamesEveryBadField(t *testing.T) {
	bad := Duration("5 s")
	p := ConfigReloadPolicySpec{Debounce: &bad, Retry: &RetrySpec{MaxInterval: &bad}, Approval: &ApprovalSpec{Timeout: &bad}}
	err := p.ValidateDurations()
	require.Error(t, err)
	for _, f := range []string{"spec.debounce", "spec.retry.maxInterval", "spec.approval.timeout"} {
		assert.Contains(t, err.Error(), f+`: "5 s" is not a duration`)
	}
	assert.NotContains(t, err.Error(), "initialInterval")

	k := KubernetesExecutionSpec{Timeout: &bad, PreConditions: []Condition{{Name: "a"}, {Name: "b", Timeout: &bad}}}
	err = k.ValidateDurations()
	require.Error(t, err)
	assert.Contains(t, err.Error(), "spec.timeout: ")
	assert.Contains(t, err.Error(), "spec.preConditions[1].timeout: ")
	assert.NotContains(t, err.Error(), "preConditions[0]")

	good := Duration("5s")
	assert.NoError(t, (&ConfigReloadPolicySpec{Debounce: &good}).ValidateDurations())
}
