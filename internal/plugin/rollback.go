package plugin

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/types"
	ctrlclient "sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/remedy-dev/remedy/api/v1alpha1"
)

func newRollbackCommand(s *session) *cobra.Command {
	reason := "requested with kubectl remedy"
	var wait time.Duration
	cmd := &cobra.Command{
		Use:   "rollback [kexec] NAME",
		Short: "Roll back an execution that is RollbackReady",
		Long: `Sets the annotation remedy.dev/rollback=<message> on the execution, as
  kubectl annotate kexec NAME remedy.dev/rollback="<message>"
does: the requester webhook authorizes it for the inverse action and records
you in remedy.dev/rollback-requester, and the operator relays it to the workflow.`,
		Example: "  kubectl remedy rollback scale-web -n demo -m 'latency went up' --wait 1m",
		RunE: s.runE("rollback", []Kind{KindExecution}, func(ctx context.Context, ref Ref) error {
			return s.rollback(ctx, ref, reason, wait)
		}),
	}
	cmd.Flags().StringVarP(&reason, "message", "m", reason, "why: the rollback's reason")
	cmd.Flags().DurationVar(&wait, "wait", 0, "wait this long for the run to end (0: return once the request is accepted)")
	return cmd
}

func (s *session) rollback(ctx context.Context, ref Ref, reason string, wait time.Duration) error {
	k := &v1alpha1.KubernetesExecution{}
	if err := s.get(ctx, ref, k); err != nil {
		return fmt.Errorf("roll back: %w", err)
	}
	name := fmt.Sprintf("%s in namespace %q", ref, s.namespace)
	if prev, ok := k.Annotations[v1alpha1.RollbackAnnotation]; ok {
		return fmt.Errorf("roll back %s: already requested by %s (%q); it is %s", name,
			k.Annotations[v1alpha1.RollbackRequesterAnnotation], prev, phaseText(k.Status.Phase, k.Status.Reason))
	}
	switch {
	case k.Status.RollbackInformation != nil && !k.Status.RollbackInformation.Available:
		// Whatever the phase: a change with no inverse (a restart) never had a window.
		return fmt.Errorf("roll back %s: no rollback is available: %s", name, k.Status.RollbackInformation.Reason)
	case k.Status.Phase.Terminal() && k.Spec.RemediationRequestRef != nil:
		return fmt.Errorf("roll back %s: it has ended %s: a step's rollback is offered until its RemediationRequest %s ends, and that request has ended",
			name, phaseText(k.Status.Phase, k.Status.Reason), k.Spec.RemediationRequestRef.Name)
	case k.Status.Phase.Terminal():
		return fmt.Errorf("roll back %s: it has ended %s, so its rollback window is closed and nothing can roll it back", name, phaseText(k.Status.Phase, k.Status.Reason))
	case k.Status.Phase != v1alpha1.PhaseRollbackReady:
		return fmt.Errorf("roll back %s: it is %s; a rollback is accepted once it is RollbackReady", name, phaseText(k.Status.Phase, k.Status.Reason))
	}
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": map[string]string{v1alpha1.RollbackAnnotation: reason}}})
	if err != nil {
		return fmt.Errorf("encode rollback request: %w", err)
	}
	if err := s.kube.Patch(ctx, k, ctrlclient.RawPatch(types.MergePatchType, patch)); err != nil {
		return fmt.Errorf("roll back %s: %w", name, err)
	}
	fmt.Fprintf(s.out, "kubernetesexecution/%s: rollback requested by %s (%s)\n", k.Name, k.Annotations[v1alpha1.RollbackRequesterAnnotation], reason)
	if wait <= 0 {
		return nil
	}
	if err := s.await(ctx, k, wait, func() bool { return k.Status.Phase.Terminal() }); err != nil {
		return fmt.Errorf("wait for %s to end: %w (it is %s)", name, err, phaseText(k.Status.Phase, k.Status.Reason))
	}
	fmt.Fprintf(s.out, "kubernetesexecution/%s: %s: %s\n", k.Name, phaseText(k.Status.Phase, k.Status.Reason), k.Status.Message)
	if k.Status.Reason != v1alpha1.ReasonRolledBack {
		return fmt.Errorf("roll back %s: it ended %s: %s", name, phaseText(k.Status.Phase, k.Status.Reason), k.Status.Message)
	}
	return nil
}
