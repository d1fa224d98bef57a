package actions

import (
	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/remedy-dev/remedy/api/v1alpha1"
)

type deletePod struct{}

func init() { register(deletePod{}) }

func (deletePod) Name() string    { return "delete-pod" }
func (deletePod) Kinds() []string { return []string{"Pod"} }

func (deletePod) Rules() []rbacv1.PolicyRule {
	return []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"get", "delete"}}}
}

func (deletePod) Validate(Request) error { return nil }

func (deletePod) Plan(obj *unstructured.Unstructured, _ Request) (Plan, error) {
	phase, _, _ := unstructured.NestedString(obj.Object, "status", "phase")
	p := Plan{
		Change:   change(obj, "deleted", "pod: "+orNone(phase), "pod: deleted"),
		Rollback: v1alpha1.RollbackInformation{Reason: "a deleted pod is recreated by its controller, not restored"},
		Delete:   true,
		// A pod already being deleted is at the target state.
		NoOp: obj.GetDeletionTimestamp() != nil,
	}
	return p, nil
}

func orNone(s string) string {
	if s == "" {
		return "none"
	}
	return s
}

func rawJSON(b []byte) *apiextensionsv1.JSON { return &apiextensionsv1.JSON{Raw: b} }
