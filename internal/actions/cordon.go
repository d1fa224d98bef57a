package actions

import (
	"fmt"

	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/remedy-dev/remedy/api/v1alpha1"
)

// cordon sets spec.unschedulable; uncordon is the same action with the other value.
type cordon struct{ unschedulable bool }

func init() {
	register(cordon{unschedulable: true})
	register(cordon{unschedulable: false})
}

func (c cordon) Name() string {
	if c.unschedulable {
		return "cordon"
	}
	return "uncordon"
}

func (c cordon) inverse() string { return cordon{unschedulable: !c.unschedulable}.Name() }

func (cordon) Kinds() []string { return []string{"Node"} }

func (cordon) Rules() []rbacv1.PolicyRule {
	return []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"nodes"}, Verbs: []string{"get", "patch"}}}
}

func (cordon) Validate(req Request) error {
	if req.Target.Namespace != "" {
		return invalid("Nodes are cluster-scoped: target.namespace must be empty")
	}
	return nil
}

func (c cordon) Plan(obj *unstructured.Unstructured, _ Request) (Plan, error) {
	cur, _, _ := unstructured.NestedBool(obj.Object, "spec", "unschedulable")
	p := Plan{
		Change: change(obj, c.Name()+"ed", fmt.Sprintf("unschedulable: %t", cur), fmt.Sprintf("unschedulable: %t", c.unschedulable)),
		Rollback: v1alpha1.RollbackInformation{
			Available: true, RollbackAction: c.inverse(), RollbackParameters: &v1alpha1.ActionParameters{}, EstimatedRollbackDuration: "5s",
		},
		NoOp: cur == c.unschedulable,
	}
	var err error
	p.Patch, err = mergePatch(obj, map[string]any{"spec": map[string]any{"unschedulable": c.unschedulable}})
	return p, err
}
