// Package workflows holds Remedy's workflow definitions. Everything here is
// deterministic: no I/O, no wall clock, no goroutines. The names and ID
// helpers are the Temporal contract that operator and webhook code import.
package workflows

import (
	"fmt"

	"go.temporal.io/sdk/temporal"

	"github.com/remedy-dev/remedy/activities"
)

// TaskQueue is the one task queue every Remedy worker polls.
const TaskQueue = "remedy"

// Signal, update and query names (DESIGN §4).
const (
	SignalApprove       = "approve"
	SignalReject        = "reject"
	SignalDrift         = "drift"
	SignalConfigChanged = "config-changed"
	SignalRollback      = "rollback"
	// SignalStepReady goes from a step's execution workflow to its RemediationRequest's.
	SignalStepReady = "step-ready"
	// SignalFinalize tells a step's execution workflow to complete without rolling back.
	SignalFinalize = "finalize"
	UpdateDecide   = "decide"
	QueryStatus    = "status"
)

// Search attributes registered on every Temporal server Remedy uses.
var (
	AttrKind           = temporal.NewSearchAttributeKeyKeyword("RemedyKind")
	AttrTarget         = temporal.NewSearchAttributeKeyKeyword("RemedyTarget")
	AttrPhase          = temporal.NewSearchAttributeKeyKeyword("RemedyPhase")
	AttrApprovalStatus = temporal.NewSearchAttributeKeyKeyword("ApprovalStatus")
)

// SearchAttributeNames lists the Keyword attributes a server must have registered.
var SearchAttributeNames = []string{"RemedyKind", "RemedyTarget", "RemedyPhase", "ApprovalStatus", "RemedyRule", "RemedyAlert"}

// ExecutionWorkflowID is the deterministic ID of a KubernetesExecution's workflow.
func ExecutionWorkflowID(namespace, name, uid string) string {
	return fmt.Sprintf("kexec/%s/%s/%s", namespace, name, uid)
}

// RemediationWorkflowID is the deterministic ID of a RemediationRequest's workflow.
func RemediationWorkflowID(namespace, name, uid string) string {
	return fmt.Sprintf("rr/%s/%s/%s", namespace, name, uid)
}

// DriftWorkflowID is the deterministic ID of a drifted parent's workflow.
func DriftWorkflowID(parentUID string) string { return "drift/" + parentUID }

// ReloadWorkflowID is the deterministic ID of one workload's reload workflow.
func ReloadWorkflowID(namespace, kind, workload string) string {
	return activities.ReloadWorkflowID(namespace, kind, workload)
}
