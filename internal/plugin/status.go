package plugin

import (
	"context"
	"fmt"
	"io"
	"net/url"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	ctrlclient "sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/remedy-dev/remedy/api/v1alpha1"
)

func newStatusCommand(s *session) *cobra.Command {
	return s.readCommand("status (kexec|rr) NAME", "Show a run's phase timeline, validation results, approval and Web UI link",
		"  kubectl remedy status kexec scale-web -n demo", s.status)
}

// WebUILink is the Temporal Web UI's workflow list filtered to one workflow ID.
func WebUILink(base, namespace, workflowID string) string {
	return fmt.Sprintf("%s/namespaces/%s/workflows?query=%s", strings.TrimRight(base, "/"),
		url.PathEscape(namespace), url.QueryEscape("WorkflowId='"+workflowID+"'"))
}

func (s *session) status(ctx context.Context, ref Ref) error {
	w := tabwriter.NewWriter(s.out, 0, 4, 2, ' ', 0)
	defer w.Flush()
	if ref.Kind == KindExecution {
		k := &v1alpha1.KubernetesExecution{}
		if err := s.get(ctx, ref, k); err != nil {
			return fmt.Errorf("status: %w", err)
		}
		s.writeExecution(ctx, w, k)
		return nil
	}
	rr := &v1alpha1.RemediationRequest{}
	if err := s.get(ctx, ref, rr); err != nil {
		return fmt.Errorf("status: %w", err)
	}
	st := rr.Status
	fmt.Fprintf(w, "RemediationRequest\t%s/%s\n", rr.Namespace, rr.Name)
	if a := rr.Spec.Alert; a != nil {
		fmt.Fprintf(w, "Alert:\t%s (rule %s, fingerprint %s)\n", alertLabels(a.Labels), a.Rule, a.Fingerprint)
		if a.GeneratorURL != "" {
			fmt.Fprintf(w, "Generator:\t%s\n", a.GeneratorURL)
		}
		writeRunbook(w, a.RunbookURL, a.Summary)
		s.writeAlertRun(ctx, w, rr)
	}
	fmt.Fprintf(w, "Phase:\t%s\n", phaseText(st.Phase, st.Reason))
	s.writeRun(w, st.Message, st.WorkflowID)
	fmt.Fprintf(w, "Steps:\n  STEP\tEXECUTION\tPHASE\tROLLBACK\n")
	for _, step := range st.Steps {
		exec := "-"
		if step.ExecutionRef != nil {
			exec = step.ExecutionRef.Name
		}
		fmt.Fprintf(w, "  %s\t%s\t%s\t%s\n", step.Name, exec, phaseText(step.Phase, step.Reason), stepRollbackText(step))
	}
	for _, step := range st.Steps {
		if step.ExecutionRef == nil {
			continue
		}
		k := &v1alpha1.KubernetesExecution{}
		fmt.Fprintln(w)
		if err := s.get(ctx, Ref{KindExecution, step.ExecutionRef.Name}, k); err != nil {
			fmt.Fprintf(w, "Step %s:\t%v\n", step.Name, err)
			continue
		}
		s.writeExecution(ctx, w, k)
	}
	return nil
}

// writeExecution writes one execution's status: phase, run, timeline,
// validation, approval and rollback.
func (s *session) writeExecution(ctx context.Context, w io.Writer, k *v1alpha1.KubernetesExecution) {
	st := k.Status
	t := k.Spec.Target
	fmt.Fprintf(w, "KubernetesExecution\t%s/%s\n", k.Namespace, k.Name)
	fmt.Fprintf(w, "Action:\t%s %s %s\n", k.Spec.Action, t.Kind, strings.TrimPrefix(t.Namespace+"/"+t.Name, "/"))
	if st.Requester != "" {
		fmt.Fprintf(w, "Requester:\t%s\n", st.Requester)
	}
	fmt.Fprintf(w, "Phase:\t%s\n", phaseText(st.Phase, st.Reason))
	s.writeRun(w, st.Message, st.WorkflowID)
	if len(st.PhaseTransitions) > 0 {
		fmt.Fprintf(w, "Timeline:\n  TIME\tAFTER\tPHASE\tREASON\tMESSAGE\n")
		first := st.PhaseTransitions[0].Time.Time
		for _, p := range st.PhaseTransitions {
			fmt.Fprintf(w, "  %s\t+%s\t%s\t%s\t%s\n", p.Time.UTC().Format(time.RFC3339), After(p.Time.Sub(first)), p.Phase, p.Reason, oneLine(p.Message))
		}
	}
	if checks := Checks(st.ValidationResults); len(checks) > 0 {
		fmt.Fprintf(w, "Validation:\n")
		for _, c := range checks {
			fmt.Fprintf(w, "  %s\t%s\n", c.Name, oneLine(c.Result))
		}
	}
	if ref := st.ApprovalRequestRef; ref != nil {
		fmt.Fprintf(w, "Approval:\t%s: %s\n", ref.Name, s.approvalText(ctx, k.Namespace, ref.Name))
	}
	if text := rollbackText(k); text != "" {
		fmt.Fprintf(w, "Rollback:\t%s\n", text)
	}
}

// rollbackText says whether the run can still be rolled back: only a run in
// RollbackReady can, and an ended run says what became of its rollback.
func rollbackText(k *v1alpha1.KubernetesExecution) string {
	st := k.Status
	rb := st.RollbackInformation
	if rb == nil {
		return ""
	}
	inverse := rb.RollbackAction + rollbackParams(rb.RollbackParameters)
	switch {
	case !rb.Available:
		return "none: " + rb.Reason
	case st.Phase == v1alpha1.PhaseRollbackReady && k.Spec.RemediationRequestRef != nil:
		return "available (" + inverse + ") until RemediationRequest " + k.Spec.RemediationRequestRef.Name + " ends"
	case st.Phase == v1alpha1.PhaseRollbackReady:
		return "available (" + inverse + ")"
	case st.Reason == v1alpha1.ReasonRolledBack:
		return "done: rolled back (" + inverse + ")"
	case st.Reason == v1alpha1.ReasonRollbackFailed:
		return "failed (" + inverse + "): " + oneLine(st.Message)
	case k.Spec.RemediationRequestRef != nil:
		return "closed: RemediationRequest " + k.Spec.RemediationRequestRef.Name + " ended and kept this change (" + inverse + " is no longer offered)"
	case st.Phase.Terminal():
		return "closed: the run has ended, so its rollback window is over (" + inverse + " is no longer offered)"
	}
	return "captured (" + inverse + "); offered once the run is RollbackReady"
}

// stepRollbackText says what became of a step's change when its request ended.
func stepRollbackText(step v1alpha1.StepStatus) string {
	switch step.Rollback {
	case v1alpha1.StepRolledBack:
		return "rolled back"
	case v1alpha1.StepRollbackFailed:
		return "FAILED: " + oneLine(step.Message)
	case v1alpha1.StepNoRollback:
		return "not undone: " + oneLine(step.Message)
	case v1alpha1.StepNothingToUndo:
		return "nothing to undo (no change)"
	case v1alpha1.StepKept:
		return "kept (rollbackPolicy)"
	}
	return "-"
}

// writeRun writes a run's message, workflow ID and Web UI link.
func (s *session) writeRun(w io.Writer, message, workflowID string) {
	if message != "" {
		fmt.Fprintf(w, "Message:\t%s\n", oneLine(message))
	}
	if workflowID != "" {
		fmt.Fprintf(w, "Workflow:\t%s\n", workflowID)
		fmt.Fprintf(w, "Web UI:\t%s\n", WebUILink(s.webUI, s.temporalNS, workflowID))
	}
}

// approvalText says who decided the request, or what it waits for.
func (s *session) approvalText(ctx context.Context, namespace, name string) string {
	var rar v1alpha1.RemediationApprovalRequest
	if err := s.kube.Get(ctx, ctrlclient.ObjectKey{Namespace: namespace, Name: name}, &rar); err != nil {
		return fmt.Sprintf("cannot read it: %v", err)
	}
	st := rar.Status
	switch {
	case st.Decision != "":
		return describeDecision(st)
	case st.RequestedDecision != nil:
		r := st.RequestedDecision
		return fmt.Sprintf("%s requested by %s at %s, on its way to the workflow", r.Decision, r.RequestedBy, r.RequestedAt.UTC().Format(time.RFC3339))
	}
	return fmt.Sprintf("waiting for a decision until %s%s (kubectl remedy approve|reject rar %s -n %s)",
		rar.Spec.RequiredBy.UTC().Format(time.RFC3339), distinctNote(rar.Spec.ApprovalContext), name, namespace)
}

// distinctNote names who may not approve, for a request that needs another
// approver than its requester.
func distinctNote(c v1alpha1.ApprovalContext) string {
	if !c.RequireDistinctApprover || c.Requester == "" {
		return ""
	}
	return " by an approver other than the requester " + c.Requester
}

func rollbackParams(p *v1alpha1.ActionParameters) string {
	if p == nil {
		return ""
	}
	switch {
	case p.Replicas != nil:
		return fmt.Sprintf(" to replicas %d", *p.Replicas)
	case p.Image != "":
		return fmt.Sprintf(" container %s to image %s", p.Container, p.Image)
	}
	return ""
}

// After renders the time since the first phase: to the millisecond under a
// second (most phases last less), to the hundredth under a minute, then to
// the second.
func After(d time.Duration) time.Duration {
	switch {
	case d < time.Second:
		return d.Round(time.Millisecond)
	case d < time.Minute:
		return d.Round(10 * time.Millisecond)
	}
	return d.Round(time.Second)
}

func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }

// alertLabels renders an alert's labels as Alertmanager shows them: {a="b", c="d"}, sorted.
func alertLabels(l map[string]string) string {
	keys := make([]string, 0, len(l))
	for k := range l {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, 0, len(keys))
	for _, k := range keys {
		parts = append(parts, fmt.Sprintf("%s=%q", k, l[k]))
	}
	return "{" + strings.Join(parts, ", ") + "}"
}

// writeAlertRun writes what the alert's run made of this request, as the
// rule records it: Running, Verifying, Verified, Ineffective, ... A person
// who may not read the rule sees why instead.
func (s *session) writeAlertRun(ctx context.Context, w io.Writer, rr *v1alpha1.RemediationRequest) {
	rule := &v1alpha1.RemediationRule{}
	if err := s.kube.Get(ctx, ctrlclient.ObjectKey{Namespace: rr.Namespace, Name: rr.Spec.Alert.Rule}, rule); err != nil {
		fmt.Fprintf(w, "Alert run:\tunknown: read RemediationRule %s/%s: %v\n", rr.Namespace, rr.Spec.Alert.Rule, err)
		return
	}
	if rec := alertRunOf(rule, rr.Name); rec != nil {
		fmt.Fprintf(w, "Alert run:\t%s\n", alertRunText(rec))
	}
}

// alertRunOf is the rule's record of the alert run that made the request
// named request, or nil once the rule no longer keeps it.
func alertRunOf(rule *v1alpha1.RemediationRule, request string) *v1alpha1.AlertRecord {
	for i, a := range rule.Status.Alerts {
		if a.Request == request {
			return &rule.Status.Alerts[i]
		}
	}
	return nil
}

func alertRunText(a *v1alpha1.AlertRecord) string {
	text := phaseText(v1alpha1.Phase(a.Phase), a.Reason)
	if a.Message != "" {
		text += ": " + oneLine(a.Message)
	}
	return text
}
