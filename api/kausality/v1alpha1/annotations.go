package v1alpha1

import (
	"fmt"
	"strings"
)

// Annotation keys. The first four are system annotations the webhook computes;
// the rest are user annotations people (and the drift workflow) write.
const (
	AnnotationControllers        = "kausality.io/controllers"
	AnnotationUpdaters           = "kausality.io/updaters"
	AnnotationPhase              = "kausality.io/phase"
	AnnotationTrace              = "kausality.io/trace"
	AnnotationObservedGeneration = "kausality.io/observedGeneration"

	AnnotationApprovals  = "kausality.io/approvals"
	AnnotationRejections = "kausality.io/rejections"
	AnnotationFreeze     = "kausality.io/freeze"
	AnnotationSnooze     = "kausality.io/snooze"
	AnnotationMode       = "kausality.io/mode"
	// TraceLabelPrefix starts user annotations whose value is copied into
	// the trace hop's labels under the rest of the key.
	TraceLabelPrefix = "kausality.io/trace-"

	// Prefix is shared by every kausality annotation.
	Prefix = "kausality.io/"
)

// Values of AnnotationPhase. There is no "deleting": that is read from
// metadata.deletionTimestamp and never stored.
const (
	PhaseInitializing = "initializing"
	PhaseInitialized  = "initialized"
)

// IsKausality reports whether key is a kausality annotation.
func IsKausality(key string) bool { return strings.HasPrefix(key, Prefix) }

// IsSystem reports whether key is an annotation only the webhook may change.
func IsSystem(key string) bool {
	switch key {
	case AnnotationControllers, AnnotationUpdaters, AnnotationPhase, AnnotationTrace, AnnotationObservedGeneration:
		return true
	}
	return false
}

// Mode is how drift without an approval is handled.
// +kubebuilder:validation:Enum=log;enforce
type Mode string

// Modes: log allows drift with a warning, enforce denies it.
const (
	ModeLog     Mode = "log"
	ModeEnforce Mode = "enforce"
)

// ParseMode parses a kausality.io/mode value; "" is no mode.
func ParseMode(s string) (Mode, error) {
	switch m := Mode(s); m {
	case "", ModeLog, ModeEnforce:
		return m, nil
	}
	return "", fmt.Errorf("%s: %q is not a mode, want %q or %q", AnnotationMode, s, ModeLog, ModeEnforce)
}
