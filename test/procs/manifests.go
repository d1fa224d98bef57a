package procs

import (
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/runtime"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
)

// Manifests decodes every object in the files glob matches under the repository root.
func Manifests(t testing.TB, glob string) []map[string]any {
	t.Helper()
	return manifestsIn(t, Root, glob)
}

func manifestsIn(t testing.TB, root, glob string) []map[string]any {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(root, glob))
	require.NoError(t, err)
	require.NotEmpty(t, files, glob)
	var out []map[string]any
	for _, f := range files {
		raw, err := os.ReadFile(f)
		require.NoError(t, err)
		dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(raw), 4096)
		for {
			var o map[string]any
			if err := dec.Decode(&o); errors.Is(err, io.EOF) {
				break
			} else {
				require.NoError(t, err, f)
			}
			if len(o) > 0 {
				out = append(out, o)
			}
		}
	}
	return out
}

// Deployment is deploy/manager's Deployment name.
func Deployment(t testing.TB, name string) appsv1.Deployment {
	t.Helper()
	return DeploymentIn(t, Root, name)
}

// DeploymentIn is the Deployment name of deploy/manager in the tree at root.
func DeploymentIn(t testing.TB, root, name string) appsv1.Deployment {
	t.Helper()
	for _, o := range manifestsIn(t, root, filepath.Join("deploy", "manager", "*.yaml")) {
		if o["kind"] == "Deployment" && o["metadata"].(map[string]any)["name"] == name {
			var d appsv1.Deployment
			require.NoError(t, Convert(o, &d))
			return d
		}
	}
	t.Fatalf("no Deployment %s in deploy/manager", name)
	return appsv1.Deployment{}
}

// Convert decodes an unstructured object strictly.
func Convert(o map[string]any, into any) error {
	return runtime.DefaultUnstructuredConverter.FromUnstructuredWithValidation(o, into, true)
}
