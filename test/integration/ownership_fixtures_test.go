package integration

import (
	"context"
	"encoding/json"
	"sort"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"

	"github.com/remedy-dev/remedy/internal/actions"
	"github.com/remedy-dev/remedy/internal/metrics"
	"github.com/remedy-dev/remedy/internal/release"
	"github.com/remedy-dev/remedy/test/harness"
)

var (
	ownDeployments = schema.GroupVersionResource{Group: "apps", Version: "v1", Resource: "deployments"}
	ownCronJobs    = schema.GroupVersionResource{Group: "batch", Version: "v1", Resource: "cronjobs"}
)

const splitContainer = "base-os-bash"

func ownInit(name string) map[string]any {
	return map[string]any{
		"name": name, "image": "busybox:1.36", "command": []any{"sh", "-c", "echo " + name},
		"resources":       map[string]any{"requests": map[string]any{"cpu": "10m"}},
		"securityContext": map[string]any{"allowPrivilegeEscalation": false},
	}
}

// ownManifest is the workload as its author wrote it; inits go into the pod template.
func ownManifest(kind, ns, name string, inits ...any) *unstructured.Unstructured {
	labels := map[string]any{"app": name}
	podSpec := map[string]any{"containers": []any{map[string]any{"name": "app", "image": release.Image()}}}
	if len(inits) > 0 {
		podSpec["initContainers"] = inits
	}
	u := &unstructured.Unstructured{Object: map[string]any{"metadata": map[string]any{"name": name, "namespace": ns}}}
	if kind == "CronJob" {
		podSpec["restartPolicy"] = "OnFailure"
		u.SetAPIVersion("batch/v1")
		u.Object["spec"] = map[string]any{"schedule": "0 0 * * *", "jobTemplate": map[string]any{"spec": map[string]any{
			"template": map[string]any{"spec": podSpec}}}}
	} else {
		u.SetAPIVersion("apps/v1")
		u.Object["spec"] = map[string]any{"replicas": int64(0), "selector": map[string]any{"matchLabels": labels},
			"template": map[string]any{"metadata": map[string]any{"labels": labels}, "spec": podSpec}}
	}
	u.SetKind(kind)
	return u
}

func ownClient(t *testing.T, gvr schema.GroupVersionResource, ns string) dynamic.ResourceInterface {
	t.Helper()
	dyn, err := dynamic.NewForConfig(harness.Config())
	require.NoError(t, err)
	return dyn.Resource(gvr).Namespace(ns)
}

// ownSplit reproduces a split ownership: the object is created by a plain client
// (manager Go-http-client, operation Update), then "remedy" server-side
// applies only the image of the first init container, taking it by force.
func ownSplit(t *testing.T, ri dynamic.ResourceInterface, m *unstructured.Unstructured) *unstructured.Unstructured {
	t.Helper()
	ctx := context.Background()
	_, err := ri.Create(ctx, m, metav1.CreateOptions{FieldManager: "Go-http-client"})
	require.NoError(t, err)
	body := map[string]any{"apiVersion": m.GetAPIVersion(), "kind": m.GetKind(),
		"metadata": map[string]any{"name": m.GetName(), "namespace": m.GetNamespace()}}
	require.NoError(t, unstructured.SetNestedSlice(body, []any{map[string]any{"name": splitContainer, "image": "busybox:1.37"}}, actions.ScopePath(m.GetKind(), "")...))
	_, err = ri.Patch(ctx, m.GetName(), types.ApplyPatchType, mustMarshal(t, body), metav1.PatchOptions{FieldManager: "remedy", Force: ptrTo(true)})
	require.NoError(t, err)
	live := ownSettle(t, ri, m.GetName())
	assert.Equal(t, []string{".", "f:image", "f:name"}, ownedFields(t, live, "remedy", splitContainer))
	other := ownedFields(t, live, "Go-http-client", splitContainer)
	assert.NotContains(t, other, "f:image", "the image moved to remedy")
	assert.Subset(t, other, []string{".", "f:command", "f:name", "f:resources", "f:securityContext"})
	return live
}

// ownSettle waits until the deployment controller has caught up and the
// object stopped changing, so resourceVersion comparisons mean something.
func ownSettle(t *testing.T, ri dynamic.ResourceInterface, name string) *unstructured.Unstructured {
	t.Helper()
	var last string
	var u *unstructured.Unstructured
	require.Eventually(t, func() bool {
		var err error
		u, err = ri.Get(context.Background(), name, metav1.GetOptions{})
		require.NoError(t, err)
		observed, hasStatus, _ := unstructured.NestedInt64(u.Object, "status", "observedGeneration")
		caughtUp := u.GetKind() != "Deployment" || (hasStatus && observed == u.GetGeneration())
		if caughtUp && u.GetResourceVersion() == last {
			return true
		}
		if caughtUp {
			last = u.GetResourceVersion()
		}
		return false
	}, runTimeout, 300*time.Millisecond, "%s did not settle", name)
	return u
}

// ownedFields lists what manager's managedFields entries own directly under
// the init container called container.
func ownedFields(t *testing.T, obj *unstructured.Unstructured, manager, container string) []string {
	t.Helper()
	var out []string
	for _, e := range obj.GetManagedFields() {
		if e.Manager != manager || e.FieldsV1 == nil {
			continue
		}
		var fields map[string]any
		require.NoError(t, json.Unmarshal(e.FieldsV1.Raw, &fields))
		for _, p := range actions.ScopePath(obj.GetKind(), "") {
			fields, _ = fields["f:"+p].(map[string]any)
		}
		item, _ := fields[`k:{"name":"`+container+`"}`].(map[string]any)
		for k := range item {
			out = append(out, k)
		}
	}
	sort.Strings(out)
	return out
}

func ownInits(t *testing.T, obj *unstructured.Unstructured) []any {
	t.Helper()
	list, _, err := unstructured.NestedSlice(obj.Object, actions.ScopePath(obj.GetKind(), "")...)
	require.NoError(t, err)
	return list
}

func ownNames(t *testing.T, obj *unstructured.Unstructured) []string {
	t.Helper()
	names := []string{}
	for _, c := range ownInits(t, obj) {
		names = append(names, c.(map[string]any)["name"].(string))
	}
	return names
}

func migrationCount(status string) float64 {
	var m dto.Metric
	_ = metrics.OwnershipMigrations.WithLabelValues(status).Write(&m)
	return m.GetCounter().GetValue()
}

func mustMarshal(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	require.NoError(t, err)
	return b
}

func ptrTo[T any](v T) *T { return &v }
