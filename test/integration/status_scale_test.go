package integration

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/utils/ptr"
	ctrlclient "sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/remedy-dev/remedy/api/v1alpha1"
	"github.com/remedy-dev/remedy/operator"
	"github.com/remedy-dev/remedy/test/harness"
)

// TestConcurrentExecutionsWriteOncePerPhase creates 100 executions at once.
// All finish, and a watch on the API server sees exactly one status write per
// phase change of each: the operator writes only the start (finalizer,
// Pending), and the workflow writes each phase once, in sequence.
func TestConcurrentExecutionsWriteOncePerPhase(t *testing.T) {
	const n, targets = 100, 10
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ns := harness.Namespace(t)
	for i := range targets {
		harness.Deployment(t, ns, fmt.Sprintf("web-%d", i), 1)
	}

	w := watchStatusWrites(ctx, t, ns)

	start := time.Now()
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			assert.NoError(t, harness.Kube().Create(ctx, manyScale(ns, i, targets)))
		}()
	}
	wg.Wait()

	var list v1alpha1.KubernetesExecutionList
	require.Eventually(t, func() bool {
		require.NoError(t, harness.Kube().List(ctx, &list, ctrlclient.InNamespace(ns)))
		done := 0
		for _, k := range list.Items {
			if k.Status.Phase.Terminal() {
				done++
			}
		}
		return done == n
	}, 5*time.Minute, 500*time.Millisecond, "not every execution finished")
	t.Logf("%d executions created at once finished in %s", n, time.Since(start).Round(time.Millisecond))

	// Every run has closed, so no write is still to come; the watch, in
	// order, has seen each execution's last one.
	for _, k := range list.Items {
		harness.WaitClosed(t, k.Status.WorkflowID, time.Minute)
	}
	require.Eventually(t, func() bool {
		w.mu.Lock()
		defer w.mu.Unlock()
		for _, k := range list.Items {
			if s := w.seen[k.UID]; len(s) == 0 || s[len(s)-1] < k.Status.Sequence {
				return false
			}
		}
		return true
	}, 30*time.Second, 50*time.Millisecond, "the watch did not see every execution's last status write")
	select {
	case err := <-w.errs:
		require.NoError(t, err, "the watch counting status writes failed")
	default:
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, k := range list.Items {
		assert.Equal(t, v1alpha1.PhaseCompleted, k.Status.Phase, "%s: %s %s", k.Name, k.Status.Reason, k.Status.Message)
		phases := int64(len(k.Status.PhaseTransitions))
		assert.Equal(t, phases, k.Status.Sequence, "%s: one sequence number per phase change", k.Name)
		want := make([]int64, 0, phases)
		for s := int64(1); s <= phases; s++ {
			want = append(want, s)
		}
		assert.Equal(t, want, w.seen[k.UID], "%s: exactly one status write per phase change, in order", k.Name)
	}

	// The happy path stays short with its writes: at most 60 history events.
	id := list.Items[0].Status.WorkflowID
	d, err := harness.Temporal().DescribeWorkflowExecution(ctx, id, "")
	require.NoError(t, err)
	t.Logf("history events of a pushed happy path: %d", d.WorkflowExecutionInfo.GetHistoryLength())
	assert.LessOrEqual(t, d.WorkflowExecutionInfo.GetHistoryLength(), int64(60))
	harness.ReplayHistory(t, id, "execution-parallel-checks-completed.json")
}

// manyScale is the i-th of many scale executions (no rollback window) spread
// over deployments web-0 .. web-<targets-1>.
func manyScale(ns string, i, targets int) *v1alpha1.KubernetesExecution {
	return &v1alpha1.KubernetesExecution{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("scale-%03d", i), Namespace: ns},
		Spec: v1alpha1.KubernetesExecutionSpec{Action: "scale", Target: target(ns, fmt.Sprintf("web-%d", i%targets)),
			Parameters: &v1alpha1.ActionParameters{Replicas: ptr.To[int32](3)}, RollbackWindow: v1alpha1.DurationOf(0)}}
}

// statusWrites is what a watch saw of the executions of one namespace.
type statusWrites struct {
	mu   sync.Mutex
	seen map[types.UID][]int64 // sequence of every version with sequence > 0
	errs chan error
}

// watchStatusWrites records the sequence of every status write to the
// executions of ns from now on, until ctx ends.
func watchStatusWrites(ctx context.Context, t *testing.T, ns string) *statusWrites {
	wc, err := ctrlclient.NewWithWatch(harness.Config(), ctrlclient.Options{Scheme: operator.Scheme()})
	require.NoError(t, err)
	var initial v1alpha1.KubernetesExecutionList
	require.NoError(t, wc.List(ctx, &initial, ctrlclient.InNamespace(ns)))
	sw := &statusWrites{seen: map[types.UID][]int64{}, errs: make(chan error, 1)}
	go func() {
		// The API server may end a watch at any time: watch again from the
		// last version seen, so no write goes uncounted.
		rv := initial.ResourceVersion
		for ctx.Err() == nil {
			w, err := wc.Watch(ctx, &v1alpha1.KubernetesExecutionList{}, ctrlclient.InNamespace(ns),
				&ctrlclient.ListOptions{Raw: &metav1.ListOptions{ResourceVersion: rv}})
			if err != nil {
				sw.errs <- err
				return
			}
			for ev := range w.ResultChan() {
				if ev.Type == watch.Error {
					sw.errs <- fmt.Errorf("watch: %v", ev.Object)
					return
				}
				k, ok := ev.Object.(*v1alpha1.KubernetesExecution)
				if !ok {
					continue
				}
				rv = k.ResourceVersion
				if ev.Type != watch.Modified || k.Status.Sequence == 0 {
					continue
				}
				sw.mu.Lock()
				sw.seen[k.UID] = append(sw.seen[k.UID], k.Status.Sequence)
				sw.mu.Unlock()
			}
			time.Sleep(100 * time.Millisecond) // paces watching again after the server ended a watch; asserts nothing
		}
	}()
	return sw
}
