package workflows

import (
	"fmt"
	"strings"
	"time"

	"go.temporal.io/sdk/workflow"

	"github.com/remedy-dev/remedy/activities/gate"
	"github.com/remedy-dev/remedy/api/v1alpha1"
	"github.com/remedy-dev/remedy/internal/actions"
)

// checkSteps puts every step through the checks its own run starts with,
// before the first step writes anything: parameters and condition modules,
// the requester's grant, the action's RBAC, the target's existence, the
// safety policy and, where the step or the policy asks for one, a
// server-side dry-run. The first step that fails them fails the request with
// nothing written. Each step's run checks again right before its own write,
// since earlier steps and time change what it finds, and waits there for its
// approval. Each group of checks runs for all steps at once, as local
// activities (they change nothing); results are taken in step order.
func (r *remediationRun) checkSteps(ctx workflow.Context) bool {
	steps := r.in.Spec.Steps
	r.setPhase(ctx, v1alpha1.PhaseValidating, "Validating", fmt.Sprintf("checking all %d steps before the first write", len(steps)))
	lctx := workflow.WithLocalActivityOptions(ctx, checkOptions)
	token := workflow.GetInfo(ctx).WorkflowStartTime.UTC().Format(time.RFC3339)
	reqs := make([]actions.Request, len(steps))
	for i, s := range steps {
		reqs[i] = actions.Request{Action: s.Execution.Action, Target: s.Execution.Target, Token: token, Requester: r.in.Spec.Requester}
		if s.Execution.Parameters != nil {
			reqs[i].Params = *s.Execution.Parameters
		}
	}
	each := func(fn any, args func(i int) []any) []workflow.Future {
		fs := make([]workflow.Future, len(steps))
		for i := range steps {
			fs[i] = workflow.ExecuteLocalActivity(lctx, fn, args(i)...)
		}
		return fs
	}

	// First what reads no target: the spec and the requester's grant.
	specs := each(validation.CheckSpec, func(i int) []any { return []any{steps[i].Execution, reqs[i]} })
	grants := each(validation.CheckRequester, func(i int) []any {
		return []any{gate.RequesterCheck{Namespace: r.in.Namespace, Requester: r.in.Spec.Requester, Action: reqs[i].Action, Target: reqs[i].Target}}
	})
	for i := range steps {
		if err := specs[i].Get(ctx, nil); err != nil {
			return r.refuse(ctx, i, reasonOf(err, v1alpha1.ReasonInvalidParameters), messageOf(err))
		}
		if err := grants[i].Get(ctx, nil); err != nil {
			return r.refuse(ctx, i, reasonOf(err, v1alpha1.ReasonForbidden), messageOf(err))
		}
	}

	// Then the action's RBAC, the target and the policy.
	one := func(i int) []any { return []any{reqs[i]} }
	rbac, targets, policies := each(validation.CheckRBAC, one), each(executionActs.InspectTarget, one), each(validation.EvaluatePolicy, one)
	var dryRuns []int
	for i, s := range steps {
		if err := rbac[i].Get(ctx, nil); err != nil {
			return r.refuse(ctx, i, reasonOf(err, v1alpha1.ReasonForbidden), messageOf(err))
		}
		if err := targets[i].Get(ctx, nil); err != nil {
			return r.refuse(ctx, i, reasonOf(err, v1alpha1.ReasonNotFound), messageOf(err))
		}
		var pol gate.PolicyResult
		if err := policies[i].Get(ctx, &pol); err != nil {
			return r.refuse(ctx, i, reasonOf(err, v1alpha1.ReasonPolicyDenied), messageOf(err))
		}
		if !pol.Validation.Allowed {
			return r.refuse(ctx, i, v1alpha1.ReasonPolicyDenied, strings.Join(pol.Validation.Messages, "; "))
		}
		if s.Execution.DryRun || pol.Validation.RequiredDryRun {
			dryRuns = append(dryRuns, i)
		}
	}

	// Last the dry-runs the steps or the policy ask for.
	fs := make([]workflow.Future, len(dryRuns))
	for j, i := range dryRuns {
		fs[j] = workflow.ExecuteLocalActivity(lctx, executionActs.DryRun, reqs[i])
	}
	for j, i := range dryRuns {
		if err := fs[j].Get(ctx, nil); err != nil {
			return r.refuse(ctx, i, reasonOf(err, v1alpha1.ReasonDryRunFailed), r.dryRunFailure(ctx, lctx, reqs[i], err))
		}
	}
	return true
}

// refuse fails the request for step i's failed check, before anything was written.
func (r *remediationRun) refuse(ctx workflow.Context, i int, reason, msg string) bool {
	s := &r.st.Steps[i]
	s.Phase, s.Reason, s.Message = v1alpha1.PhaseFailed, reason, capMessage(msg)
	r.st.CurrentStep = int32(i + 1)
	r.setPhase(ctx, v1alpha1.PhaseFailed, reason, "step "+s.Name+": "+msg+"; every step is checked before the first write, so nothing was changed")
	return false
}
