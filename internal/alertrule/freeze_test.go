package alertrule

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/remedy-dev/remedy/api/v1alpha1"
)

func at(s string) time.Time {
	t, err := time.Parse(time.RFC3339, s)
	if err != nil {
		panic(err)
	}
	return t
}

func TestFrozenUntilIsTheFirstMinuteOutsideEveryInterval(t *testing.T) {
	// 2026-11-27 is a Friday.
	f := &v1alpha1.FreezeSpec{TimeIntervals: []v1alpha1.TimeInterval{
		{Weekdays: []string{"friday"}, Times: []v1alpha1.TimeRange{{StartTime: "16:00", EndTime: "24:00"}}},
		{Weekdays: []string{"saturday", "sunday"}},
		{Months: []string{"december"}, DaysOfMonth: []string{"22:23"}, Location: "Europe/Berlin"},
	}}
	ivs, err := FreezeIntervals(f)
	require.NoError(t, err)
	for _, tc := range []struct {
		name, now, until string
	}{
		{"before the Friday window", "2026-11-27T15:59:59Z", ""},
		{"Friday evening runs into the weekend", "2026-11-27T16:00:00Z", "2026-11-30T00:00:00Z"},
		{"Sunday", "2026-11-29T23:58:30Z", "2026-11-30T00:00:00Z"},
		{"Monday", "2026-11-30T00:00:00Z", ""},
		{"a December freeze in Berlin's time", "2026-12-22T10:00:00Z", "2026-12-23T23:00:00Z"},
		{"Monday 23:30 UTC is already Tuesday in Berlin", "2026-12-21T23:30:00Z", "2026-12-23T23:00:00Z"},
		{"Monday 22:59 UTC is not", "2026-12-21T22:59:00Z", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			until, frozen := FrozenUntil(ivs, at(tc.now))
			if tc.until == "" {
				assert.False(t, frozen)
				return
			}
			require.True(t, frozen)
			assert.Equal(t, at(tc.until), until.UTC())
		})
	}
}

func TestFrozenUntilBoundsAFreezeThatNeverEnds(t *testing.T) {
	ivs, err := FreezeIntervals(&v1alpha1.FreezeSpec{TimeIntervals: []v1alpha1.TimeInterval{{}}})
	require.NoError(t, err)
	now := at("2026-11-26T10:00:30Z")
	until, frozen := FrozenUntil(ivs, now)
	require.True(t, frozen)
	assert.Equal(t, now.Truncate(time.Minute).Add(maxFreezeScan), until)
}

func TestCheckNamesTheGateFieldsItRefuses(t *testing.T) {
	ok := v1alpha1.RemediationRuleSpec{
		Freeze:           &v1alpha1.FreezeSpec{TimeIntervals: []v1alpha1.TimeInterval{{Weekdays: []string{"monday:friday"}, Times: []v1alpha1.TimeRange{{StartTime: "09:00", EndTime: "17:00"}}}}},
		BlockWhileFiring: []string{`alertname="ClusterDegraded"`},
		Silence:          &v1alpha1.SilenceSpec{Enabled: true, Duration: v1alpha1.DurationOf(5 * time.Minute)},
	}
	assert.Empty(t, checkGates(&ok))
	for _, tc := range []struct {
		name, field string
		spec        func(*v1alpha1.RemediationRuleSpec)
	}{
		{"a weekday Alertmanager does not know", "spec.freeze.timeIntervals[0]", func(s *v1alpha1.RemediationRuleSpec) {
			s.Freeze.TimeIntervals[0].Weekdays = []string{"funday"}
		}},
		{"an end before the start", "spec.freeze.timeIntervals[0]", func(s *v1alpha1.RemediationRuleSpec) {
			s.Freeze.TimeIntervals[0].Times[0].EndTime = "08:00"
		}},
		{"an unknown time zone", "spec.freeze.timeIntervals[1]", func(s *v1alpha1.RemediationRuleSpec) {
			s.Freeze.TimeIntervals = append(s.Freeze.TimeIntervals, v1alpha1.TimeInterval{Location: "Mars/Olympus_Mons"})
		}},
		{"a gate that is no matcher", "spec.blockWhileFiring[0]", func(s *v1alpha1.RemediationRuleSpec) {
			s.BlockWhileFiring = []string{`alertname=~"(`}
		}},
		{"a silence too short to renew", "spec.silence.duration", func(s *v1alpha1.RemediationRuleSpec) {
			s.Silence.Duration = v1alpha1.DurationOf(time.Second)
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := ok
			s.Freeze = &v1alpha1.FreezeSpec{TimeIntervals: []v1alpha1.TimeInterval{ok.Freeze.TimeIntervals[0]}}
			s.Freeze.TimeIntervals[0].Times = []v1alpha1.TimeRange{ok.Freeze.TimeIntervals[0].Times[0]}
			s.Silence = &v1alpha1.SilenceSpec{Enabled: true, Duration: ok.Silence.Duration}
			tc.spec(&s)
			errs := checkGates(&s)
			require.Len(t, errs, 1, errs.ToAggregate())
			assert.Equal(t, tc.field, errs[0].Field)
		})
	}
}
