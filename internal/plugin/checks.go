package plugin

import (
	"fmt"
	"strings"

	"github.com/remedy-dev/remedy/api/v1alpha1"
)

// Check is one validation step of a run as status.validationResults records it.
type Check struct {
	Name, Result string
	// Failed: this check stopped the run (an optional condition that did not
	// hold is shown but did not).
	Failed bool
}

// Checks lists the recorded validation steps in the order the run takes them.
func Checks(vr *v1alpha1.ValidationResults) []Check {
	if vr == nil {
		return nil
	}
	var out []Check
	flag := func(name string, v *bool, ok, bad string) {
		if v != nil {
			out = append(out, Check{Name: name, Result: map[bool]string{true: ok, false: bad}[*v], Failed: !*v})
		}
	}
	flag("parameters", vr.ParameterValidation, "valid", "invalid")
	flag("requester", vr.RequesterValidation, "may run the action", "may not run the action")
	flag("rbac", vr.RBACValidation, "the action's ServiceAccount holds every verb", "the action's ServiceAccount lacks a verb")
	flag("target", vr.ResourceExists, "exists", "not found")
	if p := vr.PolicyValidation; p != nil {
		c := Check{Name: "policy " + p.PolicyName, Result: "allowed", Failed: !p.Allowed}
		if !p.Allowed {
			c.Result = "denied"
		}
		var notes []string
		if p.RequiredApproval {
			notes = append(notes, "requires approval")
		}
		if p.RequiredDryRun {
			notes = append(notes, "requires a dry-run")
		}
		if len(notes) > 0 {
			c.Result += " (" + strings.Join(notes, ", ") + ")"
		}
		if len(p.Messages) > 0 {
			c.Result += ": " + strings.Join(p.Messages, "; ")
		}
		out = append(out, c)
	}
	if d := vr.DryRunResults; d != nil && d.Performed {
		c := Check{Name: "dry-run", Result: "succeeded", Failed: !d.Success}
		if !d.Success {
			c.Result = "refused"
		}
		if d.EstimatedImpact != "" {
			c.Result += ": " + d.EstimatedImpact
		}
		if len(d.Warnings) > 0 {
			c.Result += " (" + strings.Join(d.Warnings, "; ") + ")"
		}
		out = append(out, c)
	}
	out = append(out, conditionChecks("precondition", vr.PreConditionResults)...)
	return append(out, conditionChecks("postcondition", vr.PostConditionResults)...)
}

func conditionChecks(kind string, rs []v1alpha1.ConditionResult) []Check {
	out := make([]Check, 0, len(rs))
	for _, r := range rs {
		c := Check{Name: kind + " " + r.Name, Result: "held", Failed: !r.Passed && r.Required}
		if Evaluating(r) {
			out = append(out, Check{Name: c.Name, Result: r.Message})
			continue
		}
		if !r.Passed {
			c.Result = "did not hold"
		}
		if !r.Required {
			c.Result += " (optional)"
		}
		if r.Attempts > 1 {
			c.Result += fmt.Sprintf(" after %d attempts", r.Attempts)
		}
		if r.Message != "" {
			c.Result += ": " + r.Message
		}
		out = append(out, c)
	}
	return out
}

// Evaluating reports whether the run is still evaluating the condition: the
// workflow records it before its first attempt, without attempts or a time.
func Evaluating(r v1alpha1.ConditionResult) bool {
	return r.Attempts == 0 && r.EvaluatedAt == nil
}

// FailingCheck is the first check that stopped the run, if one did.
func FailingCheck(vr *v1alpha1.ValidationResults) (Check, bool) {
	for _, c := range Checks(vr) {
		if c.Failed {
			return c, true
		}
	}
	return Check{}, false
}
