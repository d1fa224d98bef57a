package workflows

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/remedy-dev/remedy/activities/gate"
	"github.com/remedy-dev/remedy/activities/reload"
	"github.com/remedy-dev/remedy/api/v1alpha1"
	"github.com/remedy-dev/remedy/internal/reloadrule"
)

// ReloadApproval is the policy's spec.approval as the run started with it.
type ReloadApproval struct {
	// Timeout is spec.approval.timeout; 0 lets the namespace's remedy-config, then 15m, apply.
	Timeout time.Duration `json:"timeout,omitempty"`
}

// ReloadApprovalRequestName is the RAR of one ask: unique per ask (a RAR's
// spec is immutable), and distinct for workloads of different kinds that
// share a name. Names that would pass 253 characters are shortened with a
// digest of the full name.
func ReloadApprovalRequestName(kind, workload string, at time.Time) string {
	suffix := fmt.Sprintf("-%d", at.UnixMilli())
	prefix := "reload-" + strings.ToLower(kind) + "-"
	if room := 253 - len(prefix) - len(suffix); len(workload) > room {
		sum := sha256.Sum256([]byte(workload))
		workload = workload[:room-9] + "-" + hex.EncodeToString(sum[:])[:8]
	}
	return prefix + workload + suffix
}

// gated reports whether this run asks before restarting: when any policy
// selecting the workload requires it, as last verified, or the input asked
// for it.
func (r *reloadRun) gated() bool {
	return r.in.Approval != nil || r.rule.Required
}

// approve puts the pending changes to a person. It returns true when the
// restart may go ahead with exactly the pending changes; false when they
// were declined (recorded on the workload and dropped) or superseded by
// newer data (which the caller debounces and asks about again).
func (r *reloadRun) approve(ctx workflow.Context) (bool, error) {
	logger := workflow.GetLogger(ctx)
	r.approved = ""
	current, err := r.checkPending(ctx)
	if err != nil {
		return false, err
	}
	if len(r.d.Pending) == 0 || current {
		// Nothing left, or nothing that would roll: the restart only records the baseline.
		return len(r.d.Pending) > 0, nil
	}

	intent := r.d.intent()
	name := ReloadApprovalRequestName(r.in.Kind, r.in.Name, workflow.Now(ctx))
	ask := r.approvalAsk(ctx, name, intent)
	if r.approval == nil {
		r.approval = &approvalGate{}
	}
	d, err := r.approval.awaitDecision(ctx, ask)
	r.approvalRequest = ""
	switch {
	case errors.Is(err, errApprovalSuperseded):
		r.d.askSuperseded(workflow.Now(ctx))
		logger.Info("approval request superseded", "approvalRequest", name, "pending", reloadrule.DescribeChanges(r.d.Pending))
		return false, nil
	case err != nil && reasonOf(err, "") == v1alpha1.ReasonNotFound:
		// The workload (the RAR's owner) or the RAR went away while asking.
		return false, temporal.NewNonRetryableApplicationError(messageOf(err), v1alpha1.ReasonWorkloadGone, err)
	case err != nil:
		return false, err
	case d.Decision == v1alpha1.DecisionApproved:
		logger.Info("restart approved", "approvalRequest", name, "approver", d.DecidedBy, "via", d.Via)
		r.approved = name
		return true, nil
	}
	return false, r.decline(ctx, name, intent, d)
}

// checkPending drops the pending changes a person already declined, and
// reports whether the workload already runs what is left.
func (r *reloadRun) checkPending(ctx workflow.Context) (current bool, err error) {
	var check reload.ApprovalCheck
	err = workflow.ExecuteActivity(workflow.WithActivityOptions(ctx, quickOptions), reloadActs.CheckApproval, reload.ChangesInput{
		Namespace: r.in.Namespace, Kind: r.in.Kind, Name: r.in.Name, Changes: r.d.Pending,
	}).Get(ctx, &check)
	if err != nil {
		return false, fmt.Errorf("check pending changes: %w", err)
	}
	if len(check.Declined) > 0 {
		workflow.GetLogger(ctx).Info("not asking again about declined data", "changes", reloadrule.DescribeChanges(check.Declined))
		r.d.drop(check.Declined)
	}
	return check.Current, nil
}

// approvalAsk is the request named name about intent: the combined rule's
// policies and timeout, else the input's.
func (r *reloadRun) approvalAsk(ctx workflow.Context, name string, intent []reloadrule.ConfigChange) ApprovalAsk {
	target := v1alpha1.ObjectRef{APIVersion: "apps/v1", Kind: r.in.Kind, Namespace: r.in.Namespace, Name: r.in.Name}
	policy := "ConfigReloadPolicy"
	timeout := r.rule.Timeout
	switch {
	case len(r.rule.Policies) > 0:
		policy += "/" + strings.Join(r.rule.Policies, ",")
	case r.in.Policy != "":
		policy += "/" + r.in.Policy
	}
	if timeout == 0 && r.in.Approval != nil {
		timeout = r.in.Approval.Timeout
	}
	return ApprovalAsk{
		Namespace: r.in.Namespace, Name: name, Subject: target, Timeout: timeout,
		Context: v1alpha1.ApprovalContext{
			Reason: gate.ReloadApprovalReason(r.in.Kind, r.in.Namespace, r.in.Name, intent),
			Action: "restart", Target: target,
			PolicyEvaluation: &v1alpha1.PolicyEvaluation{PolicyName: policy, Decision: "require_approval"},
		},
		Opened: func(workflow.Context, time.Time) { r.approvalRequest = name },
		Superseded: func() string {
			if r.drain(ctx) {
				return "newer ConfigMap data arrived: " + reloadrule.DescribeChanges(r.d.Pending)
			}
			return ""
		},
	}
}

// decline records a person's refusal of intent on the workload and drops it;
// only a workload that is gone fails the run.
func (r *reloadRun) decline(ctx workflow.Context, name string, intent []reloadrule.ConfigChange, d gate.Decision) error {
	err := workflow.ExecuteActivity(workflow.WithActivityOptions(ctx, quickOptions), reloadActs.DeclineReload, reload.DeclineInput{
		Namespace: r.in.Namespace, Kind: r.in.Kind, Name: r.in.Name, Scope: r.in.Scope,
		Changes: intent, Request: name, Decision: d, Policy: r.in.Policy,
	}).Get(ctx, nil)
	if reload.IsWorkloadGone(err) {
		return err
	}
	if err != nil {
		// The decision stands either way; without the record the operator signals again and we ask again.
		workflow.GetLogger(ctx).Warn("decline not recorded on the workload", "approvalRequest", name, "error", err)
	}
	r.d.drop(intent)
	return nil
}
