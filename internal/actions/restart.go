package actions

import (
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/remedy-dev/remedy/api/v1alpha1"
)

type restart struct{}

func init() { register(restart{}) }

func (restart) Name() string    { return "restart" }
func (restart) Kinds() []string { return []string{"Deployment", "StatefulSet", "DaemonSet"} }

func (restart) Rules() []rbacv1.PolicyRule {
	return []rbacv1.PolicyRule{{
		APIGroups: []string{"apps"},
		Resources: []string{"deployments", "statefulsets", "daemonsets"},
		Verbs:     []string{"get", "patch"},
	}}
}

func (restart) Validate(req Request) error {
	if req.Token == "" {
		return invalid("restart needs a restart token")
	}
	return nil
}

func (restart) Plan(obj *unstructured.Unstructured, req Request) (Plan, error) {
	before, _, _ := unstructured.NestedString(obj.Object, "spec", "template", "metadata", "annotations", v1alpha1.RestartedAtAnnotation)
	if before == "" {
		before = "never"
	}
	p := Plan{
		Change: change(obj, "restarted", v1alpha1.RestartedAtAnnotation+": "+before, v1alpha1.RestartedAtAnnotation+": "+req.Token),
		Rollback: v1alpha1.RollbackInformation{
			Available: false,
			Reason:    "a rolling restart cannot be undone",
		},
		// The token is fixed per run, so a retried write finds it already applied.
		NoOp: before == req.Token,
	}
	patch, err := mergePatch(obj, map[string]any{"spec": map[string]any{"template": map[string]any{
		"metadata": map[string]any{"annotations": map[string]any{v1alpha1.RestartedAtAnnotation: req.Token}},
	}}})
	p.Patch = patch
	return p, err
}
