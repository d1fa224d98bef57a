package actions

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"

	"github.com/remedy-dev/remedy/api/v1alpha1"
)

type removeInitContainer struct{}

func init() { register(removeInitContainer{}) }

func (removeInitContainer) Name() string               { return "remove-init-container" }
func (removeInitContainer) Kinds() []string            { return workloadKinds }
func (removeInitContainer) Rules() []rbacv1.PolicyRule { return workloadRules() }

func (removeInitContainer) Validate(req Request) error {
	if req.Params.Container == "" {
		return invalid("action remove-init-container needs parameters.container")
	}
	if req.Params.Scope != "" {
		return invalid("action remove-init-container always works on the pod template's initContainers; parameters.scope is for migrate-field-ownership")
	}
	return validateOwnershipParams(req.Params)
}

func (removeInitContainer) Plan(obj *unstructured.Unstructured, req Request) (Plan, error) {
	path := ScopePath(obj.GetKind(), "")
	list, remaining, err := initContainers(obj, req.Params.Container)
	if err != nil {
		return Plan{}, err
	}
	p := Plan{
		Change: change(obj, "init container removed", "initContainers: "+names(list), "initContainers: "+names(remaining)),
		NoOp:   len(list) == len(remaining),
	}
	// A merge patch replaces the whole list, so restoring the before-list
	// re-adds the container with its full spec at its old position.
	body := map[string]any{}
	if err := unstructured.SetNestedSlice(body, list, path...); err != nil {
		return Plan{}, fmt.Errorf("build rollback patch: %w", err)
	}
	raw, err := json.Marshal(body)
	if err != nil {
		return Plan{}, fmt.Errorf("encode rollback patch: %w", err)
	}
	p.Rollback = v1alpha1.RollbackInformation{
		Available: true, RollbackAction: "patch", EstimatedRollbackDuration: "30s",
		RollbackParameters: &v1alpha1.ActionParameters{Patch: rawJSON(raw)},
	}
	return p, nil
}

// Apply takes sole ownership of the init containers, then applies the list
// without the container as the same manager, so the API server drops the
// whole container instead of only the fields that manager owned.
func (removeInitContainer) Apply(ctx context.Context, ri dynamic.ResourceInterface, obj *unstructured.Unstructured, plan Plan, req Request, dryRun bool) (Plan, error) {
	manager, path := managerOrDefault(req.Params.FieldManager), ScopePath(obj.GetKind(), "")
	cur, rep, err := MigrateOwnership(ctx, ri, obj, "", manager, dryRun)
	if err != nil {
		return plan, err
	}
	_, remaining, err := initContainers(cur, req.Params.Container)
	if err != nil {
		return plan, err
	}
	if dryRun && rep.Wrote {
		// The stored object still has split ownership, so a dry-run apply
		// would fail exactly as the migration prevents; check the end state
		// with a merge patch, which replaces the list whoever owns it.
		body := map[string]any{}
		if err := unstructured.SetNestedSlice(body, remaining, path...); err != nil {
			return plan, fmt.Errorf("build end state: %w", err)
		}
		patch, err := mergePatch(obj, body)
		if err != nil {
			return plan, err
		}
		_, err = ri.Patch(ctx, obj.GetName(), types.MergePatchType, []byte(patch), metav1.PatchOptions{FieldManager: manager, DryRun: []string{metav1.DryRunAll}})
		return plan, err
	}
	out, err := ApplyAs(ctx, ri, cur, manager, path, remaining, false, dryRun)
	if err != nil {
		return plan, err
	}
	if all, left, _ := initContainers(out, req.Params.Container); len(all) == len(left) {
		return plan, nil
	}
	return plan, fmt.Errorf("remove init container %q: still present after the apply; owners %v", req.Params.Container, rep.After.Owners)
}

// initContainers returns the pod template's init containers and the list without name.
func initContainers(obj *unstructured.Unstructured, name string) (all, without []any, err error) {
	all, _, err = unstructured.NestedSlice(obj.Object, ScopePath(obj.GetKind(), "")...)
	if err != nil {
		return nil, nil, fmt.Errorf("read initContainers: %w", err)
	}
	without = []any{}
	for _, c := range all {
		if m, _ := c.(map[string]any); m["name"] != name {
			without = append(without, c)
		}
	}
	return all, without, nil
}

func names(list []any) string {
	var out []string
	for _, c := range list {
		m, _ := c.(map[string]any)
		n, _ := m["name"].(string)
		out = append(out, n)
	}
	if len(out) == 0 {
		return "none"
	}
	return strings.Join(out, ", ")
}
