package integration

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"
	sdkworker "go.temporal.io/sdk/worker"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/uuid"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/restmapper"
	"k8s.io/utils/ptr"
	ctrlclient "sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/remedy-dev/remedy/activities"
	"github.com/remedy-dev/remedy/activities/actions"
	"github.com/remedy-dev/remedy/api/v1alpha1"
	"github.com/remedy-dev/remedy/internal/devenv"
	"github.com/remedy-dev/remedy/test/harness"
	"github.com/remedy-dev/remedy/worker"
)

// newJobs builds the activity struct as the worker's own ServiceAccount, so
// the generated worker Role is what lets it manage Jobs.
func newJobs(t *testing.T) *activities.Jobs {
	t.Helper()
	cfg, err := devenv.ServiceAccountConfig(context.Background(), harness.Config(), devenv.Namespace, "remedy-worker")
	require.NoError(t, err)
	cs, err := kubernetes.NewForConfig(cfg)
	require.NoError(t, err)
	// The image deploy/admission/worker-jobs.yaml admits for the worker.
	return &activities.Jobs{Client: cs, Namespace: devenv.Namespace, Image: worker.DefaultExecImage, HeartbeatEvery: time.Second, Gate: &gateAsks{}}
}

// gateAsks stands in for the write gate in the tests of the Job mechanics
// alone, which run no workflow for a real execution, and counts what it is
// asked; the write gate itself runs in TestJobExecutorEndToEnd and the trust tests.
type gateAsks struct{ n atomic.Int32 }

func (g *gateAsks) Check(context.Context, activities.Write) error {
	g.n.Add(1)
	return nil
}

// asked is how often jobs asked the gate: once per Job created.
func asked(jobs *activities.Jobs) int32 { return jobs.Gate.(*gateAsks).n.Load() }

func admin(t *testing.T) kubernetes.Interface {
	t.Helper()
	cs, err := kubernetes.NewForConfig(harness.Config())
	require.NoError(t, err)
	return cs
}

func jobInput(t *testing.T, timeout time.Duration, maxRetries int32) activities.JobInput {
	ns := harness.Namespace(t)
	return activities.JobInput{
		ExecutionNamespace: ns, ExecutionName: "scale-web", ExecutionUID: string(uuid.NewUUID()),
		Request: actions.Request{
			Action: "scale", Target: v1alpha1.ObjectRef{APIVersion: "apps/v1", Kind: "Deployment", Namespace: ns, Name: "web"},
			Params: v1alpha1.ActionParameters{Replicas: ptr.To[int32](3)},
		},
		Timeout: timeout, MaxRetries: maxRetries,
	}
}

type jobRun struct {
	res activities.ExecuteResult
	err error
}

// runJob runs the activity in the background through Temporal's activity test
// environment; cancelling ctx is the worker dying. beats receives heartbeats.
func runJob(ctx context.Context, jobs *activities.Jobs, in activities.JobInput, beats chan<- struct{}) <-chan jobRun {
	var s testsuite.WorkflowTestSuite
	env := s.NewTestActivityEnvironment()
	env.SetWorkerOptions(sdkworker.Options{BackgroundActivityContext: ctx})
	env.SetOnActivityHeartbeatListener(func(*activity.Info, converter.EncodedValues) {
		select {
		case beats <- struct{}{}:
		default:
		}
	})
	env.RegisterActivity(jobs)
	out := make(chan jobRun, 1)
	go func() {
		var r jobRun
		val, err := env.ExecuteActivity(jobs.RunJob, in)
		if r.err = err; err == nil {
			r.err = val.Get(&r.res)
		}
		out <- r
	}()
	return out
}

func await(t *testing.T, runs <-chan jobRun, timeout time.Duration) jobRun {
	t.Helper()
	select {
	case r := <-runs:
		return r
	case <-time.After(timeout):
		require.FailNow(t, "RunJob did not return", "after %s", timeout)
		return jobRun{}
	}
}

func appError(t *testing.T, err error) *temporal.ApplicationError {
	t.Helper()
	var app *temporal.ApplicationError
	require.True(t, errors.As(err, &app), "want an ApplicationError, got %v", err)
	return app
}

func scalePlan(in activities.JobInput) actions.Plan {
	return actions.Plan{
		Change: v1alpha1.ResourceChange{Kind: "Deployment", Namespace: in.Request.Target.Namespace, Name: "web", Action: "scaled", Before: "replicas: 1", After: "replicas: 3"},
		Rollback: v1alpha1.RollbackInformation{Available: true, RollbackAction: "scale",
			RollbackParameters: &v1alpha1.ActionParameters{Replicas: ptr.To[int32](1)}},
		Patch: `{"spec":{"replicas":3}}`, UID: "u-1", ResourceVersion: "42",
	}
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	require.NoError(t, err)
	return string(b)
}

func TestJobSucceedsAfterARetry(t *testing.T) {
	jobs := newJobs(t)
	in := jobInput(t, time.Minute, 1)
	runs := runJob(context.Background(), jobs, in, nil)

	name := activities.JobName(in)
	first := harness.PendingPod(t, name)
	var job batchv1.Job
	require.NoError(t, harness.Kube().Get(context.Background(), ctrlclient.ObjectKey{Namespace: devenv.Namespace, Name: name}, &job))
	assert.LessOrEqual(t, len(name), 63)
	assert.Equal(t, map[string]string{
		"app.kubernetes.io/part-of": "remedy", "remedy.dev/action": "scale", "remedy.dev/execution-name": "scale-web",
		"remedy.dev/execution-namespace": in.ExecutionNamespace, "remedy.dev/execution-uid": in.ExecutionUID,
	}, job.Labels)
	assert.Empty(t, job.OwnerReferences, "owner references cannot cross namespaces")
	assert.Equal(t, ptr.To[int32](300), job.Spec.TTLSecondsAfterFinished)
	assert.Equal(t, ptr.To[int32](1), job.Spec.BackoffLimit)
	assert.Equal(t, ptr.To[int64](60), job.Spec.ActiveDeadlineSeconds)
	pod := job.Spec.Template.Spec
	assert.Equal(t, "remedy-action-scale", pod.ServiceAccountName)
	assert.Equal(t, corev1.RestartPolicyNever, pod.RestartPolicy)
	require.Len(t, pod.Containers, 1)
	c := pod.Containers[0]
	assert.Equal(t, worker.DefaultExecImage, c.Image)
	assert.Equal(t, []string{"/remedy", "exec"}, c.Command)
	assert.Equal(t, []corev1.EnvVar{{Name: activities.RequestEnv, Value: mustJSON(t, in.Request)}}, c.Env)
	require.NotNil(t, c.SecurityContext)
	assert.Equal(t, ptr.To(false), c.SecurityContext.AllowPrivilegeEscalation)
	assert.Equal(t, []corev1.Capability{"ALL"}, c.SecurityContext.Capabilities.Drop)
	assert.Equal(t, ptr.To(true), pod.SecurityContext.RunAsNonRoot)

	// The first pod fails; the Job controller replaces it (after its backoff) and the second succeeds.
	harness.FinishPod(t, first, 1, "transient: connection refused")
	second := harness.PendingPod(t, name)
	assert.NotEqual(t, first.Name, second.Name)
	want := scalePlan(in)
	harness.FinishPod(t, second, 0, mustJSON(t, want))

	r := await(t, runs, 60*time.Second)
	require.NoError(t, r.err)
	assert.Equal(t, want, r.res.Plan)
	assert.Equal(t, int32(1), r.res.Retries, "one failed pod")
	assert.Equal(t, name, r.res.JobName)
	assert.Empty(t, r.res.Logs, "no kubelet serves logs here, and that is not a failure")
	harness.Eventually(t, &job, 30*time.Second, func(j *batchv1.Job) bool {
		for _, c := range j.Status.Conditions {
			if c.Type == batchv1.JobComplete && c.Status == corev1.ConditionTrue {
				return true
			}
		}
		return false
	})
}

func TestJobFailureCarriesTheTerminationMessage(t *testing.T) {
	jobs := newJobs(t)
	in := jobInput(t, time.Minute, 0)
	runs := runJob(context.Background(), jobs, in, nil)

	harness.FinishPod(t, harness.PendingPod(t, activities.JobName(in)), 1, `scale t/Deployment/web: deployments.apps "web" is forbidden`)

	r := await(t, runs, 30*time.Second)
	require.Error(t, r.err)
	app := appError(t, r.err)
	assert.Equal(t, activities.ReasonExecutionFailed, app.Type())
	assert.True(t, app.NonRetryable())
	assert.Contains(t, app.Error(), `deployments.apps "web" is forbidden`)
}

func TestJobDeadlineIsATimeout(t *testing.T) {
	jobs := newJobs(t)
	in := jobInput(t, 2*time.Second, 0)
	runs := runJob(context.Background(), jobs, in, nil)
	harness.PendingPod(t, activities.JobName(in)) // never finished

	r := await(t, runs, 30*time.Second)
	require.Error(t, r.err)
	app := appError(t, r.err)
	assert.Equal(t, activities.ReasonExecutionTimeout, app.Type())
	assert.True(t, app.NonRetryable())
}

func TestJobResumesAfterTheWorkerDies(t *testing.T) {
	jobs := newJobs(t)
	in := jobInput(t, time.Minute, 0)
	name := activities.JobName(in)

	ctx, kill := context.WithCancel(context.Background())
	beats := make(chan struct{}, 1)
	runs := runJob(ctx, jobs, in, beats)
	pod := harness.PendingPod(t, name)
	<-beats                            // about to watch
	time.Sleep(500 * time.Millisecond) // and watching
	kill()
	require.Error(t, await(t, runs, 10*time.Second).err, "the dead attempt does not report a result")

	beats = make(chan struct{}, 1)
	runs = runJob(context.Background(), jobs, in, beats)
	<-beats // the retry found the Job and watches it
	want := scalePlan(in)
	harness.FinishPod(t, pod, 0, mustJSON(t, want))

	r := await(t, runs, 30*time.Second)
	require.NoError(t, r.err)
	assert.Equal(t, want, r.res.Plan)
	var list batchv1.JobList
	require.NoError(t, harness.Kube().List(context.Background(), &list, ctrlclient.InNamespace(devenv.Namespace),
		ctrlclient.MatchingLabels{"remedy.dev/execution-uid": in.ExecutionUID}))
	require.Len(t, list.Items, 1, "a retried activity never creates a second Job")
	assert.Equal(t, int32(1), asked(jobs), "the gate is asked before the one Job is created, not again for a Job that exists")
	assert.Equal(t, name, list.Items[0].Name)
	pods, err := admin(t).CoreV1().Pods(devenv.Namespace).List(context.Background(), metav1.ListOptions{LabelSelector: "job-name=" + name})
	require.NoError(t, err)
	assert.Len(t, pods.Items, 1)
}

// A Job that outlives spec.timeout (no kubelet ever runs its pod) hits its
// activeDeadlineSeconds: the run fails ExecutionTimeout and nothing changed.
func TestJobExecutorDeadlineFailsTheRun(t *testing.T) {
	ns := harness.Namespace(t)
	harness.Deployment(t, ns, "web", 1)
	spec := scaleSpec(ns, "web", 3)
	spec.Executor = v1alpha1.ExecutorJob
	spec.Timeout = v1alpha1.DurationOf(2 * time.Second)
	spec.MaxRetries = ptr.To[int32](0)
	k := waitPhase(t, createExecution(t, ns, "slow-job", spec), v1alpha1.PhaseFailed)
	assert.Equal(t, activities.ReasonExecutionTimeout, k.Status.Reason, k.Status.Message)
	assert.Equal(t, int32(1), replicasOf(t, ns, "web"))
	harness.ReplayHistory(t, k.Status.WorkflowID, "execution-timeout.json")
}

// TestExecRequest runs the body of `remedy exec` as the action's
// ServiceAccount, as the Job's pod would.
func TestExecRequest(t *testing.T) {
	ctx := context.Background()
	ns := harness.Namespace(t)
	harness.Deployment(t, ns, "web", 1)
	cfg, err := devenv.ServiceAccountConfig(ctx, harness.Config(), devenv.Namespace, actions.ServiceAccountName("scale"))
	require.NoError(t, err)
	dyn, err := dynamic.NewForConfig(cfg)
	require.NoError(t, err)
	dc, err := discovery.NewDiscoveryClientForConfig(cfg)
	require.NoError(t, err)
	mapper := restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(dc))
	termLog := filepath.Join(t.TempDir(), "termination-log")
	req := actions.Request{Action: "scale", Target: v1alpha1.ObjectRef{APIVersion: "apps/v1", Kind: "Deployment", Namespace: ns, Name: "web"},
		Params: v1alpha1.ActionParameters{Replicas: ptr.To[int32](3)}}

	plan, err := activities.ExecRequest(ctx, dyn, mapper, []byte(mustJSON(t, req)), termLog)
	require.NoError(t, err)
	written, err := os.ReadFile(termLog)
	require.NoError(t, err)
	var got actions.Plan
	require.NoError(t, json.Unmarshal(written, &got), "the termination log is the plan's JSON")
	assert.Equal(t, plan, got)
	assert.Equal(t, "replicas: 3", got.Change.After)
	var d appsv1.Deployment
	require.NoError(t, harness.Kube().Get(ctx, ctrlclient.ObjectKey{Namespace: ns, Name: "web"}, &d))
	assert.Equal(t, int32(3), *d.Spec.Replicas)

	req.Target.Name = "missing"
	_, err = activities.ExecRequest(ctx, dyn, mapper, []byte(mustJSON(t, req)), termLog)
	require.Error(t, err)
	written, err = os.ReadFile(termLog)
	require.NoError(t, err)
	assert.Contains(t, string(written), `"missing" not found`)
}

// A KubernetesExecution with executor: job runs end to end: the worker creates
// the Job, the test plays the kubelet by running the pod's command (remedy
// exec's core, as the action's ServiceAccount), and the run completes with
// the Job's result.
func TestJobExecutorEndToEnd(t *testing.T) {
	ctx := context.Background()
	ns := harness.Namespace(t)
	harness.Deployment(t, ns, "web", 1)
	spec := scaleSpec(ns, "web", 3)
	spec.Executor = v1alpha1.ExecutorJob
	k := createExecution(t, ns, "scale-by-job", spec)

	var job batchv1.Job
	require.Eventually(t, func() bool {
		list, err := admin(t).BatchV1().Jobs(devenv.Namespace).List(ctx, metav1.ListOptions{LabelSelector: activities.LabelExecutionName + "=scale-by-job"})
		if err != nil || len(list.Items) != 1 {
			return false
		}
		job = list.Items[0]
		return true
	}, runTimeout, 50*time.Millisecond)
	pod := harness.PendingPod(t, job.Name)

	saCfg, err := devenv.ServiceAccountConfig(ctx, harness.Config(), devenv.Namespace, "remedy-action-scale")
	require.NoError(t, err)
	dyn, err := dynamic.NewForConfig(saCfg)
	require.NoError(t, err)
	dc, err := discovery.NewDiscoveryClientForConfig(saCfg)
	require.NoError(t, err)
	logPath := filepath.Join(t.TempDir(), "termination-log")
	_, err = activities.ExecRequest(ctx, dyn, restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(dc)),
		[]byte(pod.Spec.Containers[0].Env[0].Value), logPath)
	require.NoError(t, err)
	msg, err := os.ReadFile(logPath)
	require.NoError(t, err)
	harness.FinishPod(t, pod, 0, string(msg))

	k = waitPhase(t, k, v1alpha1.PhaseCompleted)
	assert.Equal(t, job.Name, k.Status.ExecutionResults.JobName)
	assert.Equal(t, "replicas: 1", k.Status.ExecutionResults.ResourcesAffected[0].Before)
	assert.Equal(t, int32(3), replicasOf(t, ns, "web"))
	harness.ReplayHistory(t, k.Status.WorkflowID, "execution-job.json")
}
