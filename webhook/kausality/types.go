// Package kausality is the drift decision of the admission webhook: a pure
// function from what the adapter knows of a request (the object, its
// controller parent from an informer cache, the mode settings) to the
// admission verdict, the annotation changes to patch in and the parent
// writes to make asynchronously. It does no I/O, so every rule of the
// kausality seed is a row in a table test.
package kausality

import (
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	kv1 "github.com/remedy-dev/remedy/api/kausality/v1alpha1"
)

// Operation is the admission operation.
type Operation string

// Operations the webhook intercepts.
const (
	Create Operation = "CREATE"
	Update Operation = "UPDATE"
	Delete Operation = "DELETE"
)

// User is the requester.
type User struct {
	Name, UID string
	Groups    []string
}

// Condition is one status condition of a parent.
type Condition struct{ Type, Status string }

// Parent is what the adapter knows of the object the child's controller
// ownerReference names (from an informer cache).
type Parent struct {
	APIVersion, Kind, Namespace, Name, UID string
	// Generation is the generation of the parent's last SPEC change. The
	// adapter computes it (Deployments bump metadata.generation on
	// annotation-only changes; writing an approval must not open an
	// "expected" window). Expected change iff ObservedGeneration < Generation
	// or the parent is RollingOut.
	Generation int64
	// MetadataGeneration is the parent's metadata.generation; 0 when
	// unknown. Approvals and rejections naming a generation it reached
	// since the last spec change apply (kv1.Generations).
	MetadataGeneration int64
	// ObservedGeneration: status.observedGeneration, else
	// kausality.io/observedGeneration, else nil.
	ObservedGeneration *int64
	Annotations        map[string]string
	Conditions         []Condition
	// RollingOut: the parent's status shows its controller still rolling
	// out the spec it observed (RollingOut); its changes to children are
	// then expected too.
	RollingOut bool
	Deleting   bool
	// Init replaces the default initialization order for the parent's
	// kind (a policy's initialization rule); nil: the default.
	Init *InitRule
}

// InitRule says when parents of one kind count as initialized, after the
// kausality.io/phase high-water mark.
type InitRule struct {
	// Conditions: any of them True.
	Conditions []string
	// ObservedGenerationConditions: observedGeneration caught up and any of them True.
	ObservedGenerationConditions []string
	// ObservedGeneration: observedGeneration caught up is enough.
	ObservedGeneration bool
}

// Request is one admission request as Decide needs it.
type Request struct {
	Operation Operation
	// SubResource is "status" for status updates, "" otherwise.
	SubResource string
	User        User
	// OldObject is nil on CREATE; Object is nil on DELETE (use OldObject).
	Object, OldObject *unstructured.Unstructured
	// Parent is nil when the object has no controller ownerReference.
	Parent *Parent
	// ParentErr is set when the adapter could not resolve the parent the
	// controller ownerReference names; Decide answers 500 with it.
	ParentErr error
	// NamespaceMode is the namespace's kausality.io/mode annotation, "" if none.
	NamespaceMode string
	DefaultMode   kv1.Mode
	Now           time.Time
	// ConsumedOnce: once approvals this webhook already let through but
	// whose removal from the parent has not reached the cache yet; Decide
	// treats them as absent.
	ConsumedOnce []kv1.Approval
	// SpecGeneration is the generation of the object's own last spec
	// change before this request, as the adapter knows it; 0 when unknown.
	// Approvals written on the object are checked against it.
	SpecGeneration int64
	// FromWebhook marks the webhook's own asynchronous parent writes (the
	// ParentUpdates it asked for): they change system annotations on
	// purpose, so they are allowed untouched. The adapter sets it by
	// comparing the requester with its own identity.
	FromWebhook bool
}

// Result is the verdict and what to change.
type Result struct {
	Allowed bool
	// Code is the HTTP code when denied (403, 400); 0 when allowed.
	Code int32
	// Reason is the message for the user: why it was denied, or allowed.
	Reason   string
	Warnings []string
	// Annotations are changes to the request object's annotations: key ->
	// new value, nil value = remove. Only kausality.io/* keys. Empty on
	// DELETE and on denial.
	Annotations map[string]*string
	// Trace is the object's kausality.io/trace after an allowed request
	// (on DELETE the trace the deletion would have), for the audit log.
	Trace string
	// Decision is what happened, for metrics and logs.
	Decision DecisionKind
	// Drift is non-nil when the request is drift (allowed or not).
	Drift *Drift
	// ParentUpdate lists parent annotation writes the adapter performs
	// asynchronously; nil when there are none.
	ParentUpdate *ParentUpdate
}

// DecisionKind names the branch Decide took.
type DecisionKind string

// Decisions.
const (
	DecisionNoParent          DecisionKind = "no-parent"
	DecisionParentDeleting    DecisionKind = "parent-deleting"
	DecisionInitializing      DecisionKind = "initializing"
	DecisionFrozen            DecisionKind = "frozen"
	DecisionNewOrigin         DecisionKind = "new-origin"
	DecisionUnknownController DecisionKind = "unknown-controller"
	DecisionExpected          DecisionKind = "expected"
	DecisionDriftRejected     DecisionKind = "drift-rejected"
	DecisionDriftApproved     DecisionKind = "drift-approved"
	DecisionDriftDenied       DecisionKind = "drift-denied"
	DecisionDriftLogged       DecisionKind = "drift-logged"
	DecisionStatus            DecisionKind = "status"
	DecisionMetadataOnly      DecisionKind = "metadata-only"
	DecisionInvalidAnnotation DecisionKind = "invalid-annotation"
	DecisionFromWebhook       DecisionKind = "from-webhook"
	DecisionParentError       DecisionKind = "parent-error"
	DecisionSubresource       DecisionKind = "subresource"
	DecisionInvalidRequest    DecisionKind = "invalid-request"
)

// Drift describes a drifting request: the controller changed a child while
// its parent's spec was unchanged.
type Drift struct {
	Approved bool
	// Approval is the matching approval when approved.
	Approval *kv1.Approval
	Rejected bool
	// Snoozed suppresses callbacks (the drift signal), not the decision.
	Snoozed bool
	// SnoozedUntil is when the snooze expires: a drift still open then is
	// reported. Zero unless Snoozed.
	SnoozedUntil time.Time
	Denied       bool
	Mode         kv1.Mode
	// UserHash is the requester's hash.
	UserHash string
}

// ParentUpdate lists parent annotation writes the adapter performs
// asynchronously (each is idempotent; losing one is repaired by the next request).
type ParentUpdate struct {
	// AddController is a user hash to add to the parent's
	// kausality.io/controllers, "" for none.
	AddController string
	// Phase is "initialized" to record (only when not yet recorded), "" for none.
	Phase string
	// ConsumeOnce is a once approval to remove from the parent's approvals.
	ConsumeOnce *kv1.Approval
	// PruneApprovals removes once/generation approvals for a generation
	// before parent.Generation (kv1.Approval.Stale).
	PruneApprovals bool
	// ObservedGeneration, when set, is recorded as the parent's
	// kausality.io/observedGeneration: status updates of objects without
	// status.observedGeneration give them a synthetic one.
	ObservedGeneration *int64
}
