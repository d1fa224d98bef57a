package node

import (
	"context"
	"encoding/json"
	"errors"
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
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/uuid"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"
	ctrlclient "sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/remedy-dev/remedy/activities/execution"
	"github.com/remedy-dev/remedy/activities/gate"
	"github.com/remedy-dev/remedy/api/v1alpha1"
	"github.com/remedy-dev/remedy/internal/actions"
	"github.com/remedy-dev/remedy/internal/devenv"
	"github.com/remedy-dev/remedy/internal/release"
	"github.com/remedy-dev/remedy/test/harness"
)

// gateAsks stands in for the write gate in these tests of the Job and its
// Pod alone, and counts what it is asked; the gate itself runs in the runs
// of TestJobExecutorScalesFromARealPod and the trust tests (job_gate_test.go).
type gateAsks struct{ n atomic.Int32 }

func (g *gateAsks) Check(context.Context, gate.Write) error {
	g.n.Add(1)
	return nil
}

// asked is how often jobs asked the gate: once before a Job is created, and
// once when its Pod asks through the exec gate, immediately before its write.
func asked(jobs *execution.Jobs) int32 { return jobs.Gate.(*gateAsks).n.Load() }

// newJobs builds the activity as the worker's own ServiceAccount (the
// generated worker Role is what lets it manage Jobs), with the image the
// node imported.
func newJobs(t *testing.T) *execution.Jobs {
	t.Helper()
	cfg, err := devenv.ServiceAccountConfig(context.Background(), harness.Config(), devenv.Namespace, "remedy-worker")
	require.NoError(t, err)
	cs, err := kubernetes.NewForConfig(cfg)
	require.NoError(t, err)
	return &execution.Jobs{Client: cs, Namespace: devenv.Namespace, Image: release.Image(), HeartbeatEvery: time.Second, Gate: &gateAsks{},
		ExecGate: execGate(t, cs)}
}

// jobInput scales Deployment ns/name to 2 in a Job.
func jobInput(ns, name string, timeout time.Duration, maxRetries int32) execution.JobInput {
	return execution.JobInput{
		ExecutionNamespace: ns, ExecutionName: "scale-" + name, ExecutionUID: string(uuid.NewUUID()),
		Request:    actions.Request{Action: "scale", Target: target(ns, name), Params: v1alpha1.ActionParameters{Replicas: ptr.To[int32](2)}},
		Timeout:    timeout,
		MaxRetries: maxRetries,
	}
}

type jobRun struct {
	res execution.ExecuteResult
	err error
}

// jobAttempt is one attempt of the activity. Cancelling its context is the
// worker dying; prior, when set, is the heartbeat the attempt before left,
// as Temporal hands it to a retry.
type jobAttempt struct {
	ctx   context.Context
	prior converter.EncodedValues
	// beats receives a value on heartbeats; details holds the last heartbeat's.
	beats   chan struct{}
	details atomic.Value
}

func attempt(ctx context.Context, prior converter.EncodedValues) *jobAttempt {
	return &jobAttempt{ctx: ctx, prior: prior, beats: make(chan struct{}, 1)}
}

// run runs the activity in the background through Temporal's activity test environment.
func (a *jobAttempt) run(jobs *execution.Jobs, in execution.JobInput) <-chan jobRun {
	var s testsuite.WorkflowTestSuite
	env := s.NewTestActivityEnvironment()
	env.SetWorkerOptions(sdkworker.Options{BackgroundActivityContext: a.ctx})
	if a.prior != nil {
		var progress json.RawMessage
		if a.prior.Get(&progress) == nil {
			env.SetHeartbeatDetails(progress)
		}
	}
	env.SetOnActivityHeartbeatListener(func(_ *activity.Info, d converter.EncodedValues) {
		if d != nil && d.HasValues() {
			a.details.Store(d)
		}
		select {
		case a.beats <- struct{}{}:
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

// heartbeat is the last heartbeat's details.
func (a *jobAttempt) heartbeat() converter.EncodedValues {
	d, _ := a.details.Load().(converter.EncodedValues)
	return d
}

// runJob runs one attempt to its end.
func runJob(t *testing.T, jobs *execution.Jobs, in execution.JobInput, timeout time.Duration) jobRun {
	t.Helper()
	return await(t, attempt(context.Background(), nil).run(jobs, in), timeout)
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

// jobPods lists the Pods of Job name in phase, once there are at least n.
func jobPods(t *testing.T, name string, n int, phase corev1.PodPhase) []corev1.Pod {
	t.Helper()
	var in []corev1.Pod
	require.Eventually(t, func() bool {
		var pods corev1.PodList
		require.NoError(t, harness.Kube().List(context.Background(), &pods, ctrlclient.InNamespace(devenv.Namespace), ctrlclient.MatchingLabels{"job-name": name}))
		in = in[:0]
		for _, p := range pods.Items {
			if p.Status.Phase == phase {
				in = append(in, p)
			}
		}
		return len(in) >= n
	}, runTimeout, 100*time.Millisecond, "%d pods of job %s in phase %q", n, name, phase)
	return in
}

// terminated is the exec container's termination, as the kubelet wrote it.
func terminated(t *testing.T, pod corev1.Pod) *corev1.ContainerStateTerminated {
	t.Helper()
	require.Len(t, pod.Status.ContainerStatuses, 1)
	term := pod.Status.ContainerStatuses[0].State.Terminated
	require.NotNil(t, term, "pod %s: %+v", pod.Name, pod.Status.ContainerStatuses[0].State)
	return term
}

// TestJobIsNeverRetried: the Pod runs `remedy exec` before its target
// exists and exits non-zero; the Job controller starts no second Pod (its
// backoffLimit is 0: every write is one ask of the gate), so the run fails
// with the Pod's termination message, and the target created afterwards is
// never written. The Job has the shape the admission policy admits.
func TestJobIsNeverRetried(t *testing.T) {
	ns := harness.Namespace(t)
	jobs := newJobs(t)
	in := jobInput(ns, "web", time.Minute, 1)
	r := runJob(t, jobs, in, runTimeout)
	require.Error(t, r.err)
	app := appError(t, r.err)
	assert.Equal(t, v1alpha1.ReasonExecutionFailed, app.Type(), app.Error())
	assert.Contains(t, app.Error(), `"web" not found`)

	name := execution.JobName(in)
	first := jobPods(t, name, 1, corev1.PodFailed)[0]
	term := terminated(t, first)
	assert.NotZero(t, term.ExitCode)
	assert.Contains(t, term.Message, `"web" not found`, "the kubelet read the termination log")
	d := harness.Deployment(t, ns, "web", 1)

	var job batchv1.Job
	require.NoError(t, harness.Kube().Get(context.Background(), ctrlclient.ObjectKey{Namespace: devenv.Namespace, Name: name}, &job))
	require.NotNil(t, condition(&job, batchv1.JobFailed), "the Job failed: the controller starts no Pod after that")
	var pods corev1.PodList
	require.NoError(t, harness.Kube().List(context.Background(), &pods, ctrlclient.InNamespace(devenv.Namespace), ctrlclient.MatchingLabels{"job-name": name}))
	assert.Len(t, pods.Items, 1, "one Pod, never retried")
	assert.Equal(t, int32(2), asked(jobs), "asked before the Job was created and by its Pod")
	assert.LessOrEqual(t, len(name), 63)
	assert.Equal(t, map[string]string{
		"app.kubernetes.io/part-of": "remedy", "remedy.dev/action": "scale", "remedy.dev/execution-name": "scale-web",
		"remedy.dev/execution-namespace": ns, "remedy.dev/execution-uid": in.ExecutionUID,
	}, job.Labels)
	assert.Empty(t, job.OwnerReferences, "owner references cannot cross namespaces")
	assert.Equal(t, ptr.To[int32](300), job.Spec.TTLSecondsAfterFinished)
	assert.Equal(t, ptr.To[int32](0), job.Spec.BackoffLimit, "the spec's maxRetries is not the Job's")
	assert.Equal(t, ptr.To[int64](60), job.Spec.ActiveDeadlineSeconds)
	pod := job.Spec.Template.Spec
	assert.Equal(t, "remedy-action-scale", pod.ServiceAccountName)
	assert.Equal(t, corev1.RestartPolicyNever, pod.RestartPolicy)
	require.Len(t, pod.Containers, 1)
	c := pod.Containers[0]
	assert.Equal(t, release.Image(), c.Image)
	assert.Equal(t, []string{"/remedy", "exec"}, c.Command)
	req, err := json.Marshal(in.Request)
	require.NoError(t, err)
	assert.Equal(t, []corev1.EnvVar{{Name: execution.RequestEnv, Value: string(req)},
		{Name: execution.ExecGateURLEnv, Value: jobs.ExecGate.URL}, {Name: execution.ExecGateCAEnv, Value: jobs.ExecGate.CA}}, c.Env)
	require.Len(t, pod.Volumes, 1)
	token := pod.Volumes[0].Projected.Sources[0].ServiceAccountToken
	assert.Equal(t, execution.ExecGateAudience, token.Audience, "the Pod's token for the gate is good for nothing else")
	require.NotNil(t, c.SecurityContext)
	assert.Equal(t, ptr.To(false), c.SecurityContext.AllowPrivilegeEscalation)
	assert.Equal(t, []corev1.Capability{"ALL"}, c.SecurityContext.Capabilities.Drop)
	assert.Equal(t, ptr.To(true), pod.SecurityContext.RunAsNonRoot)
	assert.Equal(t, int32(1), ptr.Deref(d.Spec.Replicas, 0), "created afterwards at 1")
	assert.Equal(t, int32(1), replicas(t, ns, "web"), "the target created afterwards is never written")
}

// condition is the Job's condition of type typ, when true.
func condition(job *batchv1.Job, typ batchv1.JobConditionType) *batchv1.JobCondition {
	for i, c := range job.Status.Conditions {
		if c.Type == typ && c.Status == corev1.ConditionTrue {
			return &job.Status.Conditions[i]
		}
	}
	return nil
}

// TestJobFailureCarriesTheTerminationMessage: `remedy exec` in the Pod fails
// (the Deployment does not exist) and exits non-zero; the run's error is the
// Pod's own termination message.
func TestJobFailureCarriesTheTerminationMessage(t *testing.T) {
	ns := harness.Namespace(t)
	r := runJob(t, newJobs(t), jobInput(ns, "missing", time.Minute, 0), runTimeout)
	require.Error(t, r.err)
	app := appError(t, r.err)
	assert.Equal(t, v1alpha1.ReasonExecutionFailed, app.Type(), app.Error())
	assert.True(t, app.NonRetryable())
	assert.Contains(t, app.Error(), `scale `+ns+`/Deployment/missing: deployments.apps "missing" not found`)
}

// TestJobDeadlineIsATimeout: a Pod that cannot start (the node is cordoned;
// the admission policy admits no other image to make it hang) runs into the
// Job's deadline, and the run fails ExecutionTimeout.
func TestJobDeadlineIsATimeout(t *testing.T) {
	ns := harness.Namespace(t)
	harness.Deployment(t, ns, "web", 1)
	cordon(t)
	start := time.Now()
	r := runJob(t, newJobs(t), jobInput(ns, "web", 3*time.Second, 0), runTimeout)
	require.Error(t, r.err)
	app := appError(t, r.err)
	assert.Equal(t, v1alpha1.ReasonExecutionTimeout, app.Type(), r.err.Error())
	assert.True(t, app.NonRetryable())
	t.Logf("timed out after %.1fs", time.Since(start).Seconds())
}

// cordon holds Pods unscheduled until the test ends or uncordons.
func cordon(t *testing.T) (uncordon func()) {
	t.Helper()
	harness.Cordon(t, true)
	var once atomic.Bool
	uncordon = func() {
		if once.CompareAndSwap(false, true) {
			harness.Cordon(t, false)
		}
	}
	t.Cleanup(uncordon)
	return uncordon
}

// diesWhilePending runs an attempt that creates the Job and watches its
// Pod, held pending by a cordon, and kills it: the worker dies.
func diesWhilePending(t *testing.T, jobs *execution.Jobs, in execution.JobInput) *jobAttempt {
	t.Helper()
	ctx, kill := context.WithCancel(context.Background())
	a := attempt(ctx, nil)
	runs := a.run(jobs, in)
	jobPods(t, execution.JobName(in), 1, corev1.PodPending)
	<-a.beats                          // about to watch
	time.Sleep(500 * time.Millisecond) // and watching: sets up the scenario (no event marks the watch open); asserts nothing
	kill()
	require.Error(t, await(t, runs, 10*time.Second).err, "the dead attempt does not report a result")
	require.NotNil(t, a.heartbeat(), "the attempt recorded its Job")
	return a
}

// TestJobResumesAfterTheWorkerDies: the worker dies while its Job's Pod
// waits to be scheduled; the retry finds the Job, watches its Pod run and
// returns its plan. One Job, one Pod, one write.
func TestJobResumesAfterTheWorkerDies(t *testing.T) {
	ns := harness.Namespace(t)
	harness.Deployment(t, ns, "web", 1)
	jobs := newJobs(t)
	in := jobInput(ns, "web", time.Minute, 0)
	name := execution.JobName(in)
	uncordon := cordon(t)

	first := diesWhilePending(t, jobs, in)
	retry := attempt(context.Background(), first.heartbeat())
	runs := retry.run(jobs, in)
	<-retry.beats // the retry found the Job and watches it
	uncordon()

	r := await(t, runs, runTimeout)
	require.NoError(t, r.err)
	assert.Equal(t, "replicas: 2", r.res.Plan.Change.After)
	var list batchv1.JobList
	require.NoError(t, harness.Kube().List(context.Background(), &list, ctrlclient.InNamespace(devenv.Namespace),
		ctrlclient.MatchingLabels{execution.LabelExecutionUID: in.ExecutionUID}))
	require.Len(t, list.Items, 1, "a retried activity never creates a second Job")
	assert.Equal(t, int32(2), asked(jobs), "the gate is asked before the one Job is created, not again for a Job that exists, "+
		"and once by its Pod, answered by the retry that attends it")
	assert.Len(t, jobPods(t, name, 1, corev1.PodSucceeded), 1)
	available(t, ns, "web", 2)
}

// TestJobCollectedPastItsTTLIsNotRunAgain: the worker dies while its Job's
// Pod waits; the Pod then runs, but no run attends it to answer its ask of
// the exec gate, so it writes nothing and the Job runs into its deadline;
// the TTL controller collects the failed Job before a retry comes. The
// retry, handed the dead attempt's heartbeat, knows the Job it created and
// does not create it, and so the action, again.
func TestJobCollectedPastItsTTLIsNotRunAgain(t *testing.T) {
	ns := harness.Namespace(t)
	harness.Deployment(t, ns, "web", 1)
	jobs := newJobs(t)
	jobs.TTL = time.Second
	in := jobInput(ns, "web", 30*time.Second, 0)
	name := execution.JobName(in)
	uncordon := cordon(t)

	first := diesWhilePending(t, jobs, in)
	uncordon()
	jobPods(t, name, 1, corev1.PodRunning) // and asking

	job := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Namespace: devenv.Namespace, Name: name}}
	harness.Eventually(t, job, runTimeout, func(j *batchv1.Job) bool { return condition(j, batchv1.JobFailed) != nil })
	assert.Equal(t, batchv1.JobReasonDeadlineExceeded, condition(job, batchv1.JobFailed).Reason, "the Pod kept asking; nobody answered")
	require.Eventually(t, func() bool {
		return apierrors.IsNotFound(harness.Kube().Get(context.Background(), ctrlclient.ObjectKeyFromObject(job), &batchv1.Job{}))
	}, runTimeout, 100*time.Millisecond, "the TTL controller collects the finished Job")
	assert.Equal(t, int32(1), replicas(t, ns, "web"), "a Pod no run answers writes nothing")

	r := await(t, attempt(context.Background(), first.heartbeat()).run(jobs, in), runTimeout)
	require.Error(t, r.err)
	app := appError(t, r.err)
	assert.Equal(t, v1alpha1.ReasonExecutionFailed, app.Type())
	assert.Contains(t, app.Error(), "it is not run again")
	assert.Equal(t, int32(1), asked(jobs), "no second Job, and the Pod's ask reached no run")
	assert.Equal(t, int32(1), replicas(t, ns, "web"), "the action never ran")
}

func generation(t *testing.T, d *appsv1.Deployment) int64 {
	t.Helper()
	require.NoError(t, harness.Kube().Get(context.Background(), ctrlclient.ObjectKeyFromObject(d), d))
	return d.Generation
}
