package workflows

import (
	"encoding/json"
	"time"

	"github.com/remedy-dev/remedy/activities/gate"
)

// DriftObjectRef names a drift's parent or child.
type DriftObjectRef struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Namespace  string `json:"namespace,omitempty"`
	Name       string `json:"name"`
	UID        string `json:"uid,omitempty"`
}

// Target renders the reference as namespace/kind/name, the RemedyTarget format.
func (r DriftObjectRef) Target() string { return r.Namespace + "/" + r.Kind + "/" + r.Name }

// DriftInput starts the drift workflow of one parent. The webhook sets only
// Parent; a continued run also carries the drifts still open.
type DriftInput struct {
	Parent DriftObjectRef `json:"parent"`
	Open   []OpenDrift    `json:"open,omitempty"`
	// Resolved counts the drifts earlier runs resolved.
	Resolved int `json:"resolved,omitempty"`
	// Undelivered carries the status's undelivered reports.
	Undelivered []UndeliveredReport `json:"undelivered,omitempty"`
}

// DriftSignal is the payload of the drift signal the webhook sends.
type DriftSignal struct {
	// ID is the first 16 hex of sha256(parent + child + diff); the webhook computes it.
	ID     string         `json:"id"`
	Parent DriftObjectRef `json:"parent"`
	// ParentGeneration is the generation of the parent's last spec change.
	ParentGeneration int64 `json:"parentGeneration"`
	// ParentSpecHash is kv1.SpecHash of the parent at detection; a different
	// hash later means the parent changed, which resolves the drift.
	ParentSpecHash string `json:"parentSpecHash"`
	// ParentObservedGeneration and ParentLifecyclePhase (Initializing,
	// Initialized, Deleting) are the parent's state at detection.
	ParentObservedGeneration int64          `json:"parentObservedGeneration,omitempty"`
	ParentLifecyclePhase     string         `json:"parentLifecyclePhase,omitempty"`
	Child                    DriftObjectRef `json:"child"`
	ChildGeneration          int64          `json:"childGeneration,omitempty"`
	Operation                string         `json:"operation"`
	User                     string         `json:"user"`
	Groups                   []string       `json:"groups,omitempty"`
	// RequestUID, FieldManager and DryRun describe the admission request.
	RequestUID   string          `json:"requestUID,omitempty"`
	FieldManager string          `json:"fieldManager,omitempty"`
	DryRun       bool            `json:"dryRun,omitempty"`
	OldObject    json.RawMessage `json:"oldObject,omitempty"`
	NewObject    json.RawMessage `json:"newObject,omitempty"`
	Mode         string          `json:"mode"`
	Denied       bool            `json:"denied,omitempty"`
	Approved     bool            `json:"approved,omitempty"`
	Snoozed      bool            `json:"snoozed,omitempty"`
	// SnoozedUntil is when the snooze that silenced the drift expires; a
	// drift still open then is reported.
	SnoozedUntil time.Time `json:"snoozedUntil,omitzero"`
	DetectedAt   time.Time `json:"detectedAt"`
	// A signal names no callback URL and does not ask for approval: the
	// worker reads both from its configuration (gate.DriftSettings).
}

// OpenDrift is one drift the workflow tracks until it resolves.
type OpenDrift struct {
	Signal DriftSignal `json:"signal"`
	// ApprovalRequest is the RemediationApprovalRequest asked for it, if any.
	ApprovalRequest string `json:"approvalRequest,omitempty"`
	// ApprovalRequiredBy is set while ApprovalRequest is open and waiting
	// when the run continues as new: the next run waits on it again.
	ApprovalRequiredBy time.Time `json:"approvalRequiredBy,omitzero"`
	// Decision is Approved, Rejected or Expired once a person (or the timer) decided.
	Decision string `json:"decision,omitempty"`
	// Unsnoozed: the drift was snoozed when detected and its Detected report
	// went out when the snooze expired; its Resolved report follows.
	Unsnoozed bool `json:"unsnoozed,omitempty"`
}

// ResolvedDrift is one drift the run closed, and why.
type ResolvedDrift struct {
	ID     string `json:"id"`
	Reason string `json:"reason"`
}

// DriftStatus is what the status query returns.
type DriftStatus struct {
	Parent DriftObjectRef `json:"parent"`
	Open   []OpenDrift    `json:"open"`
	// Resolved counts every drift of this parent resolved so far, across runs.
	Resolved int `json:"resolved"`
	// Undelivered lists the latest reports a receiver never took.
	Undelivered []UndeliveredReport `json:"undelivered,omitempty"`
	// Settings are the parent's reporting settings as the worker last read
	// them from its configuration.
	Settings gate.DriftSettings `json:"settings"`
}

// UndeliveredReport is a DriftReport that failed for good at one URL: the
// receiver refused it, never acknowledged it, or could not be reached
// while the activity retried.
type UndeliveredReport struct {
	ID    string `json:"id"`
	Phase string `json:"phase"`
	URL   string `json:"url"`
	// Error is the last failure: the receiver's own error when it answered
	// acknowledged: false.
	Error string `json:"error"`
}

// DriftResult is the outcome of one run.
type DriftResult struct {
	Status DriftStatus `json:"status"`
	// Closed lists the drifts this run resolved, in order.
	Closed []ResolvedDrift `json:"closed,omitempty"`
}
