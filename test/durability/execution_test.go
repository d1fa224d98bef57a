package durability

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	sdkworker "go.temporal.io/sdk/worker"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	ctrlclient "sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/remedy-dev/remedy/api/v1alpha1"
	"github.com/remedy-dev/remedy/internal/compose"
	"github.com/remedy-dev/remedy/internal/devenv"
	"github.com/remedy-dev/remedy/test/harness"
	"github.com/remedy-dev/remedy/worker"
	"github.com/remedy-dev/remedy/workflows"
)

// runWorker runs a worker as remedy-worker, its API traffic passed through
// wrap when set, until stop is called. Stopping cancels in-flight activities
// at once and drops the cached workflow state: what a SIGKILL leaves.
func runWorker(t *testing.T, wrap func(http.RoundTripper) http.RoundTripper) (stop func()) {
	return runWorkerStopping(t, wrap, 0)
}

// runWorkerStopping is runWorker with a graceful stop of stopTimeout.
func runWorkerStopping(t *testing.T, wrap func(http.RoundTripper) http.RoundTripper, stopTimeout time.Duration) (stop func()) {
	t.Helper()
	cfg, err := devenv.ServiceAccountConfig(context.Background(), harness.Config(), devenv.Namespace, "remedy-worker")
	require.NoError(t, err)
	if wrap != nil {
		cfg.Wrap(wrap)
	}
	// The job executor needs its exec gate (no Pod runs here: there is no node).
	gate, err := compose.ExecGate("127.0.0.1")
	require.NoError(t, err)
	w, err := worker.New(worker.Options{Temporal: harness.Temporal(), PayloadKeys: harness.Keys(), Kube: cfg, ActionNamespace: devenv.Namespace, StopTimeout: stopTimeout, ExecGate: gate})
	require.NoError(t, err)
	require.NoError(t, w.Start())
	var once sync.Once
	stop = func() { once.Do(func() { w.Stop(); sdkworker.PurgeStickyWorkflowCache() }) }
	t.Cleanup(stop)
	return stop
}

// heldWrite lets the first PATCH of one object through to the API server and
// then holds its answer until release: the write lands, and the worker that
// sent it dies before it can report it, or, with answer set, gets the answer late.
type heldWrite struct {
	path    string
	answer  bool
	landed  chan struct{}
	release chan struct{}
	once    sync.Once
	let     sync.Once
}

func (h *heldWrite) releaseNow() { h.let.Do(func() { close(h.release) }) }

func holdWrite(t *testing.T, namespace, deployment string) *heldWrite {
	h := &heldWrite{
		path:   "/apis/apps/v1/namespaces/" + namespace + "/deployments/" + deployment,
		landed: make(chan struct{}), release: make(chan struct{}),
	}
	t.Cleanup(h.releaseNow)
	return h
}

func (h *heldWrite) wrap(next http.RoundTripper) http.RoundTripper {
	return roundTripper(func(r *http.Request) (*http.Response, error) {
		held := false
		if r.Method == http.MethodPatch && r.URL.Path == h.path {
			h.once.Do(func() { held = true })
		}
		resp, err := next.RoundTrip(r)
		if !held {
			return resp, err
		}
		close(h.landed)
		<-h.release
		if h.answer {
			return resp, err
		}
		if resp != nil {
			_ = resp.Body.Close()
		}
		return nil, errors.New("connection lost: the worker was killed")
	})
}

type roundTripper func(*http.Request) (*http.Response, error)

func (f roundTripper) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

func createExecution(t *testing.T, ns, name string, spec v1alpha1.KubernetesExecutionSpec) *v1alpha1.KubernetesExecution {
	t.Helper()
	k := &v1alpha1.KubernetesExecution{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}, Spec: spec}
	require.NoError(t, harness.Kube().Create(context.Background(), k))
	return k
}

func scaleSpec(ns, name string, replicas int32) v1alpha1.KubernetesExecutionSpec {
	return v1alpha1.KubernetesExecutionSpec{
		Action:         "scale",
		Target:         v1alpha1.ObjectRef{APIVersion: "apps/v1", Kind: "Deployment", Namespace: ns, Name: name},
		Parameters:     &v1alpha1.ActionParameters{Replicas: ptr.To(replicas)},
		RollbackWindow: v1alpha1.DurationOf(time.Hour),
		Timeout:        v1alpha1.DurationOf(2 * time.Minute),
	}
}

func waitPhase(t *testing.T, k *v1alpha1.KubernetesExecution, phase v1alpha1.Phase, timeout time.Duration) *v1alpha1.KubernetesExecution {
	t.Helper()
	return harness.Eventually(t, k, timeout, func(k *v1alpha1.KubernetesExecution) bool {
		return k.Status.Phase == phase || (k.Status.Phase == v1alpha1.PhaseFailed && phase != v1alpha1.PhaseFailed)
	})
}

func requirePhase(t *testing.T, k *v1alpha1.KubernetesExecution, phase v1alpha1.Phase) {
	t.Helper()
	require.Equal(t, phase, k.Status.Phase, "reason %s: %s", k.Status.Reason, k.Status.Message)
}

func deployment(t *testing.T, ns, name string) *appsv1.Deployment {
	t.Helper()
	var d appsv1.Deployment
	require.NoError(t, harness.Kube().Get(context.Background(), ctrlclient.ObjectKey{Namespace: ns, Name: name}, &d))
	return &d
}

// rollBack signals the rollback and waits for it to finish.
func rollBack(t *testing.T, k *v1alpha1.KubernetesExecution) *v1alpha1.KubernetesExecution {
	t.Helper()
	require.NoError(t, harness.Temporal().SignalWorkflow(context.Background(), k.Status.WorkflowID, "", workflows.SignalRollback,
		workflows.RollbackRequest{Requester: "alice"}))
	k = waitPhase(t, k, v1alpha1.PhaseCompleted, time.Minute)
	requirePhase(t, k, v1alpha1.PhaseCompleted)
	assert.Equal(t, v1alpha1.ReasonRolledBack, k.Status.Reason)
	return k
}

// The worker dies after the API server applied its write and before it could
// report it. The write's heartbeat stops, the server retries the step on the
// next worker within seconds, and the retry recognises the landed write by
// its recorded plan: the Deployment's spec changes once, and the run keeps
// the rollback to the replicas it had before.
func TestWorkerKilledAfterInlineWriteLandedAppliesOnce(t *testing.T) {
	harness.StartOperator(t)
	ns := harness.Namespace(t)
	gen := harness.Deployment(t, ns, "web", 2).Generation
	hold := holdWrite(t, ns, "web")
	kill := runWorker(t, hold.wrap)

	k := createExecution(t, ns, "scale-web", scaleSpec(ns, "web", 5))
	select {
	case <-hold.landed:
	case <-time.After(time.Minute):
		require.FailNow(t, "the worker never wrote the Deployment")
	}
	require.Equal(t, int32(5), *deployment(t, ns, "web").Spec.Replicas, "the write landed before the kill")
	kill()
	killed := time.Now()
	runWorker(t, nil)

	k = waitPhase(t, k, v1alpha1.PhaseRollbackReady, time.Minute)
	requirePhase(t, k, v1alpha1.PhaseRollbackReady)
	t.Logf("run reached RollbackReady %.1fs after the worker was killed", time.Since(killed).Seconds())
	assert.Equal(t, gen+1, deployment(t, ns, "web").Generation, "the spec changed exactly once")
	res := k.Status.ExecutionResults
	assert.Equal(t, int32(1), res.RetriesAttempted, "the killed attempt was retried")
	require.Len(t, res.ResourcesAffected, 1)
	assert.Equal(t, "scaled", res.ResourcesAffected[0].Action, "the landed write, not an unchanged re-run")
	assert.Equal(t, "replicas: 2", res.ResourcesAffected[0].Before)
	rb := k.Status.RollbackInformation
	require.NotNil(t, rb)
	require.True(t, rb.Available)
	assert.Equal(t, int32(2), *rb.RollbackParameters.Replicas)

	rollBack(t, k)
	d := deployment(t, ns, "web")
	assert.Equal(t, int32(2), *d.Spec.Replicas)
	assert.Equal(t, gen+2, d.Generation, "one write and one rollback")
	harness.ReplayHistory(t, k.Status.WorkflowID, "execution-inline-write-resumed.json")
}

// awaitApproval creates a scale that needs approval and waits for its request.
func awaitApproval(t *testing.T, ns, name string, replicas int32) *v1alpha1.KubernetesExecution {
	t.Helper()
	spec := scaleSpec(ns, "web", replicas)
	spec.Approval = &v1alpha1.ApprovalSpec{Required: true, Timeout: v1alpha1.DurationOf(10 * time.Minute)}
	k := waitPhase(t, createExecution(t, ns, name, spec), v1alpha1.PhaseWaitingApproval, time.Minute)
	requirePhase(t, k, v1alpha1.PhaseWaitingApproval)
	return k
}

func approve(t *testing.T, k *v1alpha1.KubernetesExecution) {
	t.Helper()
	require.NoError(t, harness.Temporal().SignalWorkflow(context.Background(), k.Status.WorkflowID, "", workflows.SignalApprove,
		workflows.ApprovalSignal{Approver: "alice"}))
}

// An HPA scales the target while the approval waits. The rollback information
// comes from the object the write changed, so rolling back restores the HPA's
// replicas, not the ones validation read before the wait.
func TestRollbackKeepsChangeMadeDuringApprovalWait(t *testing.T) {
	harness.StartOperator(t)
	runWorker(t, nil)
	ns := harness.Namespace(t)
	harness.Deployment(t, ns, "web", 2)
	k := awaitApproval(t, ns, "scale-web", 6)
	require.NoError(t, harness.Kube().Patch(context.Background(), &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web"}},
		ctrlclient.RawPatch(types.MergePatchType, []byte(`{"spec":{"replicas":3}}`))))
	approve(t, k)

	k = waitPhase(t, k, v1alpha1.PhaseRollbackReady, time.Minute)
	requirePhase(t, k, v1alpha1.PhaseRollbackReady)
	assert.Equal(t, "replicas: 3", k.Status.ExecutionResults.ResourcesAffected[0].Before)
	assert.Equal(t, int32(3), *k.Status.RollbackInformation.RollbackParameters.Replicas)
	assert.True(t, strings.Contains(k.Status.Message, "rollback to replicas: 3"), k.Status.Message)

	rollBack(t, k)
	assert.Equal(t, int32(3), *deployment(t, ns, "web").Spec.Replicas, "the HPA's scaling survives the rollback")
	harness.ReplayHistory(t, k.Status.WorkflowID, "execution-approval-write-time-rollback.json")
}

// The operator, which serves the approval webhook on RAR status, is down when
// the decision arrives, longer than the old five tries of RecordDecision. The
// worker keeps trying until the operator is back, and the run goes on.
func TestDecisionRecordedAfterApprovalWebhookOutage(t *testing.T) {
	stopOperator := harness.StartOperator(t)
	runWorker(t, nil)
	ns := harness.Namespace(t)
	harness.Deployment(t, ns, "web", 2)
	k := awaitApproval(t, ns, "scale-web", 4)
	stopOperator()
	approve(t, k)
	// Down longer than the old five tries: the sixth is under way.
	harness.WaitPendingActivity(t, k.Status.WorkflowID, "RecordDecision", 5, 2*time.Minute)
	harness.StartOperator(t)

	k = waitPhase(t, k, v1alpha1.PhaseRollbackReady, time.Minute)
	requirePhase(t, k, v1alpha1.PhaseRollbackReady)
	var rar v1alpha1.RemediationApprovalRequest
	require.NoError(t, harness.Kube().Get(context.Background(), ctrlclient.ObjectKey{Namespace: ns, Name: k.Status.ApprovalRequestRef.Name}, &rar))
	assert.Equal(t, v1alpha1.DecisionApproved, rar.Status.Decision)
	assert.Equal(t, "alice", rar.Status.DecidedBy)
	assert.Equal(t, int32(4), *deployment(t, ns, "web").Spec.Replicas)
	rollBack(t, k)
	harness.ReplayHistory(t, k.Status.WorkflowID, "execution-approval-record-fallback.json")
}

// The worker dies while its Job runs and stays down until the Job is gone,
// as the TTL controller deletes a finished Job after five minutes. The run
// recorded the Job's UID, so the next worker knows the action was started and
// does not create the Job, and so the action, a second time.
func TestJobCollectedWhileWorkerDownIsNotRunAgain(t *testing.T) {
	ctx := context.Background()
	harness.StartOperator(t)
	kill := runWorker(t, nil)
	ns := harness.Namespace(t)
	harness.Deployment(t, ns, "web", 2)
	spec := scaleSpec(ns, "web", 5)
	spec.Executor = v1alpha1.ExecutorJob
	k := waitPhase(t, createExecution(t, ns, "scale-web", spec), v1alpha1.PhaseExecuting, time.Minute)
	requirePhase(t, k, v1alpha1.PhaseExecuting)
	var job batchv1.Job
	require.Eventually(t, func() bool {
		jobs := harness.JobsOf(t, k)
		if len(jobs) == 1 && harness.RecordedJobUID(t, k.Status.WorkflowID) == string(jobs[0].UID) {
			job = jobs[0]
			return true
		}
		return false
	}, time.Minute, 100*time.Millisecond, "the run records the UID of the Job it created")

	kill()
	require.NoError(t, harness.Kube().Delete(ctx, &job, ctrlclient.PropagationPolicy(metav1.DeletePropagationBackground)))
	require.Eventually(t, func() bool { return len(harness.JobsOf(t, k)) == 0 }, 30*time.Second, 100*time.Millisecond)
	runWorker(t, nil)

	k = waitPhase(t, k, v1alpha1.PhaseFailed, time.Minute)
	requirePhase(t, k, v1alpha1.PhaseFailed)
	assert.Equal(t, v1alpha1.ReasonExecutionFailed, k.Status.Reason)
	assert.Contains(t, k.Status.Message, "it is not run again")
	assert.Empty(t, harness.JobsOf(t, k), "the collected Job was not created again")
	harness.ReplayHistory(t, k.Status.WorkflowID, "execution-job-collected.json")
}

// A worker told to stop while a write is in flight lets it finish, up to its
// stop timeout, and reports it: the step is not retried.
func TestWorkerStopLetsAnInFlightWriteFinish(t *testing.T) {
	harness.StartOperator(t)
	ns := harness.Namespace(t)
	gen := harness.Deployment(t, ns, "web", 2).Generation
	hold := holdWrite(t, ns, "web")
	hold.answer = true
	stop := runWorkerStopping(t, hold.wrap, 30*time.Second)

	k := createExecution(t, ns, "scale-web", scaleSpec(ns, "web", 5))
	select {
	case <-hold.landed:
	case <-time.After(time.Minute):
		require.FailNow(t, "the worker never wrote the Deployment")
	}
	stopped := make(chan struct{})
	go func() { stop(); close(stopped) }()
	select {
	case <-stopped:
		require.FailNow(t, "the worker stopped with a write in flight")
	case <-time.After(2 * time.Second):
	}
	hold.releaseNow()
	select {
	case <-stopped:
	case <-time.After(20 * time.Second):
		require.FailNow(t, "the worker did not stop once the write finished")
	}
	runWorker(t, nil)

	k = waitPhase(t, k, v1alpha1.PhaseRollbackReady, time.Minute)
	requirePhase(t, k, v1alpha1.PhaseRollbackReady)
	assert.Zero(t, k.Status.ExecutionResults.RetriesAttempted, "the stopping worker reported the write itself")
	assert.Equal(t, gen+1, deployment(t, ns, "web").Generation)
}
