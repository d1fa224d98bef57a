package deploy

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/restmapper"
	"k8s.io/utils/ptr"

	"github.com/remedy-dev/remedy/test/procs"
)

// dryRunEveryObject: every object under deploy/ and in temporal-dev.yaml is
// one the API server accepts as written (server-side apply, dry run, strict
// field validation), with Remedy's admission webhooks serving.
func dryRunEveryObject(t *testing.T) {
	var objs []map[string]any
	require.NoError(t, filepath.WalkDir(filepath.Join(procs.Root, "deploy"), func(path string, d os.DirEntry, err error) error {
		if err == nil && d.IsDir() && d.Name() == "helm" {
			return filepath.SkipDir // templates, generated from the rest (test/helm installs them)
		}
		if err != nil || d.IsDir() || !strings.HasSuffix(path, ".yaml") || d.Name() == "kustomization.yaml" ||
			strings.HasSuffix(path, "_test.yaml") { // promtool's rule tests, not objects
			return err
		}
		rel, _ := filepath.Rel(procs.Root, path)
		objs = append(objs, procs.Manifests(t, rel)...)
		return nil
	}))
	objs = append(objs, procs.Manifests(t, "temporal-dev.yaml")...)
	require.Greater(t, len(objs), 50)

	dyn, err := dynamic.NewForConfig(procs.Env().Config)
	require.NoError(t, err)
	dc, err := discovery.NewDiscoveryClientForConfig(procs.Env().Config)
	require.NoError(t, err)
	mapper := restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(dc))
	ctx := context.Background()
	apply := func(o *unstructured.Unstructured, dryRun bool) error {
		gvk := o.GroupVersionKind()
		m, err := mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
		if err != nil {
			return err
		}
		var ri dynamic.ResourceInterface = dyn.Resource(m.Resource)
		if m.Scope.Name() == meta.RESTScopeNameNamespace {
			ri = dyn.Resource(m.Resource).Namespace(o.GetNamespace())
		}
		body, err := o.MarshalJSON()
		if err != nil {
			return err
		}
		opts := metav1.PatchOptions{FieldManager: "deploy-parity", Force: ptr.To(true), FieldValidation: "Strict"}
		if dryRun {
			opts.DryRun = []string{metav1.DryRunAll}
		}
		_, err = ri.Patch(ctx, o.GetName(), types.ApplyPatchType, body, opts)
		return err
	}
	// Namespaces are created for real, so the objects in them can be tried.
	for _, o := range objs {
		if u := (&unstructured.Unstructured{Object: o}); u.GetKind() == "Namespace" {
			require.NoError(t, apply(u, false), u.GetName())
		}
	}
	for _, o := range objs {
		u := &unstructured.Unstructured{Object: o}
		assert.NoError(t, apply(u, true), "%s %s/%s", u.GetKind(), u.GetNamespace(), u.GetName())
	}
}
