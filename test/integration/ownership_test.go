package integration

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"

	"github.com/remedy-dev/remedy/internal/actions"
	"github.com/remedy-dev/remedy/internal/metrics"
	"github.com/remedy-dev/remedy/internal/release"
	"github.com/remedy-dev/remedy/test/harness"
)

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
