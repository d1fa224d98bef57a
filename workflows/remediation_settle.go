package workflows

import (
	"fmt"
	"strings"

	"go.temporal.io/sdk/workflow"

	"github.com/remedy-dev/remedy/api/v1alpha1"
)

// rollsBack says whether the policy rolls the completed steps back after failure.
func rollsBack(policy v1alpha1.RollbackPolicy, failure string, postFailed bool) bool {
	switch {
	case failure == "" || policy == v1alpha1.RollbackNever:
		return false
	case policy == v1alpha1.RollbackOnRequiredPostConditionFailure:
		return postFailed
	default: // OnFailure, the default
		return true
	}
}

// settle ends the saga: every held step is rolled back or finalized, newest
// first and one at a time, so rollbacks apply in reverse order; then the
// request's final phase says what was undone and what was not.
func (r *remediationRun) settle(ctx workflow.Context, failure string, postFailed bool) error {
	rollBack := rollsBack(r.in.Spec.RollbackPolicy, failure, postFailed)
	signal := SignalFinalize
	if rollBack {
		signal = SignalRollback
		for _, run := range r.steps {
			if run.held {
				r.setPhase(ctx, v1alpha1.PhaseExecuting, v1alpha1.ReasonRollingBack, failure+"; rolling back the completed steps in reverse order")
				break
			}
		}
	}
	for i := len(r.steps) - 1; i >= 0; i-- {
		run := r.steps[i]
		if run.held {
			final, err := r.release(ctx, run, signal, failure)
			if err != nil {
				return err
			}
			run.final = &final
			r.record(run.index, final)
		}
		if failure != "" && run.final != nil {
			r.undone(run.index, *run.final, rollBack)
		}
		r.push(ctx)
	}
	r.finish(ctx, failure, postFailed, rollBack)
	return nil
}

// release sends a held step its decision and waits for its run to end. A
// step someone already rolled back by hand has ended: its result stands.
func (r *remediationRun) release(ctx workflow.Context, run *stepRun, signal, reason string) (v1alpha1.KubernetesExecutionStatus, error) {
	if !run.future.IsReady() {
		err := workflow.SignalExternalWorkflow(ctx, run.workflowID, "", signal, RollbackRequest{Requester: "RemediationRequest/" + r.in.Name, Reason: reason}).Get(ctx, nil)
		if err != nil {
			// The step may have ended on its own meanwhile; its future tells.
			workflow.GetLogger(ctx).Warn("signal step", "workflowID", run.workflowID, "signal", signal, "error", err.Error())
		}
	}
	var result ExecutionResult
	if err := FinalResult(run.future.Get(ctx, &result), &result); err != nil {
		return result.Status, fmt.Errorf("await step %s: %w", run.workflowID, err)
	}
	return result.Status, nil
}

// undone records what became of a step's change once the request failed.
func (r *remediationRun) undone(i int, s v1alpha1.KubernetesExecutionStatus, rollBack bool) {
	step := &r.st.Steps[i]
	switch {
	case s.Reason == v1alpha1.ReasonNoChange:
		step.Rollback = v1alpha1.StepNothingToUndo
	case s.Reason == v1alpha1.ReasonRolledBack:
		step.Rollback, step.RolledBack = v1alpha1.StepRolledBack, true
	case s.Reason == v1alpha1.ReasonRollbackFailed:
		step.Rollback = v1alpha1.StepRollbackFailed
	case s.Phase == v1alpha1.PhaseFailed && s.Reason != v1alpha1.ReasonPostConditionFailed:
		// It failed before its change: there is nothing of it to undo.
	case !rollBack:
		step.Rollback = v1alpha1.StepKept
	default:
		step.Rollback = v1alpha1.StepNoRollback
		if s.RollbackInformation != nil && s.RollbackInformation.Reason != "" {
			step.Message = capMessage(s.RollbackInformation.Reason)
		}
	}
}

// finish writes the final phase: what ran, and after a failure exactly what
// was rolled back and what was not.
func (r *remediationRun) finish(ctx workflow.Context, failure string, postFailed, rollBack bool) {
	n := len(r.in.Spec.Steps)
	if failure == "" {
		unchanged := 0
		for _, s := range r.st.Steps {
			if s.Reason == v1alpha1.ReasonNoChange {
				unchanged++
			}
		}
		if unchanged == n {
			r.setPhase(ctx, v1alpha1.PhaseCompleted, v1alpha1.ReasonNoChange, fmt.Sprintf("all %d steps found their targets already in the desired state; nothing was written", n))
			return
		}
		r.setPhase(ctx, v1alpha1.PhaseCompleted, v1alpha1.ReasonSucceeded, fmt.Sprintf("%d steps completed", n))
		return
	}
	by := map[v1alpha1.StepRollback][]string{}
	for i := len(r.st.Steps) - 1; i >= 0; i-- {
		s := r.st.Steps[i]
		name := s.Name
		if s.Rollback == v1alpha1.StepRollbackFailed || s.Rollback == v1alpha1.StepNoRollback {
			name += " (" + s.Message + ")"
		}
		by[s.Rollback] = append(by[s.Rollback], name)
	}
	var parts []string
	for _, p := range []struct {
		outcome v1alpha1.StepRollback
		text    string
	}{
		{v1alpha1.StepRolledBack, "rolled back, newest first: "},
		{v1alpha1.StepRollbackFailed, "could not roll back: "},
		{v1alpha1.StepNoRollback, "not undone, no inverse: "},
		{v1alpha1.StepNothingToUndo, "nothing to undo: "},
	} {
		if names := by[p.outcome]; len(names) > 0 {
			parts = append(parts, p.text+strings.Join(names, ", "))
		}
	}
	summary := strings.Join(parts, "; ")
	switch {
	case !rollBack && postFailed:
		r.setPhase(ctx, v1alpha1.PhaseFailed, v1alpha1.ReasonPostConditionFailed, failure+"; rollbackPolicy Never: nothing rolled back"+keptText(by))
	case !rollBack:
		r.setPhase(ctx, v1alpha1.PhaseFailed, v1alpha1.ReasonStepFailed, failure+"; rollbackPolicy "+string(r.in.Spec.RollbackPolicy)+": nothing rolled back"+keptText(by))
	case len(by[v1alpha1.StepRollbackFailed]) > 0:
		r.setPhase(ctx, v1alpha1.PhaseFailed, v1alpha1.ReasonRollbackFailed, failure+"; "+summary)
	case len(by[v1alpha1.StepNoRollback]) > 0:
		r.setPhase(ctx, v1alpha1.PhaseFailed, v1alpha1.ReasonRollbackIncomplete, failure+"; "+summary)
	case len(by[v1alpha1.StepRolledBack]) > 0:
		r.setPhase(ctx, v1alpha1.PhaseFailed, v1alpha1.ReasonRolledBack, failure+"; "+summary)
	default:
		r.setPhase(ctx, v1alpha1.PhaseFailed, v1alpha1.ReasonStepFailed, strings.TrimSuffix(failure+"; no completed step changed anything, so nothing was rolled back; "+summary, "; "))
	}
}

func keptText(by map[v1alpha1.StepRollback][]string) string {
	if kept := by[v1alpha1.StepKept]; len(kept) > 0 {
		return "; kept: " + strings.Join(kept, ", ")
	}
	return ""
}
