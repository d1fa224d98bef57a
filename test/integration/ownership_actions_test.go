package integration

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/restmapper"

	"github.com/remedy-dev/remedy/api/v1alpha1"
	"github.com/remedy-dev/remedy/internal/actions"
	"github.com/remedy-dev/remedy/internal/devenv"
	"github.com/remedy-dev/remedy/internal/release"
	"github.com/remedy-dev/remedy/test/harness"
)

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
