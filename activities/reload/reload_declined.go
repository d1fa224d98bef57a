package reload

import (
	"context"
	"fmt"
	"maps"

	"go.temporal.io/sdk/activity"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/remedy-dev/remedy/activities/gate"
	"github.com/remedy-dev/remedy/api/v1alpha1"
	"github.com/remedy-dev/remedy/internal/metrics"
	"github.com/remedy-dev/remedy/internal/reloadrule"
)

// ChangesInput names a workload and the changes pending for it.
type ChangesInput struct {
	Namespace string                    `json:"namespace"`
	Kind      string                    `json:"kind"`
	Name      string                    `json:"name"`
	Changes   []reloadrule.ConfigChange `json:"changes"`
}

// ApprovalCheck says what of a pending set needs a person's decision.
type ApprovalCheck struct {
	// Declined are the changes already declined: they are not asked about again.
	Declined []reloadrule.ConfigChange `json:"declined,omitempty"`
	// Current is true when the pod template already carries every other
	// change, so a restart would roll nothing and needs no approval.
	Current bool `json:"current,omitempty"`
}

// CheckApproval reads the workload before a restart is put to a person.
func (r *Reload) CheckApproval(ctx context.Context, in ChangesInput) (ApprovalCheck, error) {
	obj, err := r.workload(ctx, in.Namespace, in.Kind, in.Name)
	if err != nil {
		return ApprovalCheck{}, err
	}
	// Nobody is asked about a restart that would be refused.
	if err := r.guard(ctx, obj, in.Kind, "Restart", reloadrule.DescribeChanges(in.Changes)); err != nil {
		return ApprovalCheck{}, err
	}
	template, _, _ := unstructured.NestedStringMap(obj.Object, "spec", "template", "metadata", "annotations")
	declined := reloadrule.ParseDeclined(obj.GetAnnotations()[v1alpha1.DeclinedAnnotation])
	check := ApprovalCheck{Current: true}
	for _, c := range in.Changes {
		switch {
		case declined.ConfigMaps[c.ConfigMap] == c.Hash:
			check.Declined = append(check.Declined, c)
		case template[v1alpha1.ConfigHashAnnotation(c.ConfigMap)] != c.Hash:
			check.Current = false
		}
	}
	return check, nil
}

// DeclineInput is a restart a person rejected, or let expire.
type DeclineInput struct {
	Namespace string                    `json:"namespace"`
	Kind      string                    `json:"kind"`
	Name      string                    `json:"name"`
	Scope     string                    `json:"scope"`
	Changes   []reloadrule.ConfigChange `json:"changes"`
	Request   string                    `json:"request"`
	Decision  gate.Decision             `json:"decision"`
	// Policy names the ConfigReloadPolicy the run was started for.
	Policy string `json:"policy,omitempty"`
}

// DeclineReload records the declined hashes in the workload's metadata (not
// the pod template: nothing rolls), a Warning Event and the declined metric.
// The write gate re-reads the request's decision first. The patch carries the resourceVersion it read, so it never overwrites the
// operator's clean-up of stale entries; a conflict is retried.
func (r *Reload) DeclineReload(ctx context.Context, in DeclineInput) error {
	obj, err := r.workload(ctx, in.Namespace, in.Kind, in.Name)
	if err != nil {
		return err
	}
	declined := reloadrule.ParseDeclined(obj.GetAnnotations()[v1alpha1.DeclinedAnnotation])
	before := maps.Clone(declined.ConfigMaps)
	for _, c := range in.Changes {
		declined.ConfigMaps[c.ConfigMap] = c.Hash
	}
	if maps.Equal(before, declined.ConfigMaps) && declined.Request == in.Request {
		// A retry after the patch landed: the Event and metric were handled then.
		return nil
	}
	declined.Request, declined.Decision = in.Request, string(in.Decision.Decision)
	patch := map[string]any{"metadata": map[string]any{
		"resourceVersion": obj.GetResourceVersion(),
		"annotations":     map[string]string{v1alpha1.DeclinedAnnotation: declined.Encode()},
	}}
	client, err := r.pass(ctx, obj, in.Kind, "Decline", in.Request, in.Policy,
		gate.ReloadEvidence{Changes: in.Changes, ApprovalRequest: in.Request, Decline: true}, "")
	if err != nil {
		return err
	}
	if err := patchWorkload(ctx, client, in.Kind, in.Namespace, in.Name, patch); err != nil {
		return err
	}
	metrics.ReloadDeclined.WithLabelValues(in.Scope, string(in.Decision.Decision)).Inc()
	activity.GetLogger(ctx).Info("restart declined", "kind", in.Kind, "namespace", in.Namespace, "name", in.Name,
		"approvalRequest", in.Request, "decision", in.Decision.Decision, "changes", reloadrule.DescribeChanges(in.Changes))
	if err := r.declinedEvent(ctx, obj, in); err != nil {
		// The decline is recorded; a lost Event must not ask again.
		activity.GetLogger(ctx).Warn("decline event not recorded", "error", err)
	}
	return nil
}

// declinedEvent is named after the request, so a retry does not duplicate it.
func (r *Reload) declinedEvent(ctx context.Context, obj *unstructured.Unstructured, in DeclineInput) error {
	decided := v1alpha1.DecisionText(in.Decision.Decision, in.Decision.DecidedBy, in.Decision.Via)
	return r.workloadEvent(ctx, obj, in.Kind, "declined", in.Request, "Decline", "ReloadDeclined", corev1.EventTypeWarning,
		fmt.Sprintf("restart not made: %s %s (%s); ConfigMap data %s stays unrolled until it changes again",
			in.Request, decided, in.Decision.Message, reloadrule.DescribeChanges(in.Changes)))
}
