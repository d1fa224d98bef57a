package v1alpha1

import (
	"errors"
	"fmt"
	"time"
)

// Duration is a string rather than metav1.Duration for two reasons: a typed
// Update writes back exactly what was read ("5m" stays "5m", so immutable
// specs still compare equal), and a bad value stored before validation
// existed fails only its own object's Parse, never the decoding of a List.
// The regular expression refuses a bad value with a clear message before
// duration() could fail with a runtime error; duration() bounds the range.

// Duration is a Go duration such as "30s", "5m" or "1h30m".
// +kubebuilder:validation:MaxLength=64
// +kubebuilder:validation:XValidation:rule="self.matches('^(0|(([0-9]+([.][0-9]*)?|[.][0-9]+)(ns|us|ms|s|m|h))+)$') && duration(self) >= duration('0s')",message="must be a duration such as 30s, 5m or 1h30m: a number and a unit (h, m, s, ms, us, ns) with no spaces"
type Duration string

// DurationOf renders d as a Duration.
func DurationOf(d time.Duration) *Duration {
	s := Duration(d.String())
	return &s
}

// Parse is the duration d says; nil is zero. Negative values are refused,
// as the schema refuses them.
func (d *Duration) Parse() (time.Duration, error) {
	if d == nil {
		return 0, nil
	}
	v, err := time.ParseDuration(string(*d))
	if err != nil {
		return 0, fmt.Errorf("%q is not a duration such as 30s, 5m or 1h30m: %w", string(*d), err)
	}
	if v < 0 {
		return 0, fmt.Errorf("%q is negative", string(*d))
	}
	return v, nil
}

// Or is the duration d says, or def when d is nil or does not parse.
// Callers check the object's durations first (ValidateDurations), so the
// fallback only serves specs built in code.
func (d *Duration) Or(def time.Duration) time.Duration {
	if v, err := d.Parse(); d != nil && err == nil {
		return v
	}
	return def
}

// durationField is one duration of a spec and the path that names it.
type durationField struct {
	path string
	d    *Duration
}

// checkDurations parses each field and joins the errors, each naming its field.
func checkDurations(fields []durationField) error {
	var errs []error
	for _, f := range fields {
		if _, err := f.d.Parse(); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", f.path, err))
		}
	}
	return errors.Join(errs...)
}

func (a *ApprovalSpec) durations(path string) []durationField {
	if a == nil {
		return nil
	}
	return []durationField{{path + ".timeout", a.Timeout}}
}

func (s *KubernetesExecutionSpec) durations(path string) []durationField {
	out := []durationField{{path + ".timeout", s.Timeout}, {path + ".rollbackWindow", s.RollbackWindow}}
	out = append(out, s.Approval.durations(path+".approval")...)
	for _, l := range []struct {
		name  string
		conds []Condition
	}{{"preConditions", s.PreConditions}, {"postConditions", s.PostConditions}} {
		for i, c := range l.conds {
			out = append(out, durationField{fmt.Sprintf("%s.%s[%d].timeout", path, l.name, i), c.Timeout})
		}
	}
	return out
}

// ValidateDurations parses every duration of the spec; the error names each bad field.
func (s *KubernetesExecutionSpec) ValidateDurations() error {
	return checkDurations(s.durations("spec"))
}

// ValidateDurations parses every duration of every step; the error names each bad field.
func (s *RemediationRequestSpec) ValidateDurations() error {
	var fields []durationField
	for i := range s.Steps {
		fields = append(fields, s.Steps[i].Execution.durations(fmt.Sprintf("spec.steps[%d].execution", i))...)
	}
	return checkDurations(fields)
}

// ValidateDurations parses every duration of the policy; the error names each bad field.
func (s *ConfigReloadPolicySpec) ValidateDurations() error {
	fields := []durationField{{"spec.debounce", s.Debounce}, {"spec.maxWait", s.MaxWait}}
	if s.Retry != nil {
		fields = append(fields, durationField{"spec.retry.initialInterval", s.Retry.InitialInterval},
			durationField{"spec.retry.maxInterval", s.Retry.MaxInterval})
	}
	return checkDurations(append(fields, s.Approval.durations("spec.approval")...))
}
