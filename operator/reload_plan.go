package operator

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/remedy-dev/remedy/api/v1alpha1"
	"github.com/remedy-dev/remedy/internal/reloadrule"
)

// reloadConfigMap is what planning needs of a selected ConfigMap.
type reloadConfigMap struct {
	Name, Scope, Hash string
}

// reloadWorkload is what planning needs of a selected workload.
type reloadWorkload struct {
	Kind, Name, Scope string
	// Meta and Template are the workload's and its pod template's annotations.
	Meta, Template  map[string]string
	ResourceVersion string
}

// reloadSignal asks the workload's reload workflow to apply one change.
type reloadSignal struct {
	Kind, Name, Scope string
	Change            reloadrule.ConfigChange
	// Repair marks the one-time restart of a workload the policy had seen
	// whose pod template was restarted but carries no hash.
	Repair bool
}

// reloadBaseline records hashes on a workload's metadata; nothing rolls.
type reloadBaseline struct {
	Kind, Name  string
	Annotations map[string]string
}

// reloadDeclinedUpdate rewrites a workload's declined annotation, dropping
// entries whose ConfigMap data has changed since; Value "" removes it.
// ResourceVersion is the one planned from, so a decline written meanwhile wins.
type reloadDeclinedUpdate struct {
	Kind, Name, Value, ResourceVersion string
}

type reloadPlan struct {
	plan[v1alpha1.ConfigReloadPolicyStatus]
	baselines []reloadBaseline
	declined  []reloadDeclinedUpdate
	signals   []reloadSignal
	// pending counts workloads whose recorded hashes differ from their ConfigMaps.
	pending int
}

// configMapHash is the sha256 of data and binaryData in canonical order:
// section, then keys sorted, each key and value length-prefixed so no two
// different maps encode alike. Labels and annotations do not count.
func configMapHash(cm *corev1.ConfigMap) string {
	if h := cm.Annotations[DataHashAnnotation]; h != "" && cm.Data == nil && cm.BinaryData == nil {
		// From the operator's cache, which keeps the hash instead of the data.
		return h
	}
	return reloadrule.ConfigMapHash(cm)
}

func scopeLabel(p *v1alpha1.ConfigReloadPolicy) string { return reloadrule.ScopeLabel(p) }

// planReload decides, from the selected ConfigMaps and workloads alone, which
// workloads get a baseline, which get a config-changed signal, and the status.
// Data whose restart was declined (DeclinedAnnotation) is not signalled again
// until it changes; the stale declined entries are then removed.
// A workload uses every selected ConfigMap whose scope label value equals its
// own; objects without the scope label match nothing. A workload whose pod
// template was restarted but carries no hash gets the repair restart
// only if the policy's status already lists it: a policy just applied
// records the baseline, so applying one to production rolls nothing.
// It takes no client, so what it decides depends only on the state it is
// shown (level-triggered).
func planReload(p *v1alpha1.ConfigReloadPolicy, cms []reloadConfigMap, wls []reloadWorkload, now time.Time) reloadPlan {
	cur := p.Status
	next := v1alpha1.ConfigReloadPolicyStatus{ObservedGeneration: p.Generation, Conditions: append([]metav1.Condition(nil), cur.Conditions...)}
	sort.Slice(cms, func(i, j int) bool { return cms[i].Name < cms[j].Name })
	sort.Slice(wls, func(i, j int) bool {
		return wls[i].Kind < wls[j].Kind || wls[i].Kind == wls[j].Kind && wls[i].Name < wls[j].Name
	})
	for _, cm := range cms {
		next.WatchedConfigMaps = append(next.WatchedConfigMaps, cm.Name)
	}

	seen := map[string]bool{}
	for _, w := range cur.Workloads {
		seen[w.Kind+"/"+w.Name] = true
	}
	var out reloadPlan
	for _, w := range wls {
		if w.Scope == "" {
			continue
		}
		next.Workloads = append(next.Workloads, out.addWorkload(w, cms, seen[w.Kind+"/"+w.Name]))
	}
	ready, events := reloadReady(p, len(next.WatchedConfigMaps), len(next.Workloads), out.pending, cms, wls, now)
	out.events = append(out.events, events...)
	meta.SetStatusCondition(&next.Conditions, ready)
	if !equality.Semantic.DeepEqual(&cur, &next) {
		out.status = &next
	}
	return out
}

// addWorkload plans one scoped workload against the ConfigMaps of its
// scope: a baseline for data it has never seen, a signal per change, and
// the removal of declined entries whose data changed since. known says the
// policy's status already lists the workload (a restarted one without a
// hash then gets the repair restart). It returns the workload's status entry.
func (out *reloadPlan) addWorkload(w reloadWorkload, cms []reloadConfigMap, known bool) v1alpha1.WorkloadRestart {
	legacy := known && w.Template[v1alpha1.RestartedAtAnnotation] != "" && !hasConfigHash(w)
	declined := reloadrule.ParseDeclined(w.Meta[v1alpha1.DeclinedAnnotation])
	stale := false
	recorded := map[string]string{}
	baseline := map[string]string{}
	var changes []reloadrule.ConfigChange
	for _, cm := range cms {
		if cm.Scope != w.Scope {
			continue
		}
		key := v1alpha1.ConfigHashAnnotation(cm.Name)
		have := w.Meta[key]
		if have == "" {
			have = w.Template[key]
		}
		switch {
		case have == cm.Hash:
			recorded[cm.Name] = have
		case have == "" && !legacy:
			// First sight: record what the pods run with now, no rollout.
			baseline[key], recorded[cm.Name] = cm.Hash, cm.Hash
		case declined.ConfigMaps[cm.Name] == cm.Hash:
			recorded[cm.Name] = have
			continue
		default:
			recorded[cm.Name] = have
			changes = append(changes, reloadrule.ConfigChange{ConfigMap: cm.Name, Hash: cm.Hash})
		}
		if h, ok := declined.ConfigMaps[cm.Name]; ok && h != cm.Hash {
			delete(declined.ConfigMaps, cm.Name)
			stale = true
		}
	}
	if stale {
		u := reloadDeclinedUpdate{Kind: w.Kind, Name: w.Name, ResourceVersion: w.ResourceVersion}
		if len(declined.ConfigMaps) > 0 {
			u.Value = declined.Encode()
		}
		out.declined = append(out.declined, u)
	}
	if len(baseline) > 0 {
		out.baselines = append(out.baselines, reloadBaseline{Kind: w.Kind, Name: w.Name, Annotations: baseline})
	}
	if len(changes) > 0 {
		out.pending++
	}
	for _, c := range changes {
		out.signals = append(out.signals, reloadSignal{Kind: w.Kind, Name: w.Name, Scope: w.Scope, Change: c, Repair: legacy})
	}
	wr := v1alpha1.WorkloadRestart{Kind: w.Kind, Name: w.Name, ConfigHash: combinedHash(recorded)}
	if t, err := time.Parse(time.RFC3339, w.Meta[v1alpha1.LastReloadAnnotation]); err == nil {
		wr.LastRestart = &metav1.Time{Time: t}
	}
	return wr
}

// reloadReady is the policy's Ready condition: watching, or, when no
// workload uses any selected ConfigMap, not effective and why, with a
// Warning Event the first time the message says so.
func reloadReady(p *v1alpha1.ConfigReloadPolicy, watched, workloads, pending int, cms []reloadConfigMap, wls []reloadWorkload, now time.Time) (metav1.Condition, []event) {
	ready := metav1.Condition{Type: v1alpha1.ConditionReady, Status: metav1.ConditionTrue, Reason: v1alpha1.ReasonWatching,
		Message:            fmt.Sprintf("watching %d ConfigMaps and %d workloads; %d restarts pending", watched, workloads, pending),
		ObservedGeneration: p.Generation, LastTransitionTime: metav1.NewTime(now)}
	if p.Spec.Approval != nil && p.Spec.Approval.Required {
		ready.Message += "; each restart waits for an approved RemediationApprovalRequest"
	}
	hint := reloadHint(p.Namespace, scopeLabel(p), cms, wls)
	if hint == "" {
		return ready, nil
	}
	// Watching, but not effective: Ready says so, not only an Event.
	ready.Status, ready.Reason = metav1.ConditionFalse, v1alpha1.ReasonNothingToReload
	ready.Message += "; " + hint
	if old := meta.FindStatusCondition(p.Status.Conditions, v1alpha1.ConditionReady); old == nil || old.Message != ready.Message {
		return ready, []event{{corev1.EventTypeWarning, v1alpha1.ReasonNothingToReload, hint}}
	}
	return ready, nil
}

// reloadHint says why a policy restarts nothing, in the order a person
// would check: ConfigMaps selected, scoped, then workloads selected, then
// scoped alike; "" when some workload uses some ConfigMap.
func reloadHint(namespace, scope string, cms []reloadConfigMap, wls []reloadWorkload) string {
	const kinds = "Deployment/StatefulSet/DaemonSet"
	values := map[string]bool{}
	for _, cm := range cms {
		if cm.Scope != "" {
			values[cm.Scope] = true
		}
	}
	switch {
	case len(cms) == 0:
		return fmt.Sprintf("no ConfigMap in %s matches configMapSelector", namespace)
	case len(values) == 0:
		return fmt.Sprintf("no selected ConfigMap has label %s (scopeLabel), so none applies to a workload", scope)
	case len(wls) == 0:
		return fmt.Sprintf("no %s in %s matches workloadSelector", kinds, namespace)
	}
	for _, w := range wls {
		if values[w.Scope] {
			return ""
		}
	}
	labels := make([]string, 0, len(values))
	for _, v := range slices.Sorted(maps.Keys(values)) {
		labels = append(labels, scope+"="+v)
	}
	return fmt.Sprintf("no %s in %s matching workloadSelector has label %s (scopeLabel, as on the selected ConfigMaps)",
		kinds, namespace, strings.Join(labels, " or "))
}

// invalidSelectorStatus reports a selector that cannot be parsed.
func invalidSelectorStatus(p *v1alpha1.ConfigReloadPolicy, err error, now time.Time) *v1alpha1.ConfigReloadPolicyStatus {
	return notReadyStatus(p, v1alpha1.ReasonInvalidSelector, err.Error(), now)
}

// invalidSpecStatus reports a spec that cannot be used as stored.
func invalidSpecStatus(p *v1alpha1.ConfigReloadPolicy, err error, now time.Time) *v1alpha1.ConfigReloadPolicyStatus {
	return notReadyStatus(p, v1alpha1.ReasonInvalidSpec, invalidSpecMessage(err), now)
}

// invalidSpecMessage joins the field errors on one line.
func invalidSpecMessage(err error) string {
	return strings.ReplaceAll(err.Error(), "\n", "; ") + "; nothing runs until the spec is fixed"
}

// protectedStatus reports a policy in a protected namespace, which restarts nothing.
func protectedStatus(p *v1alpha1.ConfigReloadPolicy, now time.Time) *v1alpha1.ConfigReloadPolicyStatus {
	return notReadyStatus(p, v1alpha1.ReasonProtectedNamespace,
		v1alpha1.ProtectedNamespaceMessage(p.Namespace)+": this policy records and restarts nothing", now)
}

// notReadyStatus sets Ready=False with reason and message; nil when the status already says so.
func notReadyStatus(p *v1alpha1.ConfigReloadPolicy, reason, message string, now time.Time) *v1alpha1.ConfigReloadPolicyStatus {
	next := p.Status.DeepCopy()
	next.ObservedGeneration = p.Generation
	meta.SetStatusCondition(&next.Conditions, metav1.Condition{Type: v1alpha1.ConditionReady, Status: metav1.ConditionFalse,
		Reason: reason, Message: message, ObservedGeneration: p.Generation, LastTransitionTime: metav1.NewTime(now)})
	if equality.Semantic.DeepEqual(&p.Status, next) {
		return nil
	}
	return next
}

func hasConfigHash(w reloadWorkload) bool { return anyConfigHash(w.Meta, w.Template) }

// anyConfigHash reports whether any of the annotation maps records a ConfigMap's hash.
func anyConfigHash(annotations ...map[string]string) bool {
	for _, m := range annotations {
		for k := range m {
			if strings.HasPrefix(k, v1alpha1.ConfigHashAnnotationPrefix) {
				return true
			}
		}
	}
	return false
}

// combinedHash summarises a workload's recorded hashes for .status: the hash
// itself for one ConfigMap, a digest of "name=hash" lines for several.
func combinedHash(recorded map[string]string) string {
	switch len(recorded) {
	case 0:
		return ""
	case 1:
		for _, h := range recorded {
			return h
		}
	}
	h := sha256.New()
	for _, k := range slices.Sorted(maps.Keys(recorded)) {
		fmt.Fprintf(h, "%s=%s\n", k, recorded[k])
	}
	return hex.EncodeToString(h.Sum(nil))
}
