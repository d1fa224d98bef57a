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
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/restmapper"

	"github.com/remedy-dev/remedy/activities/actions"
	"github.com/remedy-dev/remedy/api/v1alpha1"
	"github.com/remedy-dev/remedy/internal/devenv"
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

// ownSplit reproduces the seed: the object is created by a plain client
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

func TestOwnershipSplitBreaksRemovalUntilMigrated(t *testing.T) {
	ctx := context.Background()
	ns := harness.Namespace(t)
	ri := ownClient(t, ownDeployments, ns)
	live := ownSplit(t, ri, ownManifest("Deployment", ns, "web", ownInit(splitContainer)))

	// The author's new desired state drops the init container; remedy applies it.
	desired := mustMarshal(t, ownManifest("Deployment", ns, "web").Object)
	for _, dryRun := range [][]string{{metav1.DryRunAll}, nil} {
		_, err := ri.Patch(ctx, "web", types.ApplyPatchType, desired, metav1.PatchOptions{FieldManager: "remedy", DryRun: dryRun})
		require.Error(t, err, "dry-run %v", dryRun)
		assert.True(t, apierrors.IsInvalid(err), "%v", err)
		assert.Contains(t, err.Error(), "spec.template.spec.initContainers[0].image: Required value")
	}
	unchanged, err := ri.Get(ctx, "web", metav1.GetOptions{})
	require.NoError(t, err)
	assert.Equal(t, live.GetResourceVersion(), unchanged.GetResourceVersion())

	migrated, skipped := migrationCount(metrics.MigrationSuccess), migrationCount(metrics.MigrationSkipped)
	out, rep, err := actions.MigrateOwnership(ctx, ri, live, "", "", false)
	require.NoError(t, err)
	assert.True(t, rep.Wrote)
	assert.Equal(t, []string{"Go-http-client"}, rep.Displaced)
	assert.Equal(t, []string{"Go-http-client", "remedy"}, rep.Before.Owners)
	assert.Equal(t, []string{"remedy"}, rep.After.Owners)
	assert.Equal(t, ownInits(t, live), ownInits(t, out), "migration changes owners, not values")
	assert.Equal(t, live.GetGeneration(), out.GetGeneration())
	assert.NotEqual(t, live.GetResourceVersion(), out.GetResourceVersion())
	assert.Empty(t, ownedFields(t, out, "Go-http-client", splitContainer))
	assert.Equal(t, []string{".", "f:command", "f:image", "f:imagePullPolicy", "f:name", "f:resources", "f:securityContext",
		"f:terminationMessagePath", "f:terminationMessagePolicy"}, ownedFields(t, out, "remedy", splitContainer))
	assert.Equal(t, migrated+1, migrationCount(metrics.MigrationSuccess))

	again := ownSettle(t, ri, "web")
	out2, rep2, err := actions.MigrateOwnership(ctx, ri, again, "", "remedy", false)
	require.NoError(t, err)
	assert.False(t, rep2.Wrote, "a second migration must not write")
	assert.Equal(t, again.GetResourceVersion(), out2.GetResourceVersion())
	after, err := ri.Get(ctx, "web", metav1.GetOptions{})
	require.NoError(t, err)
	assert.Equal(t, again.GetResourceVersion(), after.GetResourceVersion())
	assert.Equal(t, skipped+1, migrationCount(metrics.MigrationSkipped))

	removed, err := ri.Patch(ctx, "web", types.ApplyPatchType, desired, metav1.PatchOptions{FieldManager: "remedy"})
	require.NoError(t, err)
	assert.Empty(t, ownInits(t, removed), "the whole container is gone, not just remedy's fields")
	containers, _, _ := unstructured.NestedSlice(removed.Object, "spec", "template", "spec", "containers")
	require.Len(t, containers, 1)
	assert.Equal(t, release.Image(), containers[0].(map[string]any)["image"])
}

func TestOwnershipMigrationConflictsOnAStaleObject(t *testing.T) {
	ctx := context.Background()
	ns := harness.Namespace(t)
	ri := ownClient(t, ownCronJobs, ns)
	stale := ownSplit(t, ri, ownManifest("CronJob", ns, "nightly", ownInit(splitContainer)))
	_, err := ri.Patch(ctx, "nightly", types.MergePatchType, []byte(`{"metadata":{"labels":{"touched":"yes"}}}`), metav1.PatchOptions{FieldManager: "Go-http-client"})
	require.NoError(t, err)

	failed := migrationCount(metrics.MigrationFailure)
	_, _, err = actions.MigrateOwnership(ctx, ri, stale, "", "", false)
	require.Error(t, err)
	assert.True(t, apierrors.IsConflict(err), "a concurrent change must conflict, got %v", err)
	assert.Equal(t, failed+1, migrationCount(metrics.MigrationFailure))
	live, err := ri.Get(ctx, "nightly", metav1.GetOptions{})
	require.NoError(t, err)
	assert.Contains(t, ownedFields(t, live, "Go-http-client", splitContainer), "f:command", "nothing was taken over")
}

// ownRunner runs catalog actions the way the inline executor does: as the
// action's own ServiceAccount, so the generated RBAC is exercised too.
type ownRunner struct {
	t      *testing.T
	mapper meta.RESTMapper
}

func newOwnRunner(t *testing.T) ownRunner {
	dc, err := discovery.NewDiscoveryClientForConfig(harness.Config())
	require.NoError(t, err)
	return ownRunner{t: t, mapper: restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(dc))}
}

func (r ownRunner) run(action string, ref v1alpha1.ObjectRef, params v1alpha1.ActionParameters, mode actions.Mode) (actions.Plan, error) {
	cfg := rest.CopyConfig(harness.Config())
	cfg.Impersonate = rest.ImpersonationConfig{UserName: actions.ServiceAccountUser(devenv.Namespace, action)}
	dyn, err := dynamic.NewForConfig(cfg)
	require.NoError(r.t, err)
	return actions.Run(context.Background(), dyn, r.mapper, actions.Request{Action: action, Target: ref, Params: params}, mode)
}

func TestMigrateFieldOwnershipAction(t *testing.T) {
	ctx := context.Background()
	ns := harness.Namespace(t)
	ri := ownClient(t, ownDeployments, ns)
	live := ownSplit(t, ri, ownManifest("Deployment", ns, "web", ownInit(splitContainer)))
	r, ref := newOwnRunner(t), target(ns, "web")
	const action = "migrate-field-ownership"

	plan, err := r.run(action, ref, v1alpha1.ActionParameters{}, actions.Inspect)
	require.NoError(t, err)
	assert.Equal(t, "owners: Go-http-client, remedy -> owners: remedy", plan.Change.Before+" -> "+plan.Change.After)
	assert.False(t, plan.NoOp)
	assert.False(t, plan.Rollback.Available)
	assert.NotEmpty(t, plan.Rollback.Reason)

	plan, err = r.run(action, ref, v1alpha1.ActionParameters{}, actions.DryRun)
	require.NoError(t, err)
	assert.Equal(t, "owners: remedy", plan.Change.After, "read from the dry-run result's managedFields")
	cur, err := ri.Get(ctx, "web", metav1.GetOptions{})
	require.NoError(t, err)
	assert.Equal(t, live.GetResourceVersion(), cur.GetResourceVersion(), "a dry-run writes nothing")
	o, err := actions.CheckOwnership(cur, actions.ScopePath("Deployment", ""), "remedy")
	require.NoError(t, err)
	assert.True(t, o.NeedsMigration())

	plan, err = r.run(action, ref, v1alpha1.ActionParameters{}, actions.Apply)
	require.NoError(t, err)
	assert.Equal(t, "owners: remedy", plan.Change.After)
	cur = ownSettle(t, ri, "web")
	o, err = actions.CheckOwnership(cur, actions.ScopePath("Deployment", ""), "remedy")
	require.NoError(t, err)
	assert.Equal(t, actions.Ownership{Exists: true, Owners: []string{"remedy"}, Others: []string{}, Complete: true}, o)

	plan, err = r.run(action, ref, v1alpha1.ActionParameters{}, actions.Apply)
	require.NoError(t, err)
	assert.True(t, plan.NoOp)
	again, err := ri.Get(ctx, "web", metav1.GetOptions{})
	require.NoError(t, err)
	assert.Equal(t, cur.GetResourceVersion(), again.GetResourceVersion())

	// A second scope: remedy now owns the containers alone, so an apply that
	// left them out would delete them. Removal must keep re-applying them.
	containers := v1alpha1.ActionParameters{Scope: "spec.template.spec.containers"}
	plan, err = r.run(action, ref, containers, actions.Apply)
	require.NoError(t, err)
	assert.Equal(t, "owners: Go-http-client -> owners: remedy", plan.Change.Before+" -> "+plan.Change.After)
	assert.Equal(t, []string{splitContainer}, ownNames(t, ownSettle(t, ri, "web")), "migrating one scope keeps remedy's other fields")

	// Once remedy owns the scope, removal's dry-run is the exact apply it will send.
	remove := v1alpha1.ActionParameters{Container: splitContainer}
	_, err = r.run("remove-init-container", ref, remove, actions.DryRun)
	require.NoError(t, err)
	again, err = ri.Get(ctx, "web", metav1.GetOptions{})
	require.NoError(t, err)
	assert.Equal(t, []string{splitContainer}, ownNames(t, again))
	_, err = r.run("remove-init-container", ref, remove, actions.Apply)
	require.NoError(t, err)
	again, err = ri.Get(ctx, "web", metav1.GetOptions{})
	require.NoError(t, err)
	assert.Empty(t, ownInits(t, again))
	kept, _, _ := unstructured.NestedSlice(again.Object, "spec", "template", "spec", "containers")
	assert.Equal(t, []any{map[string]any{"name": "app", "image": release.Image(), "imagePullPolicy": "IfNotPresent",
		"resources": map[string]any{}, "terminationMessagePath": "/dev/termination-log", "terminationMessagePolicy": "File"}}, kept)
	o, err = actions.CheckOwnership(again, actions.ScopePath("Deployment", containers.Scope), "remedy")
	require.NoError(t, err)
	assert.Equal(t, []string{"remedy"}, o.Owners)
	assert.False(t, o.NeedsMigration())
}

func TestRemoveInitContainerAction(t *testing.T) {
	ctx := context.Background()
	ns := harness.Namespace(t)
	ri := ownClient(t, ownDeployments, ns)
	live := ownSplit(t, ri, ownManifest("Deployment", ns, "web", ownInit(splitContainer), ownInit("setup")))
	before := ownInits(t, live)
	r, ref := newOwnRunner(t), target(ns, "web")
	const action = "remove-init-container"
	params := v1alpha1.ActionParameters{Container: splitContainer}

	plan, err := r.run(action, ref, params, actions.Inspect)
	require.NoError(t, err)
	assert.Equal(t, "initContainers: base-os-bash, setup -> setup", actions.Impact(plan.Change))
	require.True(t, plan.Rollback.Available)
	assert.Equal(t, "patch", plan.Rollback.RollbackAction)

	_, err = r.run(action, ref, params, actions.DryRun)
	require.NoError(t, err, "the dry-run migrates and checks the end state instead of hitting Required value")
	cur, err := ri.Get(ctx, "web", metav1.GetOptions{})
	require.NoError(t, err)
	assert.Equal(t, live.GetResourceVersion(), cur.GetResourceVersion())
	assert.Equal(t, []string{splitContainer, "setup"}, ownNames(t, cur))

	_, err = r.run(action, ref, params, actions.Apply)
	require.NoError(t, err)
	cur = ownSettle(t, ri, "web")
	assert.Equal(t, []any{before[1]}, ownInits(t, cur), "setup is kept with its full spec")
	o, err := actions.CheckOwnership(cur, actions.ScopePath("Deployment", ""), "remedy")
	require.NoError(t, err)
	assert.Equal(t, []string{"remedy"}, o.Owners)

	again, err := r.run(action, ref, params, actions.Apply)
	require.NoError(t, err)
	assert.True(t, again.NoOp, "the container is already gone")
	same, err := ri.Get(ctx, "web", metav1.GetOptions{})
	require.NoError(t, err)
	assert.Equal(t, cur.GetResourceVersion(), same.GetResourceVersion())

	_, err = r.run(plan.Rollback.RollbackAction, ref, *plan.Rollback.RollbackParameters, actions.Apply)
	require.NoError(t, err)
	cur = ownSettle(t, ri, "web")
	restored := ownInits(t, cur)
	require.Len(t, restored, 2)
	assert.Equal(t, []string{splitContainer, "setup"}, ownNames(t, cur))
	assert.Equal(t, "busybox:1.37", restored[0].(map[string]any)["image"])
	assert.Equal(t, []any{"sh", "-c", "echo base-os-bash"}, restored[0].(map[string]any)["command"])

	// The rollback's merge patch left remedy's own Update entry owning the
	// container; removing it again must migrate that too.
	o, err = actions.CheckOwnership(cur, actions.ScopePath("Deployment", ""), "remedy")
	require.NoError(t, err)
	assert.Contains(t, o.Others, "remedy (Update)")
	_, err = r.run(action, ref, params, actions.Apply)
	require.NoError(t, err)
	cur, err = ri.Get(ctx, "web", metav1.GetOptions{})
	require.NoError(t, err)
	assert.Equal(t, []string{"setup"}, ownNames(t, cur))
}

func TestRemoveInitContainerActionOnCronJob(t *testing.T) {
	ctx := context.Background()
	ns := harness.Namespace(t)
	ri := ownClient(t, ownCronJobs, ns)
	ownSplit(t, ri, ownManifest("CronJob", ns, "nightly", ownInit(splitContainer)))
	ref := v1alpha1.ObjectRef{APIVersion: "batch/v1", Kind: "CronJob", Namespace: ns, Name: "nightly"}

	plan, err := newOwnRunner(t).run("remove-init-container", ref, v1alpha1.ActionParameters{Container: splitContainer}, actions.Apply)
	require.NoError(t, err)
	assert.Equal(t, "initContainers: base-os-bash -> none", actions.Impact(plan.Change))
	cur, err := ri.Get(ctx, "nightly", metav1.GetOptions{})
	require.NoError(t, err)
	_, found, _ := unstructured.NestedFieldNoCopy(cur.Object, actions.ScopePath("CronJob", "")...)
	assert.False(t, found, "the last init container is removed, not left partial")
	containers, _, _ := unstructured.NestedSlice(cur.Object, "spec", "jobTemplate", "spec", "template", "spec", "containers")
	require.Len(t, containers, 1)
}
