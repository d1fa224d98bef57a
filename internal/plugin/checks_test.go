package plugin

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/utils/ptr"

	"github.com/remedy-dev/remedy/api/v1alpha1"
)

func TestFailingCheck(t *testing.T) {
	for name, tc := range map[string]struct {
		vr   *v1alpha1.ValidationResults
		want string // "" when no check failed
	}{
		"none recorded": {},
		"all passed": {vr: &v1alpha1.ValidationResults{ParameterValidation: ptr.To(true), ResourceExists: ptr.To(true),
			PolicyValidation: &v1alpha1.PolicyValidation{PolicyName: "safety", Allowed: true}}},
		"target missing": {vr: &v1alpha1.ValidationResults{ParameterValidation: ptr.To(true), ResourceExists: ptr.To(false)},
			want: "target: not found"},
		"policy deny, verbatim": {vr: &v1alpha1.ValidationResults{ResourceExists: ptr.To(true),
			PolicyValidation: &v1alpha1.PolicyValidation{PolicyName: "remedy.safety", Messages: []string{"no scaling on Fridays"}}},
			want: "policy remedy.safety: denied: no scaling on Fridays"},
		"dry-run refused": {vr: &v1alpha1.ValidationResults{DryRunResults: &v1alpha1.DryRunResults{Performed: true, Warnings: []string{"bad image"}}},
			want: "dry-run: refused (bad image)"},
		"optional precondition does not stop the run": {vr: &v1alpha1.ValidationResults{PreConditionResults: []v1alpha1.ConditionResult{
			{Name: "soft", Message: "0 of 3"}, {Name: "hard", Required: true, Attempts: 4, Message: "1 of 3 available"}}},
			want: "precondition hard: did not hold after 4 attempts: 1 of 3 available"},
		"a precondition being evaluated has not failed": {vr: &v1alpha1.ValidationResults{PreConditionResults: []v1alpha1.ConditionResult{
			{Name: "ready", Required: true, Message: "evaluating, for up to 30s"}}}},
	} {
		t.Run(name, func(t *testing.T) {
			c, ok := FailingCheck(tc.vr)
			require.Equal(t, tc.want != "", ok, "%+v", c)
			if ok {
				assert.Equal(t, tc.want, c.Name+": "+c.Result)
			}
		})
	}
}

// A condition the workflow is still evaluating reads as such, not "did not hold".
func TestChecksEvaluating(t *testing.T) {
	checks := Checks(&v1alpha1.ValidationResults{PreConditionResults: []v1alpha1.ConditionResult{
		{Name: "ready", Required: true, Message: "evaluating, for up to 30s"}}})
	require.Len(t, checks, 1)
	assert.Equal(t, Check{Name: "precondition ready", Result: "evaluating, for up to 30s"}, checks[0])
}

// The timeline's AFTER shows phases that last less than a second.
func TestAfter(t *testing.T) {
	for _, tc := range []struct {
		d    time.Duration
		want string
	}{
		{0, "0s"},
		{412345 * time.Microsecond, "412ms"},
		{2414 * time.Millisecond, "2.41s"},
		{90*time.Second + 400*time.Millisecond, "1m30s"},
	} {
		assert.Equal(t, tc.want, After(tc.d).String())
	}
}
