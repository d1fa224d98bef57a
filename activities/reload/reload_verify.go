package reload

import (
	"context"

	"github.com/remedy-dev/remedy/internal/reloadrule"
)

// ReloadVerdict is what the live policies say about restarting one workload.
type ReloadVerdict struct {
	// Policies name the ConfigReloadPolicies that select the workload now.
	Policies []string `json:"policies"`
	// Approval combines their approval strictly.
	Approval reloadrule.ApprovalRule `json:"approval"`
}

// VerifyReload is the run's first step before it asks anyone or restarts:
// the workload exists, ConfigReloadPolicies select it, and each one's author
// still holds the grant to restart it. It tells the run whether any of them
// requires approval, whatever the run's input says. The write gate checks all
// of it again at the write; refusing here only keeps the run from asking a
// person about a restart that would be refused. A refusal leaves a Warning
// Event on the workload.
func (r *Reload) VerifyReload(ctx context.Context, in ChangesInput) (ReloadVerdict, error) {
	if err := r.Gate.Runs.Reload(ctx, in.Namespace, in.Kind, in.Name); err != nil {
		return ReloadVerdict{}, err
	}
	policies, err := r.Gate.ReloadGrants(ctx, in.Namespace, in.Kind, in.Name)
	if err != nil {
		if IsWorkloadGone(err) {
			return ReloadVerdict{}, err
		}
		if obj, readErr := r.workload(ctx, in.Namespace, in.Kind, in.Name); readErr == nil {
			return ReloadVerdict{}, r.refuse(ctx, obj, in.Kind, "Restart", "verify"+reloadrule.DescribeChanges(in.Changes), err)
		}
		return ReloadVerdict{}, err
	}
	v := ReloadVerdict{Approval: reloadrule.CombineApproval(policies)}
	for _, p := range policies {
		v.Policies = append(v.Policies, p.Name)
	}
	return v, nil
}
