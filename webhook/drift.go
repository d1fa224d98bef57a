package webhook

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"time"

	"gomodules.xyz/jsonpatch/v2"
	admissionv1 "k8s.io/api/admission/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	kv1 "github.com/remedy-dev/remedy/api/kausality/v1alpha1"
	"github.com/remedy-dev/remedy/internal/metrics"
	"github.com/remedy-dev/remedy/webhook/kausality"
	"github.com/remedy-dev/remedy/workflows"
)

// DriftPath serves the drift webhook (deploy/webhook/drift.yaml).
const DriftPath = "/drift"

// Drift is the admission adapter of the drift decision: it decodes, looks the
// parent up in the cache, calls kausality.Decide and maps its result. The
// slow parts (parent writes, Temporal signals) go to background queues.
type Drift struct {
	Parents *ParentCache
	Updates *ParentUpdater
	Signals *SignalQueue
	// Denied records a DriftDenied Event on the parent of a denied change; nil: none.
	Denied *DeniedEvents
	// DefaultMode applies when neither the object, its namespace nor a
	// policy set one.
	DefaultMode kv1.Mode
	// Policies are the Kausality policies; nil: none.
	Policies *Policies
	// Self is the webhook's own username: its parent writes pass untouched.
	Self string
	Now  func() time.Time
}

// Handle admits one request.
func (d *Drift) Handle(ctx context.Context, req admission.Request) admission.Response {
	start := time.Now()
	defer func() { metrics.DriftWebhookLatency.Observe(time.Since(start).Seconds()) }()

	obj, old, child, err := decodeChild(req)
	if err != nil {
		return admission.Errored(http.StatusBadRequest, err)
	}
	in, ref, parent, resp := d.observe(ctx, req, obj, old, child)
	if resp != nil {
		return *resp
	}
	parent, res := d.decide(ctx, req, &in, ref, parent)
	metrics.DriftDecisions.WithLabelValues(string(res.Decision)).Inc()
	d.followUp(ctx, req, child, parent, in, res)
	return d.respond(ctx, req, obj, child, parent, kausality.Audit(in, res), res)
}

// decodeChild decodes the request's objects; the child is the object, or
// the old object of a DELETE.
func decodeChild(req admission.Request) (obj, old, child *unstructured.Unstructured, err error) {
	if obj, err = decodeOptional(req.Object); err != nil {
		return nil, nil, nil, fmt.Errorf("decode object: %w", err)
	}
	if old, err = decodeOptional(req.OldObject); err != nil {
		return nil, nil, nil, fmt.Errorf("decode old object: %w", err)
	}
	child = obj
	if child == nil {
		child = old
	}
	if child == nil {
		return nil, nil, nil, fmt.Errorf("request has neither object nor oldObject")
	}
	return obj, old, child, nil
}

// observe gathers what the decision reads: the modes, the child's own
// spec generation and its controlling parent.
func (d *Drift) observe(ctx context.Context, req admission.Request, obj, old, child *unstructured.Unstructured) (kausality.Request, *metav1.OwnerReference, *unstructured.Unstructured, *admission.Response) {
	in := kausality.Request{
		Operation: kausality.Operation(req.Operation), SubResource: req.SubResource, Object: obj, OldObject: old,
		User:        kausality.User{Name: req.UserInfo.Username, UID: req.UserInfo.UID, Groups: req.UserInfo.Groups},
		DefaultMode: d.DefaultMode, Now: d.Now().UTC(), FromWebhook: req.UserInfo.Username == d.Self,
	}
	var err error
	if in.NamespaceMode, err = d.Parents.NamespaceMode(ctx, req.Namespace); err != nil {
		resp := admission.Errored(http.StatusInternalServerError, fmt.Errorf("read namespace mode: %w", err))
		return in, nil, nil, &resp
	}
	if in.DefaultMode, err = d.policyMode(ctx, req, child); err != nil {
		resp := admission.Errored(http.StatusInternalServerError, fmt.Errorf("resolve policy mode: %w", err))
		return in, nil, nil, &resp
	}
	in.SpecGeneration = d.ownSpecGeneration(ctx, req.Namespace, obj, old)
	ref := metav1.GetControllerOf(child)
	var parent *unstructured.Unstructured
	if ref != nil && req.SubResource == "" {
		parent, in.ParentErr = d.Parents.Parent(ctx, *ref, req.Namespace)
		if parent != nil {
			in.Parent = d.parent(parent)
			in.ConsumedOnce = d.Updates.Consumed(parent.GetUID())
		}
	}
	return in, ref, parent, nil
}

// decide runs the pure decision, confirms a drift against a fresh parent,
// and spends a once approval before admitting what it approves.
func (d *Drift) decide(ctx context.Context, req admission.Request, in *kausality.Request, ref *metav1.OwnerReference, parent *unstructured.Unstructured) (*unstructured.Unstructured, kausality.Result) {
	res := kausality.Decide(*in)
	if res.Drift != nil && parent != nil {
		parent, res = d.confirmDrift(ctx, *ref, req.Namespace, in, parent, res)
	}
	if a := onceToConsume(res); a != nil && !isDryRun(req) {
		// A lost race (another replica spent it) or a failed write decides again without it.
		ok, err := d.Updates.ConsumeNow(ctx, *ref, req.Namespace, in.Parent.Annotations[kv1.AnnotationApprovals], *a)
		if err != nil {
			log.FromContext(ctx).Error(err, "spend once approval")
		}
		if !ok {
			in.ConsumedOnce = append(in.ConsumedOnce, *a)
			res = kausality.Decide(*in)
		}
	}
	return parent, res
}

// respond maps the result to the admission response.
func (d *Drift) respond(ctx context.Context, req admission.Request, obj, child, parent *unstructured.Unstructured, audit map[string]string, res kausality.Result) admission.Response {
	logger := log.FromContext(ctx).WithValues("decision", res.Decision, "operation", req.Operation, "kind", req.Kind.Kind,
		"object", req.Namespace+"/"+req.Name, "user", req.UserInfo.Username)
	if !res.Allowed {
		logger.Info("drift webhook denied", "code", res.Code, "reason", res.Reason)
		if !isDryRun(req) {
			d.Denied.Record(parent, child, string(req.Operation), req.UserInfo.Username, res.Reason)
		}
		resp := admission.Denied(res.Reason)
		resp.Result.Code = res.Code
		resp.Result.Reason = metav1.StatusReason(http.StatusText(int(res.Code)))
		resp.AuditAnnotations = audit
		return resp.WithWarnings(res.Warnings...)
	}
	if res.Drift != nil {
		logger.Info("drift admitted", "approved", res.Drift.Approved, "mode", res.Drift.Mode)
	}
	resp := admission.Allowed(res.Reason)
	resp.AuditAnnotations = audit
	if obj != nil && len(res.Annotations) > 0 {
		resp.Patches = annotationPatch(obj.GetAnnotations(), res.Annotations)
		if len(resp.Patches) > 0 {
			pt := admissionv1.PatchTypeJSONPatch
			resp.PatchType = &pt
		}
	}
	return resp.WithWarnings(res.Warnings...)
}

// followUp queues the parent writes and the drift signal the result asks
// for; a dry run has no side effects (sideEffects: NoneOnDryRun), so it
// neither spends a once approval nor signals.
func (d *Drift) followUp(ctx context.Context, req admission.Request, child, parent *unstructured.Unstructured, in kausality.Request, res kausality.Result) {
	if isDryRun(req) {
		return
	}
	if res.ParentUpdate != nil {
		switch {
		case req.SubResource == "status" && in.Object != nil:
			// A status update records its author on the object itself.
			self := metav1.OwnerReference{APIVersion: in.Object.GetAPIVersion(), Kind: in.Object.GetKind(), Name: in.Object.GetName(), UID: in.Object.GetUID()}
			d.Updates.Enqueue(self, req.Namespace, in.Object.GetGeneration(), *res.ParentUpdate)
		case parent != nil:
			u := *res.ParentUpdate
			u.ConsumeOnce = nil // spent synchronously in Handle
			if u != (kausality.ParentUpdate{}) {
				d.Updates.Enqueue(*metav1.GetControllerOf(child), req.Namespace, in.Parent.Generation, u)
			}
		}
	}
	if res.Drift == nil || res.Drift.Rejected || parent == nil || isSecret(child) {
		return
	}
	s := d.signal(req, child, parent, in, res)
	if !d.Signals.Enqueue(s) {
		log.FromContext(ctx).V(1).Info("drift signal not queued (duplicate or queue full)", "driftID", s.ID)
	}
}

func (d *Drift) signal(req admission.Request, child, parent *unstructured.Unstructured, in kausality.Request, res kausality.Result) workflows.DriftSignal {
	p := workflows.DriftObjectRef{APIVersion: parent.GetAPIVersion(), Kind: parent.GetKind(), Namespace: parent.GetNamespace(), Name: parent.GetName(), UID: string(parent.GetUID())}
	c := workflows.DriftObjectRef{APIVersion: child.GetAPIVersion(), Kind: child.GetKind(), Namespace: child.GetNamespace(), Name: child.GetName(), UID: string(child.GetUID())}
	var oldHash, newHash string
	if in.OldObject != nil {
		oldHash = kv1.SpecHash(in.OldObject.Object)
	}
	if in.Object != nil {
		newHash = kv1.SpecHash(in.Object.Object)
	}
	snoozed, snoozedUntil := res.Drift.Snoozed, res.Drift.SnoozedUntil
	if res.Drift.Approved {
		// The decision reads the snooze only for drift it reports; the
		// Resolved report of an approved change is silenced all the same.
		if s, err := kv1.ParseSnooze(in.Parent.Annotations[kv1.AnnotationSnooze]); err == nil && s != nil && s.Active(in.Now) {
			snoozed, snoozedUntil = true, s.Expiry
		}
	}
	var observed int64
	if og := in.Parent.ObservedGeneration; og != nil {
		observed = *og
	}
	return workflows.DriftSignal{
		ID: reportID(p, c, string(req.Operation)+":"+oldHash+">"+newHash), Parent: p, Child: c,
		ParentGeneration: in.Parent.Generation, ParentSpecHash: SpecHash(parent),
		ParentObservedGeneration: observed, ParentLifecyclePhase: kausality.LifecyclePhase(*in.Parent), ChildGeneration: child.GetGeneration(),
		Operation: string(req.Operation), User: req.UserInfo.Username, Groups: req.UserInfo.Groups,
		RequestUID: string(req.UID), FieldManager: fieldManager(req), DryRun: isDryRun(req),
		OldObject: rawOrNil(req.OldObject), NewObject: rawOrNil(req.Object),
		Mode: string(res.Drift.Mode), Denied: res.Drift.Denied, Approved: res.Drift.Approved, Snoozed: snoozed,
		SnoozedUntil: snoozedUntil, DetectedAt: in.Now,
	}
}

// isSecret: a Secret's drift is never signalled, so its data never goes
// into a workflow's history or a DriftReport (policies may not route
// Secrets; this holds if one did).
func isSecret(u *unstructured.Unstructured) bool {
	return u.GetAPIVersion() == "v1" && u.GetKind() == "Secret"
}

// fieldManager is the request's fieldManager option; CREATE, UPDATE and
// PATCH options carry one, DELETE options none.
func fieldManager(req admission.Request) string {
	var o struct {
		FieldManager string `json:"fieldManager"`
	}
	if len(req.Options.Raw) == 0 || json.Unmarshal(req.Options.Raw, &o) != nil {
		return ""
	}
	return o.FieldManager
}

// parent maps the cached parent to what the decision reads.
func (d *Drift) parent(u *unstructured.Unstructured) *kausality.Parent {
	p := &kausality.Parent{
		APIVersion: u.GetAPIVersion(), Kind: u.GetKind(), Namespace: u.GetNamespace(), Name: u.GetName(), UID: string(u.GetUID()),
		Generation: d.Parents.SpecGeneration(u), MetadataGeneration: u.GetGeneration(),
		Annotations: u.GetAnnotations(), Deleting: u.GetDeletionTimestamp() != nil,
		Init: d.Policies.Current().Initialization(u.GroupVersionKind().Group, u.GetKind()),
	}
	p.RollingOut, _, _ = unstructured.NestedBool(u.Object, rollingOutField)
	if og, ok := kausality.ObservedGeneration(u); ok {
		p.ObservedGeneration = &og
	} else if og, err := strconv.ParseInt(p.Annotations[kv1.AnnotationObservedGeneration], 10, 64); err == nil {
		p.ObservedGeneration = &og
	}
	conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
	for _, c := range conds {
		if m, ok := c.(map[string]any); ok {
			t, _ := m["type"].(string)
			s, _ := m["status"].(string)
			p.Conditions = append(p.Conditions, kausality.Condition{Type: t, Status: s})
		}
	}
	return p
}

// ownSpecGeneration is the generation of the updated object's last spec
// change, from the parent cache, when the update writes approvals on it (so
// the decision can warn about ones that cannot apply); 0 otherwise or when
// unknown. Objects carrying approvals are parents, whose kinds are cached.
func (d *Drift) ownSpecGeneration(ctx context.Context, namespace string, obj, old *unstructured.Unstructured) int64 {
	if obj == nil || old == nil || obj.GetAnnotations()[kv1.AnnotationApprovals] == old.GetAnnotations()[kv1.AnnotationApprovals] {
		return 0
	}
	self := metav1.OwnerReference{APIVersion: obj.GetAPIVersion(), Kind: obj.GetKind(), Name: obj.GetName(), UID: obj.GetUID()}
	cached, err := d.Parents.Parent(ctx, self, namespace)
	if err != nil {
		log.FromContext(ctx).V(1).Info("spec generation unknown; approvals not checked", "error", err.Error())
		return 0
	}
	if cached == nil {
		return 0
	}
	return d.Parents.SpecGeneration(cached)
}

// onceToConsume is the once approval the decision let a change through on.
func onceToConsume(res kausality.Result) *kv1.Approval {
	if res.Allowed && res.ParentUpdate != nil {
		return res.ParentUpdate.ConsumeOnce
	}
	return nil
}

func isDryRun(req admission.Request) bool { return req.DryRun != nil && *req.DryRun }

// reportID is the first 16 hex of sha256(parent + child + diff) (docs/drift.md);
// the diff is named by the operation and the spec hashes before and after.
func reportID(parent, child workflows.DriftObjectRef, diff string) string {
	sum := sha256.Sum256([]byte(strings.Join([]string{
		parent.APIVersion, parent.Kind, parent.Namespace, parent.Name,
		child.APIVersion, child.Kind, child.Namespace, child.Name, diff,
	}, "\x00")))
	return hex.EncodeToString(sum[:])[:16]
}

// annotationPatch turns the decision's annotation changes into JSON patch
// operations against the object's current annotations.
func annotationPatch(current map[string]string, changes map[string]*string) []jsonpatch.JsonPatchOperation {
	keys := make([]string, 0, len(changes))
	for k := range changes {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var ops []jsonpatch.JsonPatchOperation
	if current == nil {
		add := map[string]any{}
		for _, k := range keys {
			if v := changes[k]; v != nil {
				add[k] = *v
			}
		}
		if len(add) == 0 {
			return nil
		}
		return []jsonpatch.JsonPatchOperation{jsonpatch.NewOperation("add", "/metadata/annotations", add)}
	}
	for _, k := range keys {
		path := "/metadata/annotations/" + strings.ReplaceAll(strings.ReplaceAll(k, "~", "~0"), "/", "~1")
		v := changes[k]
		cur, exists := current[k]
		switch {
		case v == nil && exists:
			ops = append(ops, jsonpatch.NewOperation("remove", path, nil))
		case v != nil && (!exists || cur != *v):
			ops = append(ops, jsonpatch.NewOperation("add", path, *v))
		}
	}
	return ops
}

func decodeOptional(raw runtime.RawExtension) (*unstructured.Unstructured, error) {
	if len(raw.Raw) == 0 {
		return nil, nil
	}
	// UnmarshalJSON keeps integers int64, as the unstructured helpers expect.
	u := &unstructured.Unstructured{}
	if err := u.UnmarshalJSON(raw.Raw); err != nil {
		return nil, err
	}
	return u, nil
}

func rawOrNil(raw runtime.RawExtension) json.RawMessage {
	if len(raw.Raw) == 0 {
		return nil
	}
	return json.RawMessage(raw.Raw)
}

// confirmDrift judges a drift again on the live parent: the cache may not
// yet hold the parent change its controller is acting on (a rollout begun
// a moment ago). The read costs one GET, on the drift path only.
func (d *Drift) confirmDrift(ctx context.Context, ref metav1.OwnerReference, namespace string, in *kausality.Request,
	cached *unstructured.Unstructured, res kausality.Result) (*unstructured.Unstructured, kausality.Result) {
	live, err := d.Parents.Live(ctx, ref, namespace)
	if err != nil {
		log.FromContext(ctx).Error(err, "re-read parent to confirm drift; judging on the cached one")
	}
	if live == nil || live.GetResourceVersion() == cached.GetResourceVersion() {
		return cached, res
	}
	in.Parent = d.parent(live)
	return live, kausality.Decide(*in)
}
