package alertrule

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/remedy-dev/remedy/api/v1alpha1"
)

// A rule stored before admission checked it fails at alert time naming
// every entry that does not parse, not only the first.
func TestParsersNameEveryBadEntry(t *testing.T) {
	spec := &v1alpha1.RemediationRuleSpec{
		Matchers:         []string{`alertname=~"(`, `severity="page"`, `team=~"[`},
		BlockWhileFiring: []string{`alertname=~"(`, `alertname="Degraded"`, `{}`},
		Freeze:           &v1alpha1.FreezeSpec{TimeIntervals: []v1alpha1.TimeInterval{{Weekdays: []string{"funday"}}, {}, {Months: []string{"smarch"}}}},
	}
	for _, tc := range []struct {
		name  string
		parse func() error
		want  []string
	}{
		{"matchers", func() error { _, err := Matchers(spec); return err }, []string{"matchers[0]", "matchers[2]"}},
		{"blockWhileFiring", func() error { _, err := GateMatchers(spec); return err }, []string{"blockWhileFiring[0]", "blockWhileFiring[2]"}},
		{"freeze", func() error { _, err := FreezeIntervals(spec.Freeze); return err }, []string{"freeze.timeIntervals[0]", "freeze.timeIntervals[2]"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.parse()
			require.Error(t, err)
			for _, w := range tc.want {
				assert.Contains(t, err.Error(), w)
			}
			assert.NotContains(t, err.Error(), "[1]", "a good entry is not named")
		})
	}

	good := &v1alpha1.RemediationRuleSpec{Matchers: []string{`severity="page"`}, BlockWhileFiring: []string{`alertname="Degraded"`}}
	ms, err := Matchers(good)
	require.NoError(t, err)
	assert.Len(t, ms, 1)
	sets, err := GateMatchers(good)
	require.NoError(t, err)
	assert.Len(t, sets, 1)
}
