package plugin

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/spf13/cobra"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/remedy-dev/remedy/api/v1alpha1"
)

func newWhyCommand(s *session) *cobra.Command {
	return s.readCommand("why [kexec|rr] NAME", "Explain a failed run: its reason, message and the check that stopped it",
		"  kubectl remedy why scale-ghost -n demo", s.why)
}

func (s *session) why(ctx context.Context, ref Ref) error {
	if ref.Kind == KindExecution {
		k := &v1alpha1.KubernetesExecution{}
		if err := s.get(ctx, ref, k); err != nil {
			return fmt.Errorf("why: %w", err)
		}
		s.explainExecution(ctx, s.out, k)
		return nil
	}
	rr := &v1alpha1.RemediationRequest{}
	if err := s.get(ctx, ref, rr); err != nil {
		return fmt.Errorf("why: %w", err)
	}
	st := rr.Status
	if st.Phase != v1alpha1.PhaseFailed {
		fmt.Fprintf(s.out, "%s in namespace %q has not failed: it is %s\n", ref, s.namespace, phaseText(st.Phase, st.Reason))
		return nil
	}
	fmt.Fprintf(s.out, "%s failed: %s\n", ref, st.Reason)
	fmt.Fprintf(s.out, "Message: %s\n", oneLine(st.Message))
	s.writeWhere(s.out, st.WorkflowID, st.Conditions)
	for _, step := range st.Steps {
		if step.Phase == v1alpha1.PhaseFailed && step.ExecutionRef == nil {
			fmt.Fprintf(s.out, "\nFailing step %s, checked before the first write (nothing was changed): %s: %s\n", step.Name, step.Reason, oneLine(step.Message))
			continue
		}
		if step.Phase != v1alpha1.PhaseFailed {
			continue
		}
		k := &v1alpha1.KubernetesExecution{}
		fmt.Fprintf(s.out, "\nFailing step %s:\n", step.Name)
		if err := s.get(ctx, Ref{KindExecution, step.ExecutionRef.Name}, k); err != nil {
			return fmt.Errorf("why: step %s: %w", step.Name, err)
		}
		s.explainExecution(ctx, s.out, k)
	}
	return nil
}

// explainExecution writes why an execution failed, or that it did not.
func (s *session) explainExecution(ctx context.Context, w io.Writer, k *v1alpha1.KubernetesExecution) {
	st := k.Status
	name := fmt.Sprintf("kexec/%s in namespace %q", k.Name, k.Namespace)
	if st.Phase != v1alpha1.PhaseFailed {
		fmt.Fprintf(w, "%s has not failed: it is %s\n", name, phaseText(st.Phase, st.Reason))
		return
	}
	fmt.Fprintf(w, "%s failed: %s\n", name, st.Reason)
	fmt.Fprintf(w, "Message: %s\n", oneLine(st.Message))
	if n := len(st.PhaseTransitions); n > 0 {
		last := st.PhaseTransitions[n-1]
		fmt.Fprintf(w, "Failed at: %s, in phase %s\n", last.Time.UTC().Format(time.RFC3339), lastActivePhase(st.PhaseTransitions))
	}
	switch c, ok := FailingCheck(st.ValidationResults); {
	case ok && oneLine(c.Result) == oneLine(st.Message):
		// A refused dry run records the same words as the message: once is enough.
		fmt.Fprintf(w, "Failing check: %s: the message above\n", c.Name)
	case ok:
		fmt.Fprintf(w, "Failing check: %s: %s\n", c.Name, oneLine(c.Result))
	case (st.Reason == v1alpha1.ReasonApprovalRejected || st.Reason == v1alpha1.ReasonApprovalExpired) && st.ApprovalRequestRef != nil:
		fmt.Fprintf(w, "Failing check: approval %s: %s\n", st.ApprovalRequestRef.Name, s.approvalText(ctx, k.Namespace, st.ApprovalRequestRef.Name))
	case st.ExecutionResults != nil && st.ExecutionResults.Logs != "":
		fmt.Fprintf(w, "Failing check: the write: %s\n", oneLine(st.ExecutionResults.Logs))
	default:
		fmt.Fprintf(w, "Failing check: none recorded in status.validationResults; the message above is the run's own account\n")
	}
	s.writeWhere(w, st.WorkflowID, st.Conditions)
}

// writeWhere writes the conditions that are not met and the Web UI link.
func (s *session) writeWhere(w io.Writer, workflowID string, conds []metav1.Condition) {
	for _, c := range conds {
		if c.Status == metav1.ConditionFalse && c.Type != v1alpha1.ConditionReady {
			fmt.Fprintf(w, "Condition %s=False (%s): %s\n", c.Type, c.Reason, oneLine(c.Message))
		}
	}
	if workflowID != "" {
		fmt.Fprintf(w, "Web UI: %s\n", WebUILink(s.webUI, s.temporalNS, workflowID))
	}
}

// lastActivePhase is the phase the run was in before it failed.
func lastActivePhase(ts []v1alpha1.PhaseTransition) v1alpha1.Phase {
	for i := len(ts) - 1; i >= 0; i-- {
		if !ts[i].Phase.Terminal() {
			return ts[i].Phase
		}
	}
	return v1alpha1.PhasePending
}
