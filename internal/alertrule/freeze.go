package alertrule

import (
	"encoding/json"
	"errors"
	"fmt"
	"time"

	amlabels "github.com/prometheus/alertmanager/pkg/labels"
	"github.com/prometheus/alertmanager/timeinterval"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/remedy-dev/remedy/api/v1alpha1"
)

// maxFreezeScan bounds how far ahead FrozenUntil looks for the end of a
// freeze: a calendar frozen for longer is checked again after it.
const maxFreezeScan = 366 * 24 * time.Hour

// FreezeIntervals parses a freeze calendar with Alertmanager's own
// time_intervals parser, so a rule's window means what it means in
// Alertmanager's configuration. The error names every interval that does
// not parse.
func FreezeIntervals(f *v1alpha1.FreezeSpec) ([]timeinterval.TimeInterval, error) {
	if f == nil {
		return nil, nil
	}
	out := make([]timeinterval.TimeInterval, 0, len(f.TimeIntervals))
	var errs []error
	for i, ti := range f.TimeIntervals {
		parsed, err := parseInterval(ti)
		if err != nil {
			errs = append(errs, fmt.Errorf("freeze.timeIntervals[%d]: %w", i, err))
		}
		out = append(out, parsed)
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return out, nil
}

func parseInterval(ti v1alpha1.TimeInterval) (timeinterval.TimeInterval, error) {
	var out timeinterval.TimeInterval
	raw, err := json.Marshal(ti)
	if err != nil {
		return out, fmt.Errorf("encode time interval: %w", err)
	}
	if err := json.Unmarshal(raw, &out); err != nil {
		return out, fmt.Errorf("parse time interval: %w", err)
	}
	return out, nil
}

// FrozenUntil reports whether now is inside any of the intervals and, if
// so, the first minute that is inside none (intervals have minute
// resolution). A freeze longer than a year ends, for this answer, a year on.
func FrozenUntil(ivs []timeinterval.TimeInterval, now time.Time) (time.Time, bool) {
	inside := func(t time.Time) bool {
		for _, iv := range ivs {
			if iv.ContainsTime(t) {
				return true
			}
		}
		return false
	}
	if !inside(now) {
		return time.Time{}, false
	}
	start := now.Truncate(time.Minute)
	end := start.Add(maxFreezeScan)
	for t := start; t.Before(end); t = t.Add(time.Minute) {
		if !inside(t) {
			return t, true
		}
	}
	return end, true
}

// GateMatchers parses the rule's blockWhileFiring matchers, one set per
// entry; the error names every entry that does not parse.
func GateMatchers(spec *v1alpha1.RemediationRuleSpec) ([]amlabels.Matchers, error) {
	var out []amlabels.Matchers
	var errs []error
	for i, s := range spec.BlockWhileFiring {
		ms, err := amlabels.ParseMatchers(s)
		switch {
		case err != nil:
			errs = append(errs, fmt.Errorf("blockWhileFiring[%d] %q: %w", i, s, err))
		case len(ms) == 0:
			errs = append(errs, fmt.Errorf("blockWhileFiring[%d] %q: no matcher", i, s))
		}
		out = append(out, ms)
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return out, nil
}

// DefaultSilence is how long a rule's silence lasts when it does not say.
const DefaultSilence = 10 * time.Minute

// checkGates refuses, naming the field, a freeze calendar Alertmanager
// would not parse and a gate matcher it would not parse.
func checkGates(spec *v1alpha1.RemediationRuleSpec) field.ErrorList {
	var errs field.ErrorList
	if spec.Freeze != nil {
		p := field.NewPath("spec", "freeze", "timeIntervals")
		for i, ti := range spec.Freeze.TimeIntervals {
			if _, err := parseInterval(ti); err != nil {
				errs = append(errs, field.Invalid(p.Index(i), ti, "not an Alertmanager time interval: "+err.Error()))
			}
		}
	}
	for i, s := range spec.BlockWhileFiring {
		ms, err := amlabels.ParseMatchers(s)
		if err == nil && len(ms) == 0 {
			err = fmt.Errorf("no matcher")
		}
		if err != nil {
			errs = append(errs, field.Invalid(field.NewPath("spec", "blockWhileFiring").Index(i), s, "not an Alertmanager matcher: "+err.Error()))
		}
	}
	if spec.Silence != nil && spec.Silence.Enabled {
		if d, err := spec.Silence.Duration.Parse(); err != nil || spec.Silence.Duration != nil && (d < 10*time.Second || d > 24*time.Hour) {
			errs = append(errs, field.Invalid(field.NewPath("spec", "silence", "duration"), spec.Silence.Duration, "a silence lasts from 10s to 24h"))
		}
	}
	return errs
}
