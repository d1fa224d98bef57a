package kausality

import (
	"strconv"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	kv1 "github.com/remedy-dev/remedy/api/kausality/v1alpha1"
)

// Audit annotation keys, kausality's without its "kausality.io/" prefix:
// the API server prefixes every key a webhook returns with the webhook's
// name and drops keys that then hold two slashes, so these are logged as
// drift.remedy.dev/decision and so on.
const (
	AuditDecision        = "decision"
	AuditDrift           = "drift"
	AuditMode            = "mode"
	AuditLifecyclePhase  = "lifecycle-phase"
	AuditDriftResolution = "drift-resolution"
	AuditTrace           = "trace"
)

// Audit is what the admission response records in the API server's audit
// log, following kausality's pkg/admission: nothing where no decision was
// made (status updates, metadata-only changes, other subresources, the
// webhook's own writes, errors); otherwise the decision, the parent's
// lifecycle phase, and, once drift detection ran, whether it found drift,
// the mode, how drift was resolved and the trace an allowed request gets.
func Audit(req Request, res Result) map[string]string {
	switch res.Decision {
	case DecisionStatus, DecisionMetadataOnly, DecisionSubresource, DecisionFromWebhook, DecisionParentError, DecisionInvalidRequest:
		return nil
	}
	a := make(map[string]string, 6)
	switch {
	case !res.Allowed:
		a[AuditDecision] = "denied"
	case len(res.Warnings) > 0:
		a[AuditDecision] = "allowed-with-warning"
	default:
		a[AuditDecision] = "allowed"
	}
	if req.Parent != nil {
		a[AuditLifecyclePhase] = LifecyclePhase(*req.Parent)
	}
	if res.Decision == DecisionFrozen || res.Decision == DecisionInvalidAnnotation {
		// Denied before (or regardless of) drift detection.
		return a
	}
	a[AuditDrift] = strconv.FormatBool(res.Drift != nil)
	mode := kv1.Mode("")
	if dr := res.Drift; dr != nil {
		mode = dr.Mode
		switch {
		case dr.Approved:
			a[AuditDriftResolution] = "approved"
		case dr.Rejected:
			a[AuditDriftResolution] = "rejected"
		default:
			a[AuditDriftResolution] = "unresolved"
		}
	}
	if mode == "" {
		// Only the mode annotations matter here: no copy of the rest.
		d := &decider{req: req, old: modeAnnotation(req.OldObject), cur: modeAnnotation(req.Object)}
		mode = d.mode()
	}
	a[AuditMode] = string(mode)
	if res.Allowed && res.Trace != "" {
		a[AuditTrace] = res.Trace
	}
	return a
}

// LifecyclePhase is the parent's phase as kausality names it in DriftReports
// and audit annotations.
func LifecyclePhase(p Parent) string {
	if p.Deleting {
		return kv1.LifecycleDeleting
	}
	if ok, _ := initialized(p); ok {
		return kv1.LifecycleInitialized
	}
	return kv1.LifecycleInitializing
}

func modeAnnotation(obj *unstructured.Unstructured) map[string]string {
	if obj == nil {
		return nil
	}
	if v, ok, _ := unstructured.NestedString(obj.Object, "metadata", "annotations", kv1.AnnotationMode); ok {
		return map[string]string{kv1.AnnotationMode: v}
	}
	return nil
}
