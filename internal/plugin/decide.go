package plugin

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/spf13/cobra"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrlclient "sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/remedy-dev/remedy/api/v1alpha1"
)

// approverHint says what deciding takes, for a refusal that does not say it.
const approverHint = `deciding needs the verb "approve" (and get) on remediationapprovalrequests.remedy.dev and patch on remediationapprovalrequests/status in the request's namespace; see deploy/rbac/approver-example.yaml`

func newDecideCommand(s *session, decision v1alpha1.Decision) *cobra.Command {
	verb := verbOf(decision)
	var message string
	var wait time.Duration
	cmd := &cobra.Command{
		Use:   verb + " [kexec|rr|rar] NAME",
		Short: strings.ToUpper(verb[:1]) + verb[1:] + " the open approval request of an execution, a remediation's waiting step, or a request",
		Long: `Patches the decision into the RemediationApprovalRequest's status, as
  kubectl patch rar NAME --subresource=status --type=merge -p '{"status":{"decision":"` + string(decision) + `"}}'
does: the approval webhook refuses it without the verb approve, and the operator
relays it to the waiting workflow. For a kexec NAME the request is NAME-approval;
for an rr the open request of its waiting step.`,
		Example: "  kubectl remedy " + verb + " kexec scale-web -n demo -m 'checked the dashboards'",
		RunE: s.runE(verb, []Kind{KindExecution, KindRemediation, KindApproval}, func(ctx context.Context, ref Ref) error {
			return s.decide(ctx, ref, decision, message, wait)
		}),
	}
	cmd.Flags().StringVarP(&message, "message", "m", "", "why: recorded as the decision's message")
	cmd.Flags().DurationVar(&wait, "wait", 0, "wait this long for the workflow to record the decision (0: return once the request accepted it)")
	return cmd
}

// withApproverHint adds what deciding takes to a refusal that does not name
// the approve verb (RBAC's, before the approval webhook is asked). The
// webhook's own refusals say why (no approve verb, an anonymous user, the
// requester approving a request that needs another approver): they go as they are.
func withApproverHint(err error) error {
	if apierrors.IsForbidden(err) && !strings.Contains(err.Error(), `"approve"`) && !strings.Contains(err.Error(), "admission webhook") {
		return fmt.Errorf("%w (%s)", err, approverHint)
	}
	return err
}

func verbOf(d v1alpha1.Decision) string {
	if d == v1alpha1.DecisionRejected {
		return "reject"
	}
	return "approve"
}

func (s *session) decide(ctx context.Context, ref Ref, decision v1alpha1.Decision, message string, wait time.Duration) error {
	verb := verbOf(decision)
	rar, err := s.approvalRequest(ctx, ref)
	if err != nil {
		return fmt.Errorf("%s %s: %w", verb, ref, withApproverHint(err))
	}
	name := fmt.Sprintf("rar/%s in namespace %q", rar.Name, s.namespace)
	if d := rar.Status.Decision; d != "" {
		return fmt.Errorf("%s %s: already decided: %s", verb, name, describeDecision(rar.Status))
	}
	status := map[string]any{"decision": decision}
	if message != "" {
		status["decisionMessage"] = message
	}
	patch, err := json.Marshal(map[string]any{"status": status})
	if err != nil {
		return fmt.Errorf("encode decision: %w", err)
	}
	if err := s.kube.Status().Patch(ctx, rar, ctrlclient.RawPatch(types.MergePatchType, patch)); err != nil {
		return fmt.Errorf("%s %s: %w", verb, name, withApproverHint(err))
	}
	by := "you"
	if r := rar.Status.RequestedDecision; r != nil {
		by = r.RequestedBy
	}
	fmt.Fprintf(s.out, "remediationapprovalrequest/%s: %s requested by %s; the operator relays it to workflow %s\n", rar.Name, decision, by, rar.Spec.WorkflowID)
	if wait <= 0 {
		return nil
	}
	return s.awaitDecision(ctx, rar, decision, by, wait)
}

// awaitDecision polls until the worker recorded the decision the workflow took.
func (s *session) awaitDecision(ctx context.Context, rar *v1alpha1.RemediationApprovalRequest, want v1alpha1.Decision, by string, wait time.Duration) error {
	if err := s.await(ctx, rar, wait, func() bool { return rar.Status.Decision != "" }); err != nil {
		return fmt.Errorf("wait for the decision of rar/%s: %w; status.requestedDecision holds yours meanwhile", rar.Name, err)
	}
	fmt.Fprintf(s.out, "remediationapprovalrequest/%s: %s\n", rar.Name, describeDecision(rar.Status))
	if rar.Status.Decision != want || rar.Status.DecidedBy != by || rar.Status.DecidedVia != v1alpha1.DecidedViaKubectl {
		return fmt.Errorf("rar/%s: another decision reached the workflow first (%s); yours did not count", rar.Name, describeDecision(rar.Status))
	}
	return nil
}

// describeDecision is "Approved by alice via kubectl at <time>: <message>".
func describeDecision(st v1alpha1.RemediationApprovalRequestStatus) string {
	s := v1alpha1.DecisionText(st.Decision, st.DecidedBy, st.DecidedVia)
	if st.DecidedAt != nil {
		s += " at " + st.DecidedAt.UTC().Format(time.RFC3339)
	}
	if st.DecisionMessage != "" {
		s += fmt.Sprintf(": %q", st.DecisionMessage)
	}
	return s
}

// approvalRequest finds the request ref asks about, reading only approval
// requests where it can, so an approver needs no other grant: a
// KubernetesExecution's request is named for it, a RemediationRequest's
// waiting step's request is owned by the RemediationRequest.
func (s *session) approvalRequest(ctx context.Context, ref Ref) (*v1alpha1.RemediationApprovalRequest, error) {
	rar := &v1alpha1.RemediationApprovalRequest{}
	switch ref.Kind {
	case KindApproval:
		return rar, s.get(ctx, ref, rar)
	case KindExecution:
		err := s.get(ctx, Ref{KindApproval, v1alpha1.ApprovalRequestName(ref.Name)}, rar)
		if apierrors.IsNotFound(err) {
			return nil, s.notWaiting(ctx, ref, err)
		}
		return rar, err
	}
	var list v1alpha1.RemediationApprovalRequestList
	if err := s.kube.List(ctx, &list, ctrlclient.InNamespace(s.namespace)); err != nil {
		return nil, fmt.Errorf("list approval requests in namespace %q: %w", s.namespace, err)
	}
	var decided *v1alpha1.RemediationApprovalRequest
	for i := range list.Items {
		r := &list.Items[i]
		if owner := metav1.GetControllerOf(r); owner == nil || owner.Kind != "RemediationRequest" || owner.Name != ref.Name {
			continue
		}
		if r.Status.Decision == "" {
			return r, nil
		}
		decided = r
	}
	if decided != nil {
		return decided, nil
	}
	return nil, s.notWaiting(ctx, ref, fmt.Errorf("no approval request of %s in namespace %q", ref, s.namespace))
}

// notWaiting explains why ref has no approval request, from its phase when
// the caller may read it.
func (s *session) notWaiting(ctx context.Context, ref Ref, cause error) error {
	var phase v1alpha1.Phase
	var reason string
	switch ref.Kind {
	case KindExecution:
		var k v1alpha1.KubernetesExecution
		if err := s.get(ctx, ref, &k); err != nil {
			return err
		}
		phase, reason = k.Status.Phase, k.Status.Reason
	case KindRemediation:
		var rr v1alpha1.RemediationRequest
		if err := s.get(ctx, ref, &rr); err != nil {
			return err
		}
		phase, reason = rr.Status.Phase, rr.Status.Reason
	default:
		return cause
	}
	return fmt.Errorf("%s in namespace %q is not waiting for approval: it is %s; a run asks only when spec.approval.required is set or the policy requires approval",
		ref, s.namespace, phaseText(phase, reason))
}

// phaseText is "Failed (PolicyDenied)", or "not started" for a run with no phase yet.
func phaseText(phase v1alpha1.Phase, reason string) string {
	if phase == "" {
		return "not started yet (no status.phase)"
	}
	if reason == "" || reason == string(phase) {
		return string(phase)
	}
	return fmt.Sprintf("%s (%s)", phase, reason)
}
