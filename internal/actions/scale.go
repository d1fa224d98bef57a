package actions

import (
	"encoding/json"
	"fmt"
	"maps"

	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/utils/ptr"

	"github.com/remedy-dev/remedy/api/v1alpha1"
)

type scale struct{}

func init() { register(scale{}) }

func (scale) Name() string    { return "scale" }
func (scale) Kinds() []string { return []string{"Deployment", "StatefulSet", "ReplicaSet"} }

func (scale) Rules() []rbacv1.PolicyRule {
	return []rbacv1.PolicyRule{{
		APIGroups: []string{"apps"},
		Resources: []string{"deployments", "statefulsets", "replicasets"},
		Verbs:     []string{"get", "patch"},
	}}
}

func (scale) Validate(req Request) error {
	if req.Params.Replicas == nil {
		return invalid("action scale needs parameters.replicas")
	}
	if r := *req.Params.Replicas; r < 0 || r > 10000 {
		return invalid("parameters.replicas must be between 0 and 10000, got %d", r)
	}
	return nil
}

func (scale) Plan(obj *unstructured.Unstructured, req Request) (Plan, error) {
	cur, found, err := unstructured.NestedInt64(obj.Object, "spec", "replicas")
	if err != nil {
		return Plan{}, fmt.Errorf("read spec.replicas: %w", err)
	}
	if !found {
		cur = 1 // the API server's default for all three kinds
	}
	want := int64(*req.Params.Replicas)
	p := Plan{
		Change: change(obj, "scaled", fmt.Sprintf("replicas: %d", cur), fmt.Sprintf("replicas: %d", want)),
		Rollback: v1alpha1.RollbackInformation{
			Available:                 true,
			RollbackAction:            "scale",
			RollbackParameters:        &v1alpha1.ActionParameters{Replicas: ptr.To(int32(cur))},
			EstimatedRollbackDuration: "10s",
		},
		NoOp: cur == want,
	}
	patch, err := mergePatch(obj, map[string]any{"spec": map[string]any{"replicas": want}})
	p.Patch = patch
	return p, err
}

func change(obj *unstructured.Unstructured, verb, before, after string) v1alpha1.ResourceChange {
	return v1alpha1.ResourceChange{
		Kind: obj.GetKind(), Namespace: obj.GetNamespace(), Name: obj.GetName(),
		Action: verb, Before: before, After: after,
	}
}

// mergePatch adds the object's resourceVersion to body, so the API server
// rejects the write with a conflict if the object changed since it was read.
// It keeps whatever else body's metadata holds (a patch action's labels and
// annotations), and leaves body itself unchanged.
func mergePatch(obj *unstructured.Unstructured, body map[string]any) (string, error) {
	out := maps.Clone(body)
	md, _ := body["metadata"].(map[string]any)
	md = maps.Clone(md)
	if md == nil {
		md = map[string]any{}
	}
	md["resourceVersion"] = obj.GetResourceVersion()
	out["metadata"] = md
	b, err := json.Marshal(out)
	if err != nil {
		return "", fmt.Errorf("encode patch: %w", err)
	}
	return string(b), nil
}
