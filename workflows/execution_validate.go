package workflows

import (
	"strings"

	"go.temporal.io/sdk/workflow"

	"github.com/remedy-dev/remedy/activities/gate"
	"github.com/remedy-dev/remedy/api/v1alpha1"
	"github.com/remedy-dev/remedy/internal/actions"
)

// validate runs the Validating phase in the order docs/concepts.md gives:
// parameters, requester, RBAC, existence, policy, preconditions, dry-run,
// then the approval gate. It returns the plan made from the before-image,
// or false when the run has failed. The dry-run comes after the
// preconditions, so a run they stop has computed and published nothing of
// the target's values (runs recorded before redactChange dry-run first, as
// they did).
func (r *executionRun) validate(ctx workflow.Context, req actions.Request) (actions.Plan, bool) {
	spec := r.in.Spec
	if !r.checkIdentity(ctx) {
		return actions.Plan{}, false
	}
	// The subject and the requester hold: read the target and the policy,
	// and ask whether the requester may read the target's values.
	r.redacts = workflow.GetVersion(ctx, redactChange, workflow.DefaultVersion, 1) >= 1
	r.early.startTarget(ctx, req, r.requesterCheck(spec.Action), r.redacts)
	before, pol, ok := r.checkTarget(ctx)
	if !ok {
		return actions.Plan{}, false
	}
	r.takeReadable(ctx)
	// The before-image already shows the desired state: nothing will be
	// written, so nothing needs a dry-run, preconditions or an approval.
	if before.NoOp {
		r.noChange(ctx, before.Change)
		return actions.Plan{}, false
	}
	var approval *gate.PolicyResult
	if pol.Validation.RequiredApproval || (spec.Approval != nil && spec.Approval.Required) {
		approval = &pol
	}
	dryRun := spec.DryRun || pol.Validation.RequiredDryRun
	if dryRun && !r.redacts && !r.dryRun(ctx, req) {
		return actions.Plan{}, false
	}
	if !r.preconditions(ctx) {
		return actions.Plan{}, false
	}
	if dryRun && r.redacts && !r.dryRun(ctx, req) {
		return actions.Plan{}, false
	}
	if approval != nil && !r.awaitApproval(ctx, *approval) {
		return actions.Plan{}, false
	}
	return before, true
}

// checkIdentity takes the parameter and requester checks started with the
// subject's; false when the run has failed.
func (r *executionRun) checkIdentity(ctx workflow.Context) bool {
	spec := r.in.Spec
	vr := r.status.ValidationResults
	r.setPhase(ctx, v1alpha1.PhaseValidating, "Validating", "checking parameters")
	err := r.early.spec.Get(ctx, nil)
	vr.ParameterValidation = boolPtr(err == nil)
	if err != nil {
		r.fail(ctx, err, v1alpha1.ReasonInvalidParameters)
		return false
	}

	r.setPhase(ctx, v1alpha1.PhaseValidating, "Validating", "checking that "+orUnknown(requesterName(spec.Requester))+" may have "+spec.Action+" run")
	err = r.early.requester.Get(ctx, nil)
	vr.RequesterValidation = boolPtr(err == nil)
	if err != nil {
		r.fail(ctx, err, v1alpha1.ReasonForbidden)
		return false
	}
	return true
}

// checkTarget takes the RBAC, target and policy checks: it returns the
// target's before-image and the policy's answer, or false when the run has
// failed (the policy's denial included).
func (r *executionRun) checkTarget(ctx workflow.Context) (actions.Plan, gate.PolicyResult, bool) {
	as := actions.ServiceAccountName(r.in.Spec.Action)
	vr := r.status.ValidationResults
	r.setPhase(ctx, v1alpha1.PhaseValidating, "Validating", "checking RBAC of "+as)
	err := r.early.rbac.Get(ctx, nil)
	vr.RBACValidation = boolPtr(err == nil)
	if err != nil {
		r.fail(ctx, err, v1alpha1.ReasonForbidden)
		return actions.Plan{}, gate.PolicyResult{}, false
	}

	r.setPhase(ctx, v1alpha1.PhaseValidating, "Validating", "reading the target as "+as)
	var before actions.Plan
	err = r.early.target.Get(ctx, &before)
	if reasonOf(err, "") == v1alpha1.ReasonNotFound || err == nil {
		vr.ResourceExists = boolPtr(err == nil)
	}
	if err != nil {
		r.fail(ctx, err, v1alpha1.ReasonNotFound)
		return actions.Plan{}, gate.PolicyResult{}, false
	}

	r.setPhase(ctx, v1alpha1.PhaseValidating, "Validating", "evaluating the safety policy")
	var pol gate.PolicyResult
	if err := r.early.policy.Get(ctx, &pol); err != nil {
		r.fail(ctx, err, v1alpha1.ReasonPolicyDenied)
		return actions.Plan{}, gate.PolicyResult{}, false
	}
	vr.PolicyValidation = &pol.Validation
	if !pol.Validation.Allowed {
		r.setPhase(ctx, v1alpha1.PhaseFailed, v1alpha1.ReasonPolicyDenied, strings.Join(pol.Validation.Messages, "; "))
		return actions.Plan{}, gate.PolicyResult{}, false
	}
	return before, pol, true
}

// preconditions evaluates the spec's preconditions, if any; false when one
// that is required did not hold, or the run has failed.
func (r *executionRun) preconditions(ctx workflow.Context) bool {
	spec := r.in.Spec
	if len(spec.PreConditions) == 0 {
		return true
	}
	vr := r.status.ValidationResults
	r.setPhase(ctx, v1alpha1.PhaseValidating, "Validating", "evaluating preconditions")
	failed, err := r.conditions(ctx, spec.PreConditions, &vr.PreConditionResults)
	results := vr.PreConditionResults
	if err != nil {
		r.fail(ctx, err, v1alpha1.ReasonInvalidParameters)
		return false
	}
	if failed != "" {
		r.setPhase(ctx, v1alpha1.PhaseFailed, v1alpha1.ReasonPreconditionFailed, "required precondition "+failed+" did not hold: "+lastMessage(results, failed))
		return false
	}
	return true
}

// dryRun sends the exact write as a server-side dry-run and records its
// impact as the requester may read it; false when the run has failed.
func (r *executionRun) dryRun(ctx workflow.Context, req actions.Request) bool {
	vr := r.status.ValidationResults
	r.setPhase(ctx, v1alpha1.PhaseValidating, "Validating", "server-side dry-run")
	var dry v1alpha1.DryRunResults
	if err := check(ctx, executionActs.DryRun, req).Get(ctx, &dry); err != nil {
		vr.DryRunResults = &v1alpha1.DryRunResults{Performed: true, Warnings: []string{capMessage(r.readable().Failure(err))}}
		r.failWrite(ctx, err, v1alpha1.ReasonDryRunFailed)
		return false
	}
	dry.EstimatedImpact = r.readable().Value(dry.EstimatedImpact)
	vr.DryRunResults = &dry
	return true
}

// conditions evaluates each condition in order into *results and names the
// first required one that failed. Before each condition it writes the status
// with the results so far and the condition as evaluating (no attempts, no
// evaluatedAt), so a run that polls its conditions shows where it is.
func (r *executionRun) conditions(ctx workflow.Context, conds []v1alpha1.Condition, results *[]v1alpha1.ConditionResult) (string, error) {
	*results = nil
	failed := ""
	for _, c := range conds {
		*results = append(*results, v1alpha1.ConditionResult{Name: c.Name, Required: c.Required,
			Message: "evaluating, for up to " + c.Timeout.Or(defaultConditionTimeout).String()})
		r.push(ctx)
		var res v1alpha1.ConditionResult
		opts := workflow.WithActivityOptions(ctx, conditionOptions(c))
		err := workflow.ExecuteActivity(opts, validation.EvaluateCondition, gate.ConditionRequest{Condition: c, Target: r.in.Spec.Target, Requester: r.in.Spec.Requester}).Get(ctx, &res)
		if err != nil {
			*results = (*results)[:len(*results)-1]
			return "", err
		}
		(*results)[len(*results)-1] = res
		if !res.Passed && res.Required && failed == "" {
			failed = c.Name
		}
	}
	return failed, nil
}

// warnings lists optional conditions that did not hold.
func (r *executionRun) warnings() string {
	var w []string
	for _, res := range append(append([]v1alpha1.ConditionResult{}, r.status.ValidationResults.PreConditionResults...), r.status.ValidationResults.PostConditionResults...) {
		if !res.Passed && !res.Required {
			w = append(w, "optional condition "+res.Name+" did not hold ("+res.Message+")")
		}
	}
	return strings.Join(w, "; ")
}

func lastMessage(results []v1alpha1.ConditionResult, name string) string {
	for _, r := range results {
		if r.Name == name {
			return r.Message
		}
	}
	return ""
}
