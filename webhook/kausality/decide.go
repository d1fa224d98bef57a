package kausality

import (
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	kv1 "github.com/remedy-dev/remedy/api/kausality/v1alpha1"
)

// decider carries what every step of one decision reads.
type decider struct {
	req      Request
	obj      *unstructured.Unstructured // Object, or OldObject on DELETE
	userHash string
	old, cur map[string]string // kausality annotations of OldObject and Object
	role     role
	spec     bool
	update   ParentUpdate
	warnings []string
	// approvals of the parent; nil when it has none or they do not parse.
	approvals   []kv1.Approval
	approvalErr error
}

// Decide is the drift decision for one admission request. It never fails:
// unparseable annotations on parents are handled fail-safe (see checkFreeze
// and drift) and unparseable ones a person writes are a 400.
func Decide(req Request) Result {
	switch {
	case req.FromWebhook:
		return Result{Allowed: true, Decision: DecisionFromWebhook, Reason: "kausality: the webhook's own parent update"}
	case req.SubResource == "status" && req.Operation == Update:
		return decideStatus(req)
	case req.SubResource != "":
		// Other subresources (scale, ...) carry another type than the child.
		return allow(DecisionSubresource, "kausality: subresource "+req.SubResource+" is not tracked")
	case req.ParentErr != nil:
		return deny(http.StatusInternalServerError, DecisionParentError, "kausality: resolve the controller parent: "+req.ParentErr.Error())
	}
	obj := req.Object
	if req.Operation == Delete {
		obj = req.OldObject
	}
	if obj == nil || (req.Operation != Create && req.OldObject == nil) {
		return deny(http.StatusBadRequest, DecisionInvalidRequest, fmt.Sprintf("kausality: %s request without the object", req.Operation))
	}
	d := &decider{
		req: req, obj: obj, userHash: kv1.UserHash(req.User.Name, req.User.UID),
		old: kausalityAnnotations(req.OldObject), cur: kausalityAnnotations(req.Object),
		spec: req.Operation != Update || specChanged(req.OldObject, req.Object),
	}
	updaters, _ := kv1.AddUserHash(kv1.ParseUserHashes(d.old[kv1.AnnotationUpdaters]), d.userHash)
	d.role = identify(d.userHash, updaters, req.Parent)

	res, extend, label := d.decide()
	if res.Allowed {
		want, err := d.annotations(extend, label)
		switch {
		case req.Operation == Delete:
			// A deletion patches nothing; its trace goes to the audit log only.
			res.Trace = want[kv1.AnnotationTrace]
		case err != nil:
			res = deny(http.StatusBadRequest, DecisionInvalidAnnotation, "kausality: "+err.Error())
			// The request fails, so nothing it would have consumed is consumed.
			d.update.ConsumeOnce = nil
		default:
			res.Annotations = changes(want, d.cur)
			res.Trace = want[kv1.AnnotationTrace]
		}
	}
	if res.Allowed && req.Operation == Update {
		d.checkApprovalGenerations()
	}
	res.Warnings = append(d.warnings, res.Warnings...)
	res.ParentUpdate = d.parentUpdate()
	return res
}

// generations are the parent's generations approvals and rejections may name.
func (p *Parent) generations() kv1.Generations {
	return kv1.Generations{Spec: p.Generation, Metadata: p.MetadataGeneration}
}

// checkApprovalGenerations warns about approvals this update writes on the
// object that can never apply: they name a generation before its last spec
// change, so they are pruned unused. (One naming its metadata.generation
// now, or any reached since the spec change, applies: kv1.Generations.)
func (d *decider) checkApprovalGenerations() {
	spec := d.req.SpecGeneration
	if spec == 0 || d.cur[kv1.AnnotationApprovals] == d.old[kv1.AnnotationApprovals] {
		return
	}
	written, err := kv1.ParseApprovals(d.cur[kv1.AnnotationApprovals])
	if err != nil {
		return // refused or dropped with its own message
	}
	before, _ := kv1.ParseApprovals(d.old[kv1.AnnotationApprovals])
	for i, a := range written {
		if a.Mode == kv1.ApprovalAlways || a.Generation == 0 || !a.Stale(spec) || slices.Contains(before, a) {
			continue
		}
		d.warnings = append(d.warnings, fmt.Sprintf(
			"kausality: %s[%d] (%s %s) names generation %d, but the spec of %s last changed at generation %d: it can never apply and will be pruned; "+
				"name generation %d or a later metadata.generation (now %d), or leave generation out",
			kv1.AnnotationApprovals, i, a.Kind, a.Name, a.Generation, describe(d.obj.GetKind(), d.obj.GetNamespace(), d.obj.GetName()),
			spec, spec, d.req.OldObject.GetGeneration()))
	}
}

// decide walks kausality's admission flow. It returns the verdict, whether
// the trace extends the parent's (else the change is a new origin) and the
// extra label of the new hop.
func (d *decider) decide() (res Result, extend bool, label map[string]string) {
	p := d.req.Parent
	extend = extends(d.role, p)
	if !d.spec {
		// Metadata-only changes are never drift, not even under a freeze:
		// controllers syncing labels and annotations must not be stuck.
		return allow(DecisionMetadataOnly, "kausality: metadata-only change"), extend, nil
	}
	if p == nil {
		return allow(DecisionNoParent, "kausality: no controller ownerReference"), false, nil
	}
	if p.Deleting {
		return allow(DecisionParentDeleting, "kausality: parent is being deleted"), extend, nil
	}
	d.loadApprovals()
	// A freeze holds in every phase but deletion: an initializing parent
	// is frozen too, whoever makes the change.
	if msg, frozen := d.checkFreeze(); frozen {
		return deny(http.StatusForbidden, DecisionFrozen, msg), extend, nil
	}
	ok, record := initialized(*p)
	if record {
		d.update.Phase = kv1.PhaseInitialized
	}
	if !ok {
		return allow(DecisionInitializing, "kausality: parent is initializing"), extend, nil
	}
	switch d.role {
	case roleUnknown:
		return allow(DecisionUnknownController, "kausality: the parent's controller is not known yet; drift detection skipped"), extend, nil
	case roleOther:
		return allow(DecisionNewOrigin, "kausality: change by someone other than the parent's controller: new causal origin"), extend, nil
	}
	if expected(*p) {
		why := "kausality: the parent's controller is reconciling a spec change"
		if p.RollingOut {
			why = "kausality: the parent's controller is rolling out its spec"
		}
		return allow(DecisionExpected, why), extend, nil
	}
	res, label = d.drift()
	return res, extend, label
}

// checkFreeze reads the parent's freeze. An unparseable freeze still
// freezes: whoever wrote it meant to stop changes.
func (d *decider) checkFreeze() (string, bool) {
	p := d.req.Parent
	v, ok := p.Annotations[kv1.AnnotationFreeze]
	if !ok {
		return "", false
	}
	what := describe(p.Kind, p.Namespace, p.Name)
	f, err := kv1.ParseFreeze(v)
	switch {
	case err != nil:
		return fmt.Sprintf("kausality: %s is frozen: its %s annotation does not parse (%v), which freezes it until it is fixed or removed",
			what, kv1.AnnotationFreeze, err), true
	case f == nil:
		return "", false
	}
	return fmt.Sprintf("kausality: %s is %s; changes to its children are denied until %s is removed",
		what, f.String(), kv1.AnnotationFreeze), true
}

// loadApprovals parses the parent's approvals once and asks for stale ones
// to be pruned. Unparseable approvals approve nothing.
func (d *decider) loadApprovals() {
	p := d.req.Parent
	d.approvals, d.approvalErr = kv1.ParseApprovals(p.Annotations[kv1.AnnotationApprovals])
	for _, a := range d.approvals {
		if a.Stale(p.Generation) {
			d.update.PruneApprovals = true
			break
		}
	}
}

// drift handles a controller changing a child while its parent's spec is
// unchanged: rejections, then approvals, then the mode.
func (d *decider) drift() (Result, map[string]string) {
	p := d.req.Parent
	child := childRef(d.obj)
	dr := &Drift{UserHash: d.userHash}
	parent := describe(p.Kind, p.Namespace, p.Name)
	what := describe(d.obj.GetKind(), d.obj.GetNamespace(), d.obj.GetName())

	rejections, err := kv1.ParseRejections(p.Annotations[kv1.AnnotationRejections])
	if err != nil {
		// Someone meant to reject something; without knowing what, reject all.
		dr.Rejected = true
		res := deny(http.StatusForbidden, DecisionDriftRejected, fmt.Sprintf(
			"kausality: drift of %s denied: the %s annotation of %s does not parse: %v", what, kv1.AnnotationRejections, parent, err))
		res.Drift = dr
		return res, nil
	}
	for _, r := range rejections {
		if r.Matches(child, p.generations()) {
			dr.Rejected = true
			reason := r.Reason
			if reason == "" {
				reason = "no reason given"
			}
			res := deny(http.StatusForbidden, DecisionDriftRejected, fmt.Sprintf(
				"kausality: drift of %s rejected by %s: %s", what, parent, reason))
			res.Drift = dr
			return res, nil
		}
	}

	if d.approvalErr != nil {
		d.warnings = append(d.warnings, fmt.Sprintf("kausality: approvals of %s ignored: %v", parent, d.approvalErr))
	}
	if a := d.matchApproval(child); a != nil {
		dr.Approved, dr.Approval = true, a
		if a.Mode == kv1.ApprovalOnce {
			d.update.ConsumeOnce = a
		}
		res := allow(DecisionDriftApproved, fmt.Sprintf("kausality: drift of %s approved by %s (%s)", what, parent, a.Mode))
		res.Drift = dr
		return res, map[string]string{"kausality.io/approval": string(a.Mode)}
	}

	dr.SnoozedUntil = d.snoozed(parent)
	dr.Snoozed = !dr.SnoozedUntil.IsZero()
	dr.Mode = d.mode()
	msg := fmt.Sprintf("kausality: drift: %s changed %s while %s is unchanged (generation %d observed); approve in its %s",
		d.req.User.Name, what, parent, p.Generation, kv1.AnnotationApprovals)
	if dr.Mode == kv1.ModeEnforce {
		dr.Denied = true
		res := deny(http.StatusForbidden, DecisionDriftDenied, msg)
		res.Drift = dr
		return res, nil
	}
	res := allow(DecisionDriftLogged, msg)
	res.Warnings = []string{msg + " (allowed in log mode)"}
	res.Drift = dr
	return res, nil
}

// matchApproval picks the approval that lets child through, preferring
// the longest-lived so that a once approval is not spent when an always or
// generation approval also matches. Approvals already consumed but still
// in the cache do not count.
func (d *decider) matchApproval(child kv1.ChildRef) *kv1.Approval {
	var best *kv1.Approval
	rank := map[kv1.ApprovalMode]int{kv1.ApprovalAlways: 3, kv1.ApprovalGeneration: 2, kv1.ApprovalOnce: 1}
	for i := range d.approvals {
		a := d.approvals[i]
		if !a.Matches(child, d.req.Parent.generations()) || consumed(a, d.req.ConsumedOnce) {
			continue
		}
		if best == nil || rank[a.Mode] > rank[best.Mode] {
			best = &a
		}
	}
	return best
}

func consumed(a kv1.Approval, list []kv1.Approval) bool {
	for _, c := range list {
		if c == a {
			return true
		}
	}
	return false
}

// snoozed reads the parent's snooze and returns its expiry while it is
// active, else the zero time; an unparseable one does not snooze, so
// callbacks keep flowing.
func (d *decider) snoozed(parent string) time.Time {
	s, err := kv1.ParseSnooze(d.req.Parent.Annotations[kv1.AnnotationSnooze])
	if err != nil {
		d.warnings = append(d.warnings, fmt.Sprintf("kausality: snooze of %s ignored: %v", parent, err))
		return time.Time{}
	}
	if s == nil || !s.Active(d.req.Now) {
		return time.Time{}
	}
	return s.Expiry
}

// mode resolves the object's, then the namespace's, then the default mode.
// The object's mode is the stored one (OldObject), or the created one when
// it was not copied from the parent. Unparseable levels are skipped.
func (d *decider) mode() kv1.Mode {
	own := d.old[kv1.AnnotationMode]
	if d.req.Operation == Create {
		own = d.created()[kv1.AnnotationMode]
	}
	for _, l := range []struct{ what, v string }{{"object", own}, {"namespace", d.req.NamespaceMode}} {
		m, err := kv1.ParseMode(l.v)
		if err != nil {
			d.warnings = append(d.warnings, fmt.Sprintf("kausality: %s mode ignored: %v", l.what, err))
			continue
		}
		if m != "" {
			return m
		}
	}
	if d.req.DefaultMode == "" {
		return kv1.ModeLog
	}
	return d.req.DefaultMode
}

func (d *decider) parentUpdate() *ParentUpdate {
	if d.update == (ParentUpdate{}) {
		return nil
	}
	u := d.update
	return &u
}

func allow(k DecisionKind, reason string) Result {
	return Result{Allowed: true, Decision: k, Reason: reason}
}

func deny(code int32, k DecisionKind, reason string) Result {
	return Result{Code: code, Decision: k, Reason: strings.TrimSpace(reason)}
}
