package drift

import (
	"context"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	ctrlclient "sigs.k8s.io/controller-runtime/pkg/client"

	kv1 "github.com/remedy-dev/remedy/api/kausality/v1alpha1"
	"github.com/remedy-dev/remedy/test/harness"
)

// A person approves a denied revert by copying the Deployment's
// metadata.generation from kubectl, as kausality's docs and tools do. The
// webhook's own annotations bumped it past the spec-change generation the
// decision compares with; the approval lets the revert through and is spent.
func TestOnceApprovalNamingTheDeploymentsGenerationIsSpent(t *testing.T) {
	f := newFamily(t, kv1.ModeEnforce)
	denied := decisions("drift-denied")
	_, err := f.scale(t, 2)
	require.NoError(t, err)
	waitDecision(t, "drift-denied", denied)
	f.deniedAgain(t, 2, "enforce mode let the revert through")
	// The ReplicaSet controller's status writes settle first: a once
	// approval is spent at admission, and a write that then conflicts
	// with one of them would spend it in vain.
	harness.Eventually(t, f.rs.DeepCopy(), 30*time.Second, func(rs *appsv1.ReplicaSet) bool {
		return rs.Status.ObservedGeneration == rs.Generation && rs.Status.Replicas == 2
	})

	dep := &appsv1.Deployment{}
	require.NoError(t, harness.Kube().Get(context.Background(), ctrlclient.ObjectKeyFromObject(f.dep), dep))
	require.Greater(t, dep.Generation, int64(1), "annotation edits moved metadata.generation past the spec change (1), or this test proves nothing")

	approved := decisions("drift-approved")
	approval := kv1.FormatApprovals([]kv1.Approval{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: f.rs.Name, Generation: dep.Generation, Mode: kv1.ApprovalOnce}})
	patchAnnotations(t, f.dep, map[string]any{kv1.AnnotationApprovals: approval})
	if !assert.Eventually(t, func() bool { return f.replicas(t) == 0 }, 30*time.Second, 50*time.Millisecond, "the approved revert did not land") {
		require.NoError(t, harness.Kube().Get(context.Background(), ctrlclient.ObjectKeyFromObject(f.dep), dep))
		t.Fatalf("approval %s; the Deployment is at generation %d (observed %d) with annotations %v; decisions: %v denied, %v approved",
			approval, dep.Generation, dep.Status.ObservedGeneration, dep.Annotations, decisions("drift-denied"), decisions("drift-approved"))
	}
	assert.Equal(t, approved+1, decisions("drift-approved"), "one approval, one change")
	harness.Eventually(t, f.dep, 10*time.Second, func(d *appsv1.Deployment) bool { return d.Annotations[kv1.AnnotationApprovals] == "" })

	denied = decisions("drift-denied")
	_, err = f.scale(t, 3)
	require.NoError(t, err)
	waitDecision(t, "drift-denied", denied)
	f.deniedAgain(t, 3, "a spent approval let a second change through")
}

// An approval naming a generation before the parent's last spec change can
// never apply: writing one gets a warning saying so.
func TestApprovalBeforeTheSpecChangeIsWarnedAbout(t *testing.T) {
	ctx := context.Background()
	f := newFamily(t, kv1.ModeEnforce)
	warnings := &warningLog{}
	cfg := rest.CopyConfig(harness.Config())
	cfg.WarningHandler = warnings
	kube, err := kubernetes.NewForConfig(cfg)
	require.NoError(t, err)
	deployments := kube.AppsV1().Deployments(f.ns)

	_, err = deployments.Patch(ctx, f.dep.Name, types.MergePatchType, []byte(`{"spec":{"revisionHistoryLimit":3}}`), metav1.PatchOptions{})
	require.NoError(t, err)
	dep := harness.Eventually(t, f.dep, 30*time.Second, func(d *appsv1.Deployment) bool { return d.Status.ObservedGeneration == d.Generation })
	spec := dep.Generation

	stale := kv1.FormatApprovals([]kv1.Approval{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: f.rs.Name, Generation: 1, Mode: kv1.ApprovalOnce}})
	var warned string
	// The webhook learns the spec change from its cache: write until it has.
	require.Eventually(t, func() bool {
		for _, value := range []any{nil, stale} {
			body := mustJSON(map[string]any{"metadata": map[string]any{"annotations": map[string]any{kv1.AnnotationApprovals: value}}})
			_, err := deployments.Patch(ctx, f.dep.Name, types.MergePatchType, body, metav1.PatchOptions{})
			require.NoError(t, err)
		}
		warned = warnings.find("names generation 1")
		return warned != ""
	}, 20*time.Second, 200*time.Millisecond, "no warning; got %v", warnings.all())
	assert.Contains(t, warned, "it can never apply")
	assert.Contains(t, warned, "last changed at generation "+strconv.FormatInt(spec, 10))

	before := len(warnings.all())
	current := kv1.FormatApprovals([]kv1.Approval{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: f.rs.Name, Generation: spec, Mode: kv1.ApprovalOnce}})
	body := mustJSON(map[string]any{"metadata": map[string]any{"annotations": map[string]any{kv1.AnnotationApprovals: current}}})
	_, err = deployments.Patch(ctx, f.dep.Name, types.MergePatchType, body, metav1.PatchOptions{})
	require.NoError(t, err)
	assert.Len(t, warnings.all(), before, "an approval for the current spec is not warned about")
}

// warningLog collects the API server's warnings.
type warningLog struct {
	mu   sync.Mutex
	seen []string
}

func (w *warningLog) HandleWarningHeader(_ int, _ string, text string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.seen = append(w.seen, text)
}

func (w *warningLog) all() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]string(nil), w.seen...)
}

func (w *warningLog) find(substr string) string {
	for _, s := range w.all() {
		if strings.Contains(s, substr) {
			return s
		}
	}
	return ""
}
