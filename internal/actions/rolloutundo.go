package actions

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"strconv"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"

	"github.com/remedy-dev/remedy/api/v1alpha1"
)

// Keys the Deployment controller writes, as `kubectl rollout undo` reads them.
const (
	revisionAnnotation = "deployment.kubernetes.io/revision"
	podTemplateHash    = "pod-template-hash"
)

var replicaSets = schema.GroupVersionResource{Group: "apps", Version: "v1", Resource: "replicasets"}

// rolloutUndo restores a Deployment's pod template from one of its own
// ReplicaSets, as `kubectl rollout undo` does: the revision before the
// current one, or parameters.revision. It can only move the Deployment to a
// template that one of its ReplicaSets already ran, never to a new one.
type rolloutUndo struct{}

func init() { register(rolloutUndo{}) }

func (rolloutUndo) Name() string    { return "rollout-undo" }
func (rolloutUndo) Kinds() []string { return []string{"Deployment"} }

// Rules: the Deployment is read and patched; its ReplicaSets, which hold
// the revisions, are only listed.
func (rolloutUndo) Rules() []rbacv1.PolicyRule {
	return []rbacv1.PolicyRule{
		{APIGroups: []string{"apps"}, Resources: []string{"deployments"}, Verbs: []string{"get", "patch"}},
		{APIGroups: []string{"apps"}, Resources: []string{"replicasets"}, Verbs: []string{"list"}},
	}
}

func (rolloutUndo) Validate(req Request) error {
	p := req.Params
	if p.Replicas != nil || p.Container != "" || p.Image != "" || p.Patch != nil || p.Scope != "" || p.FieldManager != "" {
		return invalid("action rollout-undo takes parameters.revision only")
	}
	if p.Revision != nil && *p.Revision < 1 {
		return invalid("parameters.revision must be at least 1, got %d", *p.Revision)
	}
	if p.Revision == nil && req.Token == "" {
		return invalid("action rollout-undo needs the run's token, so a retry recognises its own write")
	}
	return nil
}

// Plan is never enough: the revisions live in the ReplicaSets (PlanRelated).
func (rolloutUndo) Plan(obj *unstructured.Unstructured, _ Request) (Plan, error) {
	return Plan{}, fmt.Errorf("rollout-undo of %s %s plans from its ReplicaSets: run it through actions.Run or ApplyOnce", obj.GetKind(), obj.GetName())
}

// Related lists the ReplicaSets the Deployment controls, by its selector
// and its controller reference.
func (rolloutUndo) Related(ctx context.Context, reads dynamic.Interface, d *unstructured.Unstructured) ([]unstructured.Unstructured, error) {
	sel, _, err := unstructured.NestedMap(d.Object, "spec", "selector")
	if err != nil {
		return nil, fmt.Errorf("read selector: %w", err)
	}
	var ls metav1.LabelSelector
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(sel, &ls); err != nil {
		return nil, fmt.Errorf("decode selector: %w", err)
	}
	s, err := metav1.LabelSelectorAsSelector(&ls)
	if err != nil || s.Empty() {
		return nil, invalid("Deployment %s/%s has no usable selector", d.GetNamespace(), d.GetName())
	}
	list, err := reads.Resource(replicaSets).Namespace(d.GetNamespace()).List(ctx, metav1.ListOptions{LabelSelector: s.String()})
	if err != nil {
		return nil, err
	}
	var owned []unstructured.Unstructured
	for _, rs := range list.Items {
		if ref := metav1.GetControllerOfNoCopy(&rs); ref != nil && ref.UID == d.GetUID() {
			owned = append(owned, rs)
		}
	}
	return owned, nil
}

// revision is one ReplicaSet's revision and template (without the hash
// label), and that label's value.
type revision struct {
	number   int64
	hash     string
	template map[string]any
}

// PlanRelated plans the undo from the Deployment and its ReplicaSets. The
// current revision is the ReplicaSet that runs the Deployment's template;
// the target is parameters.revision, or the highest revision below the
// current one. The inverse restores the current revision by number.
func (u rolloutUndo) PlanRelated(d *unstructured.Unstructured, related []unstructured.Unstructured, req Request) (Plan, error) {
	ref := d.GetNamespace() + "/" + d.GetName()
	live, _, err := unstructured.NestedMap(d.Object, "spec", "template")
	if err != nil {
		return Plan{}, fmt.Errorf("read template: %w", err)
	}
	revs, err := revisions(related)
	if err != nil {
		return Plan{}, fmt.Errorf("Deployment %s: %w", ref, err)
	}
	var current *revision
	for i := range revs {
		if same, err := sameTemplate(revs[i].template, live); err != nil {
			return Plan{}, err
		} else if same {
			current = &revs[i]
		}
	}
	if current == nil {
		// The controller has not made the ReplicaSet of a fresh template
		// yet: a retry finds it.
		return Plan{}, fmt.Errorf("Deployment %s: no ReplicaSet runs its current template yet (the Deployment controller has not caught up)", ref)
	}
	pinned := req.Params.Revision != nil
	if restored := d.GetAnnotations()[v1alpha1.RolloutRestoredAnnotation]; !pinned && restored != "" && restored == current.hash {
		// Undoing an undo restores the revision it undid: a crash that
		// persists after an undo is for a person, not for another undo.
		return Plan{}, invalid("Deployment %s runs revision %d, which a rollout-undo restored (%s): undoing it would bring back the revision that undo replaced; a person must look",
			ref, current.number, d.GetAnnotations()[v1alpha1.RolloutUndoneAtAnnotation])
	}
	target, err := pick(revs, current.number, req.Params.Revision, ref)
	if err != nil {
		return Plan{}, err
	}
	p := Plan{
		Change: change(d, "rollout undone", fmt.Sprintf("template: revision %d", current.number), fmt.Sprintf("template: revision %d", target.number)),
		Rollback: v1alpha1.RollbackInformation{
			Available: true, RollbackAction: u.Name(), EstimatedRollbackDuration: "30s",
			RollbackParameters: &v1alpha1.ActionParameters{Revision: &current.number},
		},
		NoOp: target.number == current.number,
	}
	body := map[string]any{"spec": map[string]any{"template": diffMerge(live, target.template)}}
	if pinned {
		// A rollback of an undo (or a chosen revision): the undo's marks go.
		body["metadata"] = map[string]any{"annotations": map[string]any{v1alpha1.RolloutUndoneAtAnnotation: nil, v1alpha1.RolloutRestoredAnnotation: nil}}
	} else {
		body["metadata"] = map[string]any{"annotations": map[string]any{v1alpha1.RolloutUndoneAtAnnotation: req.Token, v1alpha1.RolloutRestoredAnnotation: target.hash}}
	}
	p.Patch, err = mergePatch(d, body)
	return p, err
}

// Landed recognises this run's own undo on the live Deployment, for a
// retried write (Guard): planned again, the undo would find the revision it
// restored current and refuse (or, for anyone else, undo the undo). It
// holds when the object moved past the pinned resourceVersion and carries
// the marks prior's patch wrote. A pinned undo (a rollback) writes no
// marks; its replanned write is a no-op instead.
func (rolloutUndo) Landed(live *unstructured.Unstructured, prior Plan) bool {
	if string(live.GetUID()) != prior.UID || live.GetResourceVersion() == prior.ResourceVersion {
		return false
	}
	var patch struct {
		Metadata struct {
			Annotations map[string]*string `json:"annotations"`
		} `json:"metadata"`
	}
	if json.Unmarshal([]byte(prior.Patch), &patch) != nil {
		return false
	}
	marks := patch.Metadata.Annotations
	at, restored := marks[v1alpha1.RolloutUndoneAtAnnotation], marks[v1alpha1.RolloutRestoredAnnotation]
	if at == nil || restored == nil {
		return false
	}
	a := live.GetAnnotations()
	return a[v1alpha1.RolloutUndoneAtAnnotation] == *at && a[v1alpha1.RolloutRestoredAnnotation] == *restored
}

// pick is the revision to restore: want, or the highest below current.
func pick(revs []revision, current int64, want *int64, ref string) (revision, error) {
	var have []int64
	for _, r := range revs {
		have = append(have, r.number)
	}
	slices.Sort(have)
	if want != nil {
		for _, r := range revs {
			if r.number == *want {
				return r, nil
			}
		}
		return revision{}, invalid("Deployment %s has no revision %d (its ReplicaSets hold revisions %v)", ref, *want, have)
	}
	var best *revision
	for i, r := range revs {
		if r.number < current && (best == nil || r.number > best.number) {
			best = &revs[i]
		}
	}
	if best == nil {
		return revision{}, invalid("nothing to undo: Deployment %s has no revision before its current revision %d (its ReplicaSets hold revisions %v)", ref, current, have)
	}
	return *best, nil
}

func revisions(rss []unstructured.Unstructured) ([]revision, error) {
	var out []revision
	for _, rs := range rss {
		raw, ok := rs.GetAnnotations()[revisionAnnotation]
		if !ok {
			continue
		}
		n, err := strconv.ParseInt(raw, 10, 64)
		if err != nil {
			return nil, fmt.Errorf("ReplicaSet %s: revision %q: %w", rs.GetName(), raw, err)
		}
		tmpl, _, err := unstructured.NestedMap(rs.Object, "spec", "template")
		if err != nil {
			return nil, fmt.Errorf("ReplicaSet %s: read template: %w", rs.GetName(), err)
		}
		// The controller adds the hash label to each ReplicaSet's copy;
		// the Deployment's template never has it.
		hash := rs.GetLabels()[podTemplateHash]
		if md, ok := tmpl["metadata"].(map[string]any); ok {
			if ls, ok := md["labels"].(map[string]any); ok {
				delete(ls, podTemplateHash)
			}
		}
		out = append(out, revision{number: n, hash: hash, template: tmpl})
	}
	return out, nil
}

// sameTemplate compares two pod templates as the Deployment controller
// does: typed and semantically, so equal quantities spelled differently match.
func sameTemplate(a, b map[string]any) (bool, error) {
	var ta, tb corev1.PodTemplateSpec
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(a, &ta); err != nil {
		return false, fmt.Errorf("decode template: %w", err)
	}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(b, &tb); err != nil {
		return false, fmt.Errorf("decode template: %w", err)
	}
	delete(ta.Labels, podTemplateHash)
	delete(tb.Labels, podTemplateHash)
	return equality.Semantic.DeepEqual(ta, tb), nil
}

// diffMerge is the merge patch that turns from into to exactly: keys only
// in from become null, so nothing of the replaced template survives a merge.
func diffMerge(from, to map[string]any) map[string]any {
	out := map[string]any{}
	for k := range from {
		if _, ok := to[k]; !ok {
			out[k] = nil
		}
	}
	for k, tv := range to {
		fv, ok := from[k]
		fm, fIsMap := fv.(map[string]any)
		tm, tIsMap := tv.(map[string]any)
		switch {
		case ok && fIsMap && tIsMap:
			if d := diffMerge(fm, tm); len(d) > 0 {
				out[k] = d
			}
		case !ok || !reflect.DeepEqual(fv, tv):
			out[k] = tv
		}
	}
	return out
}
