package gate

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	dynfake "k8s.io/client-go/dynamic/fake"

	"github.com/remedy-dev/remedy/api/v1alpha1"
	"github.com/remedy-dev/remedy/internal/alertmanager"
)

// A Writer writes the object the gate checked and nothing else: another
// name, a create, a list or a collection delete never reaches the API
// server, and a Writer the gate did not make writes nothing at all.
func TestWriterWritesOnlyTheCheckedObject(t *testing.T) {
	deploy := func(name string) *unstructured.Unstructured {
		u := &unstructured.Unstructured{}
		u.SetAPIVersion("apps/v1")
		u.SetKind("Deployment")
		u.SetNamespace("shop")
		u.SetName(name)
		return u
	}
	gvr := schema.GroupVersionResource{Group: "apps", Version: "v1", Resource: "deployments"}
	dyn := dynfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(), map[schema.GroupVersionResource]string{gvr: "DeploymentList"}, deploy("web"), deploy("admin"))
	w := Writer{target: v1alpha1.ObjectRef{APIVersion: "apps/v1", Kind: "Deployment", Namespace: "shop", Name: "web"}, as: "remedy-action-restart",
		ri: dyn.Resource(gvr).Namespace("shop")}
	r := w.Resource()
	patch := []byte(`{"metadata":{"labels":{"x":"y"}}}`)
	ctx := t.Context()

	_, err := r.Patch(ctx, "web", types.MergePatchType, patch, metav1.PatchOptions{})
	require.NoError(t, err, "the checked target")
	_, err = r.Get(ctx, "web", metav1.GetOptions{})
	require.NoError(t, err)

	for name, call := range map[string]func() error{
		"patch another": func() error {
			_, err := r.Patch(ctx, "admin", types.MergePatchType, patch, metav1.PatchOptions{})
			return err
		},
		"delete another":    func() error { return r.Delete(ctx, "admin", metav1.DeleteOptions{}) },
		"update another":    func() error { _, err := r.Update(ctx, deploy("admin"), metav1.UpdateOptions{}); return err },
		"apply another":     func() error { _, err := r.Apply(ctx, "web", deploy("admin"), metav1.ApplyOptions{}); return err },
		"get another":       func() error { _, err := r.Get(ctx, "admin", metav1.GetOptions{}); return err },
		"create":            func() error { _, err := r.Create(ctx, deploy("new"), metav1.CreateOptions{}); return err },
		"list":              func() error { _, err := r.List(ctx, metav1.ListOptions{}); return err },
		"delete collection": func() error { return r.DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{}) },
		"a zero Writer": func() error {
			_, err := Writer{}.Resource().Patch(ctx, "", types.MergePatchType, patch, metav1.PatchOptions{})
			return err
		},
	} {
		err := call()
		require.Error(t, err, name)
		assert.Contains(t, err.Error(), "write gate", name)
	}
	admin, err := dyn.Resource(gvr).Namespace("shop").Get(ctx, "admin", metav1.GetOptions{})
	require.NoError(t, err)
	assert.Empty(t, admin.GetLabels(), "nothing reached the object that was not checked")
	for _, a := range dyn.Actions() {
		if a.GetVerb() != "get" {
			assert.Equal(t, "patch", a.GetVerb(), "only the one patch was sent")
		}
	}
}

// A silence covers its alert's labels exactly, and one of them names the
// rule's namespace: no matcher set reaches another namespace.
func TestSilenceStaysInTheRulesNamespace(t *testing.T) {
	eq := func(n, v string) alertmanager.SilenceMatcher {
		return alertmanager.SilenceMatcher{Name: n, Value: v, IsEqual: true}
	}
	for _, tc := range []struct {
		name string
		ms   []alertmanager.SilenceMatcher
		ok   bool
	}{
		{"the alert's labels", []alertmanager.SilenceMatcher{eq("alertname", "Latency"), eq("namespace", "shop")}, true},
		{"another namespace", []alertmanager.SilenceMatcher{eq("alertname", "Latency"), eq("namespace", "bank")}, false},
		{"no namespace", []alertmanager.SilenceMatcher{eq("alertname", "Latency")}, false},
		{"a regex namespace", []alertmanager.SilenceMatcher{{Name: "namespace", Value: "shop|bank", IsRegex: true, IsEqual: true}}, false},
		{"a negative matcher", []alertmanager.SilenceMatcher{eq("namespace", "shop"), {Name: "alertname", Value: "x"}}, false},
		{"two namespaces", []alertmanager.SilenceMatcher{eq("namespace", "shop"), eq("namespace", "bank")}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := silenceInNamespace("shop", tc.ms)
			if tc.ok {
				assert.NoError(t, err)
			} else {
				assert.Error(t, err)
			}
		})
	}
}
