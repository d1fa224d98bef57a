package v1alpha1

import (
	"encoding/json"
)

// The DriftReport's type, as kausality's callback receivers expect it.
const (
	DriftReportAPIVersion = "kausality.io/v1alpha1"
	DriftReportKind       = "DriftReport"
)

// DriftReportPhase says whether a report opens or closes a drift.
type DriftReportPhase string

// Phases of a DriftReport.
const (
	DriftReportDetected DriftReportPhase = "Detected"
	DriftReportResolved DriftReportPhase = "Resolved"
)

// DriftReport is the body POSTed to drift callback URLs. It is never stored
// in a cluster, so it carries no metadata; the JSON field names are
// kausality's, so receivers written for kausality accept it unchanged.
type DriftReport struct {
	APIVersion string          `json:"apiVersion"`
	Kind       string          `json:"kind"`
	Spec       DriftReportSpec `json:"spec"`
}

// DriftReportSpec describes one drift: the same id opens it (Detected) and
// closes it (Resolved).
type DriftReportSpec struct {
	// ID is the first 16 hex characters of sha256(parent + child + diff).
	ID     string               `json:"id"`
	Phase  DriftReportPhase     `json:"phase"`
	Parent DriftObjectReference `json:"parent"`
	Child  DriftObjectReference `json:"child"`
	// OldObject is the child before the change; absent on CREATE.
	OldObject json.RawMessage `json:"oldObject,omitempty"`
	// NewObject is the child as the change would leave it; absent on DELETE.
	NewObject json.RawMessage     `json:"newObject,omitempty"`
	Request   DriftRequestContext `json:"request"`
}

// DriftObjectReference names the parent or the child of a drift.
type DriftObjectReference struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Namespace  string `json:"namespace,omitempty"`
	Name       string `json:"name"`
	UID        string `json:"uid,omitempty"`
	Generation int64  `json:"generation,omitempty"`
	// ObservedGeneration is set on the parent only.
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
	// LifecyclePhase is the parent's phase (Initializing, Initialized,
	// Deleting); set on the parent only.
	LifecyclePhase string `json:"lifecyclePhase,omitempty"`
}

// Parent lifecycle phases as kausality spells them in DriftReports and audit
// annotations (the kausality.io/phase annotation stores them lower case).
const (
	LifecycleInitializing = "Initializing"
	LifecycleInitialized  = "Initialized"
	LifecycleDeleting     = "Deleting"
)

// DriftRequestContext is who made the drifting request, and how.
type DriftRequestContext struct {
	User   string   `json:"user"`
	Groups []string `json:"groups,omitempty"`
	// UID is the admission request's UID.
	UID string `json:"uid,omitempty"`
	// FieldManager is the request's fieldManager option, "" when unset.
	FieldManager string `json:"fieldManager,omitempty"`
	Operation    string `json:"operation"`
	// DryRun marks a dry-run request.
	DryRun bool `json:"dryRun,omitempty"`
}

// DriftReportResponse is what a receiver may answer a DriftReport with.
// An answer that is not one (an empty or non-JSON body) counts as
// acknowledged, as kausality counts it.
type DriftReportResponse struct {
	APIVersion string `json:"apiVersion,omitempty"`
	Kind       string `json:"kind,omitempty"`
	// Acknowledged says the receiver took the report.
	Acknowledged bool `json:"acknowledged"`
	// Error is the receiver's problem with the report.
	Error string `json:"error,omitempty"`
}
