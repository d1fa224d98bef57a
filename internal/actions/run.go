package actions

import (
	"context"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"

	"github.com/remedy-dev/remedy/api/v1alpha1"
)

// Mode says how far Run goes.
type Mode int

const (
	// Inspect reads the object and plans the write without sending it.
	Inspect Mode = iota
	// DryRun sends the exact write as a server-side dry-run.
	DryRun
	// Apply sends the write.
	Apply
)

// FieldManager names Remedy's writes in managedFields.
const FieldManager = "remedy"

// Applier is an action whose write is more than one merge patch (ownership
// migration, server-side apply). Run hands it the write, dry-run or not; it
// returns the plan updated with what it found while writing.
type Applier interface {
	Apply(ctx context.Context, ri dynamic.ResourceInterface, obj *unstructured.Unstructured, plan Plan, req Request, dryRun bool) (Plan, error)
}

// Relational is an action whose plan depends on objects besides its target
// (rollout-undo: the Deployment's ReplicaSets). Related reads them as the
// action's identity; PlanRelated is Plan with them, and as pure.
type Relational interface {
	Related(ctx context.Context, reads dynamic.Interface, obj *unstructured.Unstructured) ([]unstructured.Unstructured, error)
	PlanRelated(obj *unstructured.Unstructured, related []unstructured.Unstructured, req Request) (Plan, error)
}

// landedChecker is an action that recognises its own earlier write on the
// live object, where planning again would not come out a no-op (Guard).
type landedChecker interface {
	Landed(live *unstructured.Unstructured, prior Plan) bool
}

// Run validates req, reads the live target, plans the action's write and, by
// mode, dry-runs or applies it. API errors are returned unwrapped in kind so
// callers can classify them with apierrors.
func Run(ctx context.Context, dyn dynamic.Interface, mapper meta.RESTMapper, req Request, mode Mode) (Plan, error) {
	if _, err := Validate(req); err != nil {
		return Plan{}, err
	}
	ri, err := Resource(dyn, mapper, req.Target)
	if err != nil {
		return Plan{}, err
	}
	return run(ctx, ri, dyn, req, mode, Guard{})
}

// ApplyOnce applies req like Run, through ri, the target's resource (the
// write gate hands it out bound to the target it checked), keeping the write
// to at most once across attempts: see Guard. reads, a read-only client of
// the same identity, reads what a Relational action plans from.
func ApplyOnce(ctx context.Context, ri dynamic.ResourceInterface, reads dynamic.Interface, req Request, g Guard) (Plan, error) {
	return run(ctx, ri, reads, req, Apply, g)
}

// planOf plans a's write on obj, reading what a Relational action needs.
func planOf(ctx context.Context, a Action, reads dynamic.Interface, obj *unstructured.Unstructured, req Request) (Plan, error) {
	rel, ok := a.(Relational)
	if !ok {
		return a.Plan(obj, req)
	}
	if reads == nil {
		return Plan{}, fmt.Errorf("action %s reads objects besides its target, and was given no client to read them", a.Name())
	}
	related, err := rel.Related(ctx, reads, obj)
	if err != nil {
		return Plan{}, err
	}
	return rel.PlanRelated(obj, related, req)
}

// Resource maps t's kind to its resource on dyn, in t's namespace when the
// kind is namespaced.
func Resource(dyn dynamic.Interface, mapper meta.RESTMapper, t v1alpha1.ObjectRef) (dynamic.ResourceInterface, error) {
	gv, err := schema.ParseGroupVersion(t.APIVersion)
	if err != nil {
		return nil, invalid("target.apiVersion %q: %v", t.APIVersion, err)
	}
	mapping, err := mapper.RESTMapping(gv.WithKind(t.Kind).GroupKind(), gv.Version)
	if err != nil {
		return nil, fmt.Errorf("map %s %s: %w", t.APIVersion, t.Kind, err)
	}
	if mapping.Scope.Name() == meta.RESTScopeNameNamespace {
		return dyn.Resource(mapping.Resource).Namespace(t.Namespace), nil
	}
	return dyn.Resource(mapping.Resource), nil
}

func run(ctx context.Context, ri dynamic.ResourceInterface, reads dynamic.Interface, req Request, mode Mode, g Guard) (Plan, error) {
	a, err := Validate(req)
	if err != nil {
		return Plan{}, err
	}
	obj, err := ri.Get(ctx, req.Target.Name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) && g.deleted(nil) {
		return g.landed(), nil
	}
	if err != nil {
		return Plan{}, err
	}
	if lc, ok := a.(landedChecker); ok && g.Prior != nil && g.Prior.UID != "" && lc.Landed(obj, *g.Prior) {
		return g.landed(), nil
	}
	plan, err := planOf(ctx, a, reads, obj, req)
	if err != nil {
		return plan, err
	}
	if g.applied(obj, plan) {
		return g.landed(), nil
	}
	if mode == Inspect || plan.NoOp {
		return plan, nil
	}
	plan.UID, plan.ResourceVersion = string(obj.GetUID()), obj.GetResourceVersion()
	if g.Record != nil {
		if err := g.Record(plan); err != nil {
			return Plan{}, fmt.Errorf("record plan before writing: %w", err)
		}
	}
	if ap, ok := a.(Applier); ok {
		return ap.Apply(ctx, ri, obj, plan, req, mode == DryRun)
	}
	var dryRun []string
	if mode == DryRun {
		dryRun = []string{metav1.DryRunAll}
	}
	if plan.Delete {
		uid, rv := obj.GetUID(), obj.GetResourceVersion()
		return plan, ri.Delete(ctx, req.Target.Name, metav1.DeleteOptions{
			DryRun:        dryRun,
			Preconditions: &metav1.Preconditions{UID: &uid, ResourceVersion: &rv},
		})
	}
	_, err = ri.Patch(ctx, req.Target.Name, types.MergePatchType, []byte(plan.Patch), metav1.PatchOptions{FieldManager: FieldManager, DryRun: dryRun})
	return plan, err
}
