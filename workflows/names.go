// Package workflows holds Remedy's workflow definitions. Everything here is
// deterministic: no I/O, no wall clock, no goroutines. The names and ID
// helpers are the Temporal contract that operator and webhook code import.
package workflows

import (
	"go.temporal.io/sdk/temporal"
)

// TaskQueue is the one task queue every Remedy worker polls.
const TaskQueue = "remedy"

// Signal, update and query names: the operator, the drift webhook, the
// receiver and the kubectl plugin send them.
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
