package workflows

import (
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/remedy-dev/remedy/activities/reload"
	"github.com/remedy-dev/remedy/api/v1alpha1"
	"github.com/remedy-dev/remedy/internal/reloadrule"
)

// ReloadApprovalOf combines the approval of every policy selecting a
// workload with these labels: required if any requires it (the shortest
// timeout any of them sets), nil if none does.
func ReloadApprovalOf(policies []v1alpha1.ConfigReloadPolicy, workload map[string]string) *ReloadApproval {
	var selecting []v1alpha1.ConfigReloadPolicy
	for i := range policies {
		if reloadrule.Selects(&policies[i], workload) {
			selecting = append(selecting, policies[i])
		}
	}
	rule := reloadrule.CombineApproval(selecting)
	if !rule.Required {
		return nil
	}
	return &ReloadApproval{Timeout: rule.Timeout}
}

// Reload defaults, for inputs built without the CRD's defaulting.
const (
	defaultDebounce     = 5 * time.Second
	defaultMaxWait      = 5 * time.Minute
	defaultRetryInitial = time.Second
	defaultRetryMax     = 30 * time.Second
	// maxCyclesPerRun bounds the debounce-and-restart cycles of one run before it continues as new.
	maxCyclesPerRun = 50
	// maxReloadSignalsPerRun bounds the signals one run absorbs before it
	// continues as new: edits faster than the debounce add a few events each.
	maxReloadSignalsPerRun = 200
	reloadRestartDeadline  = 30 * time.Second
)

// ReloadInput identifies the workload and carries the policy's timing. The
// operator starts the workflow with it; a continued run also carries its
// debounce state (the changes still pending and the last restart).
type ReloadInput struct {
	Namespace string        `json:"namespace"`
	Kind      string        `json:"kind"`
	Name      string        `json:"name"`
	Scope     string        `json:"scope"`
	Debounce  time.Duration `json:"debounce"`
	// MaxWait bounds how far changes within the window push a pending restart.
	MaxWait      time.Duration `json:"maxWait,omitempty"`
	RetryInitial time.Duration `json:"retryInitial"`
	RetryMax     time.Duration `json:"retryMax"`
	// reloadDebounce is embedded flat: its fields keep their JSON names and
	// place, which continued runs since v0.1.0 have recorded. Other packages
	// set them after the literal (in.Pending = ...).
	reloadDebounce
	// Approval, when set, puts every restart to a person first.
	Approval *ReloadApproval `json:"approval,omitempty"`
	// Policy names the ConfigReloadPolicy, for the approval request's context.
	Policy string `json:"policy,omitempty"`
}

// ReloadStatus is what the status query returns.
type ReloadStatus struct {
	Pending []reloadrule.ConfigChange `json:"pending,omitempty"`
	// DueAt is when the pending changes restart the workload (RFC3339); a
	// change arriving before then pushes it, up to maxWait after the first.
	DueAt         string `json:"dueAt,omitempty"`
	Restarting    bool   `json:"restarting,omitempty"`
	LastRestart   string `json:"lastRestart,omitempty"`
	TotalRestarts int    `json:"totalRestarts"`
	LastError     string `json:"lastError,omitempty"`
	// ApprovalRequest names the RemediationApprovalRequest waiting for a decision.
	ApprovalRequest string `json:"approvalRequest,omitempty"`
}

// ReloadResult is the final status of one run.
type ReloadResult struct {
	Status ReloadStatus `json:"status"`
}

var reloadActs *reload.Reload

// reloadOptions retry a failed restart with the policy's bounded backoff and
// no attempt limit: a newer change cancels and supersedes the intent instead.
func reloadOptions(in ReloadInput) workflow.ActivityOptions {
	initial, max := in.RetryInitial, in.RetryMax
	if initial <= 0 {
		initial = defaultRetryInitial
	}
	if max < initial {
		max = defaultRetryMax
	}
	return workflow.ActivityOptions{
		StartToCloseTimeout: reloadRestartDeadline,
		RetryPolicy: &temporal.RetryPolicy{
			InitialInterval:        initial,
			BackoffCoefficient:     2,
			MaximumInterval:        max,
			NonRetryableErrorTypes: []string{v1alpha1.ReasonWorkloadGone, v1alpha1.ReasonInvalidParameters},
		},
	}
}

// ReloadWorkflow restarts one workload when the ConfigMaps it uses change,
// as a pending restart queue does. A change restarts the workload
// at once when its last restart is older than the debounce window (the
// leading edge); a change within the window schedules one trailing restart
// when the window closes, and each further change before then pushes it to
// a window after that change, but never later than maxWait after the first
// change it carries. Changes to any of the workload's ConfigMaps coalesce
// alike. The run ends when nothing is pending and the window since its last
// restart has passed; the operator's signal-with-start begins the next one.
func ReloadWorkflow(ctx workflow.Context, in ReloadInput) (ReloadResult, error) {
	r := &reloadRun{in: in, d: in.reloadDebounce, t: reloadTimingOf(in), sig: workflow.GetSignalChannel(ctx, SignalConfigChanged)}
	r.d.resume(workflow.Now(ctx))
	if err := workflow.SetQueryHandler(ctx, QueryStatus, func() (ReloadStatus, error) { return r.status(), nil }); err != nil {
		return ReloadResult{}, err
	}
	logger := workflow.GetLogger(ctx)
	for cycles := 0; ; cycles++ {
		r.drain(ctx)
		r.d.settle()
		if cycles >= maxCyclesPerRun || r.overBudget(ctx) || !r.hold(ctx) {
			return r.continueAsNew(ctx)
		}
		if len(r.d.Pending) == 0 {
			return ReloadResult{Status: r.status()}, nil
		}
		if err := r.verify(ctx); err != nil {
			return r.end(ctx, err)
		}
		if r.gated() {
			approved, err := r.approve(ctx)
			if err != nil {
				return r.end(ctx, err)
			}
			if !approved {
				continue
			}
		}
		superseded, err := r.restart(ctx)
		if superseded {
			logger.Info("newer change superseded the restart intent", "pending", len(r.d.Pending))
			continue
		}
		if err != nil {
			return r.end(ctx, err)
		}
	}
}
