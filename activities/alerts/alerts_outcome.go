package alerts

import (
	"context"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	"github.com/remedy-dev/remedy/activities/status"
	"github.com/remedy-dev/remedy/api/v1alpha1"
)

// Outcomes of alert runs: the keys of RemediationRuleStatus.Outcomes and
// the outcome label of remedy_alert_outcomes_total (metrics.AlertOutcomeNames).
const (
	OutcomeRefused         = v1alpha1.AlertRefused
	OutcomeHeld            = v1alpha1.AlertHeld
	OutcomeGated           = "Gated"
	OutcomeWaitingApproval = v1alpha1.AlertWaiting
	OutcomeDone            = v1alpha1.AlertDone
	OutcomeVerified        = v1alpha1.AlertVerified
	OutcomeIneffective     = v1alpha1.AlertIneffective
	OutcomeJoined          = v1alpha1.AlertJoined
	OutcomeCanceled        = v1alpha1.AlertCanceled
	OutcomeShadow          = v1alpha1.AlertShadow
)

// outcomeOf says which outcome a recorded phase and reason is, and whether
// its Event is Normal or Warning; "" for a step on the way (matched,
// awaiting a permit, running, verifying), which leaves no outcome.
func outcomeOf(phase, reason string) (outcome, eventType string) {
	warnIf := func(bad bool) string {
		if bad {
			return corev1.EventTypeWarning
		}
		return corev1.EventTypeNormal
	}
	switch phase {
	case v1alpha1.AlertQueued:
		switch reason {
		case v1alpha1.ReasonFrozen, v1alpha1.ReasonGatedByAlert:
			return OutcomeGated, corev1.EventTypeNormal
		case v1alpha1.ReasonGateUnknown:
			return OutcomeGated, corev1.EventTypeWarning
		}
		return "", ""
	case v1alpha1.AlertRunning, v1alpha1.AlertVerifying, "":
		return "", ""
	case v1alpha1.AlertRefused:
		return OutcomeRefused, corev1.EventTypeWarning
	case v1alpha1.AlertIneffective:
		return OutcomeIneffective, corev1.EventTypeWarning
	case v1alpha1.AlertDone:
		return OutcomeDone, warnIf(reason != v1alpha1.ReasonSucceeded && reason != v1alpha1.ReasonNoChange)
	}
	// Held, WaitingApproval, Verified, Joined, Canceled, Shadow, and any
	// phase added later, under its own name. A run whose ladder ran out
	// ends Ineffective: its Warning is the phase's.
	return phase, corev1.EventTypeNormal
}

// outcomeEvents records the outcome's Event on the rule and, when the run
// resolved its target, on the target too (kubectl describe shows both).
// An Event is named after the run, phase and reason: a retried record
// creates it once.
func (a *Alerts) outcomeEvents(ctx context.Context, rule *v1alpha1.RemediationRule, in AlertRecordInput, runID, outcome, eventType string) {
	// WriteStatus hands back what it read even when it wrote nothing: a
	// rule deleted, or created again under the name, gets no Event.
	if a.Events == nil || rule == nil || string(rule.UID) != in.RuleUID {
		return
	}
	rec := in.Record
	text := "alert " + rec.AlertName + " (" + rec.Fingerprint + ")"
	if rec.Target != "" {
		text += " on " + rec.Target
	}
	text += ": " + rec.Reason
	if rec.Message != "" {
		text += ": " + rec.Message
	}
	if rec.RunbookURL != "" {
		text += " (runbook " + rec.RunbookURL + ")"
	}
	key := "outcome/" + rec.Fingerprint + "/" + runID + "/" + rec.Phase + "/" + rec.Reason
	n := status.Note{Key: key, Type: eventType, Action: "RecordAlert", Reason: "Alert" + outcome, Text: text + " (RemediationRule " + rule.Name + ")"}
	n.Regarding = corev1.ObjectReference{APIVersion: v1alpha1.GroupVersion.String(), Kind: "RemediationRule", Namespace: rule.Namespace,
		Name: rule.Name, UID: rule.UID, ResourceVersion: rule.ResourceVersion}
	status.RecordNote(ctx, a.Events, n)
	if ref, ok := a.targetRef(ctx, in.Namespace, rec.Target); ok {
		n.Regarding = ref
		status.RecordNote(ctx, a.Events, n)
	}
}

// targetKinds are the targets (as owner names them) an outcome's Event is also recorded on.
var targetKinds = map[string]schema.GroupVersionKind{
	"Deployment":  {Group: "apps", Version: "v1", Kind: "Deployment"},
	"StatefulSet": {Group: "apps", Version: "v1", Kind: "StatefulSet"},
	"DaemonSet":   {Group: "apps", Version: "v1", Kind: "DaemonSet"},
	"Pod":         {Version: "v1", Kind: "Pod"},
}

// targetRef finds the run's target ("Kind/name" in the rule's namespace)
// with its UID, which kubectl describe selects Events by; a target that
// is gone, or of another kind, gets no Event.
func (a *Alerts) targetRef(ctx context.Context, ns, target string) (corev1.ObjectReference, bool) {
	kind, name, ok := strings.Cut(target, "/")
	gvk, known := targetKinds[kind]
	if !ok || !known || name == "" {
		return corev1.ObjectReference{}, false
	}
	obj := &metav1.PartialObjectMetadata{}
	obj.SetGroupVersionKind(gvk)
	if err := a.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: name}, obj); err != nil {
		return corev1.ObjectReference{}, false
	}
	return corev1.ObjectReference{APIVersion: gvk.GroupVersion().String(), Kind: kind, Namespace: ns, Name: name, UID: obj.UID}, true
}
