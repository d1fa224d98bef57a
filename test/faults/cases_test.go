package faults

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	ctrlclient "sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/remedy-dev/remedy/activities"
	"github.com/remedy-dev/remedy/api/v1alpha1"
	"github.com/remedy-dev/remedy/internal/devenv"
	"github.com/remedy-dev/remedy/test/harness"
	"github.com/remedy-dev/remedy/test/procs"
	"github.com/remedy-dev/remedy/workflows"
)

// down is how long a killed process stays down, by what it is: long enough
// for what depends on it to fail and retry, and for the API server shorter
// than the operator's renew deadline (10s).
// down is how long each part stays down: the fault's length, an input. A
// case sleeps it only with the part down (or watches through it with
// stays), and asserts once the part is back.
var down = map[string]time.Duration{worker: 3 * time.Second, operator: 8 * time.Second, webhook: 3 * time.Second,
	temporal: 3 * time.Second, apiserver: 4 * time.Second}

func cases() []faultCase {
	var cs []faultCase
	for _, proc := range []string{worker, temporal, operator, apiserver} {
		cs = append(cs, faultCase{proc, pointApproval, func(t *testing.T, p *parts) string { return approvalWait(t, p, proc) }})
	}
	for _, proc := range []string{worker, temporal, apiserver} {
		cs = append(cs, faultCase{proc, pointInline, func(t *testing.T, p *parts) string { return inlineWrite(t, p, proc) }})
	}
	for _, proc := range []string{worker, temporal} {
		cs = append(cs, faultCase{proc, pointJob, func(t *testing.T, p *parts) string { return jobPastTTL(t, p, proc) }})
	}
	for _, proc := range []string{worker, operator, temporal, apiserver} {
		cs = append(cs, faultCase{proc, pointReload, func(t *testing.T, p *parts) string { return reloadDebounce(t, p, proc) }})
	}
	for _, proc := range []string{worker, operator, temporal, apiserver} {
		cs = append(cs, faultCase{proc, pointRR, func(t *testing.T, p *parts) string { return rrBetweenSteps(t, p, proc) }})
	}
	for _, proc := range []string{worker, temporal, apiserver} {
		cs = append(cs, faultCase{proc, pointSaga, func(t *testing.T, p *parts) string { return rrCompensating(t, p, proc) }})
	}
	for _, proc := range []string{webhook, worker, temporal} {
		cs = append(cs, faultCase{proc, pointDrift, func(t *testing.T, p *parts) string { return driftOpen(t, p, proc) }})
	}
	for _, proc := range []string{worker, temporal} {
		cs = append(cs, faultCase{proc, pointReceipt, func(t *testing.T, p *parts) string { return alertReceipt(t, p, proc) }})
		cs = append(cs, faultCase{proc, pointFlap, func(t *testing.T, p *parts) string { return alertFlap(t, p, proc) }})
	}
	return cs
}

// --- what the API server records ---

func deployment(t *testing.T, ns, name string) *appsv1.Deployment {
	t.Helper()
	var d appsv1.Deployment
	require.Eventually(t, func() bool {
		return harness.Kube().Get(context.Background(), ctrlclient.ObjectKey{Namespace: ns, Name: name}, &d) == nil
	}, time.Minute, 100*time.Millisecond)
	return &d
}

func generation(t *testing.T, ns, name string) int64 { return deployment(t, ns, name).Generation }

// Deployments bump metadata.generation on annotation changes too, and three
// writers besides Remedy annotate them: the drift webhook (kausality.io/phase
// and kausality.io/controllers, once each while the Deployment becomes
// available), the Deployment controller (deployment.kubernetes.io/revision,
// once per rollout) and, for reloads, the baseline's hash annotations. So a
// case counts from a settled Deployment, and a rollout is two generations:
// the template change and the controller's revision annotation.

// settled waits until those writers are done with the Deployment and
// returns its generation.
func settled(t *testing.T, ns, name string) int64 {
	t.Helper()
	var last int64
	since := time.Now()
	harness.Eventually(t, &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}, 2*time.Minute, func(d *appsv1.Deployment) bool {
		if d.Generation != last {
			last, since = d.Generation, time.Now()
		}
		return d.Annotations["kausality.io/phase"] == "initialized" && d.Annotations["kausality.io/controllers"] != "" &&
			d.Status.ObservedGeneration == d.Generation && time.Since(since) > time.Second
	})
	return last
}

// whole waits until a new Deployment settles: the API server, the
// Deployment controller and the drift webhook all answer again.
func whole(t *testing.T) {
	t.Helper()
	ns := harness.Namespace(t)
	harness.Deployment(t, ns, "web", 0)
	settled(t, ns, "web")
}

// target creates a Deployment of no replicas, so it is available at once
// without a kubelet, and returns its settled generation.
func target(t *testing.T, ns string) int64 {
	t.Helper()
	harness.Deployment(t, ns, "web", 0)
	return settled(t, ns, "web")
}

// replicaSets counts the ReplicaSets of the Deployment: one per pod template it rolled out.
func replicaSets(t *testing.T, ns, app string) int {
	t.Helper()
	var list appsv1.ReplicaSetList
	require.NoError(t, harness.Kube().List(context.Background(), &list, ctrlclient.InNamespace(ns), ctrlclient.MatchingLabels{"app": app}))
	return len(list.Items)
}

// settledReplicaSets waits until the Deployment controller has caught up
// with the Deployment and counts its ReplicaSets. After kube-apiserver was
// killed, kube-controller-manager was once seen to take more than a minute
// to catch up (its status write 40s after the last change still named the
// generation before), so it gets three.
func settledReplicaSets(t *testing.T, ns, name string) int {
	t.Helper()
	harness.Eventually(t, &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}, 3*time.Minute,
		func(d *appsv1.Deployment) bool { return d.Status.ObservedGeneration == d.Generation })
	return replicaSets(t, ns, name)
}

// stays checks that the Deployment's generation stays at want while a part
// is down for d: the claim is about that window, so it watches all of it.
func stays(t *testing.T, ns, name string, want int64, d time.Duration, msg string) {
	t.Helper()
	deadline := time.Now().Add(d)
	for time.Now().Before(deadline) {
		var dep appsv1.Deployment
		if harness.Kube().Get(context.Background(), ctrlclient.ObjectKey{Namespace: ns, Name: name}, &dep) == nil {
			require.Equal(t, want, dep.Generation, msg)
		}
		time.Sleep(200 * time.Millisecond) // polls through the fault window, which is the claim
	}
}

func create(t *testing.T, obj ctrlclient.Object) {
	t.Helper()
	require.NoError(t, harness.Kube().Create(context.Background(), obj))
}

func scaleSpec(ns string, replicas int32) v1alpha1.KubernetesExecutionSpec {
	return v1alpha1.KubernetesExecutionSpec{
		Action:         "scale",
		Target:         v1alpha1.ObjectRef{APIVersion: "apps/v1", Kind: "Deployment", Namespace: ns, Name: "web"},
		Parameters:     &v1alpha1.ActionParameters{Replicas: ptr.To(replicas)},
		RollbackWindow: v1alpha1.DurationOf(time.Second),
		Timeout:        v1alpha1.DurationOf(2 * time.Minute),
	}
}

func execution(t *testing.T, ns, name string, spec v1alpha1.KubernetesExecutionSpec) *v1alpha1.KubernetesExecution {
	t.Helper()
	k := &v1alpha1.KubernetesExecution{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}, Spec: spec}
	create(t, k)
	return k
}

// settle waits for the execution to reach phase, or to end elsewhere.
func settle(t *testing.T, k *v1alpha1.KubernetesExecution, phase v1alpha1.Phase, timeout time.Duration) *v1alpha1.KubernetesExecution {
	t.Helper()
	k = harness.Eventually(t, k, timeout, func(k *v1alpha1.KubernetesExecution) bool {
		return k.Status.Phase == phase || k.Status.Phase.Terminal()
	})
	require.Equal(t, phase, k.Status.Phase, "reason %s: %s", k.Status.Reason, k.Status.Message)
	return k
}

// signal sends a signal, retrying while Temporal comes back.
func signal(t *testing.T, id, name string, arg any) {
	t.Helper()
	var err error
	require.Eventually(t, func() bool {
		err = procs.Env().Temporal.SignalWorkflow(context.Background(), id, "", name, arg)
		return err == nil
	}, time.Minute, 200*time.Millisecond, "signal %s: %v", name, err)
}

// --- the cases ---

// approvalWait: a scale waits for approval; the process is killed, the
// decision is made while it is down (by signal, or by kubectl when Temporal
// is the one down), and the run goes on once it is back: one write.
func approvalWait(t *testing.T, p *parts, what string) string {
	ns := harness.Namespace(t)
	gen := target(t, ns)
	spec := scaleSpec(ns, 4)
	spec.Approval = &v1alpha1.ApprovalSpec{Required: true, Timeout: v1alpha1.DurationOf(10 * time.Minute)}
	k := settle(t, execution(t, ns, "scale-web", spec), v1alpha1.PhaseWaitingApproval, 90*time.Second)
	rar := k.Status.ApprovalRequestRef.Name

	p.kill(t, what)
	via := "temporal signal"
	if what == temporal {
		via = "kubectl (approver alice)"
		p.kubectl.Run(t, "patch", "rar", rar, "-n", ns, "--subresource=status", "--type=merge",
			"-p", `{"status":{"decision":"Approved","decisionMessage":"fault suite"}}`, "--as=alice", "--as-group=sre-approvers")
	} else {
		signal(t, k.Status.WorkflowID, workflows.SignalApprove, workflows.ApprovalSignal{Approver: "alice", Request: rar})
	}
	if what != apiserver {
		stays(t, ns, "web", gen, down[what], "nothing is written while "+what+" is down")
	} else {
		time.Sleep(down[what])
	}
	p.restart(t, what)

	k = settle(t, k, v1alpha1.PhaseCompleted, 2*time.Minute)
	d := deployment(t, ns, "web")
	assert.Equal(t, gen+1, d.Generation, "the spec changed exactly once")
	assert.Equal(t, int32(4), *d.Spec.Replicas)
	var req v1alpha1.RemediationApprovalRequest
	require.NoError(t, harness.Kube().Get(context.Background(), ctrlclient.ObjectKey{Namespace: ns, Name: rar}, &req))
	assert.Equal(t, v1alpha1.DecisionApproved, req.Status.Decision)
	stays(t, ns, "web", gen+1, 2*time.Second, "no second write")
	return fmt.Sprintf("decided by %s; generation +%d; %s; RAR %s via %s", via, deployment(t, ns, "web").Generation-gen, k.Status.Phase, req.Status.Decision, req.Status.DecidedVia)
}

// inlineWrite: the worker's PATCH of the target lands and its answer is
// held; then the process is killed. The run finishes with one write.
func inlineWrite(t *testing.T, p *parts, what string) string {
	ns := harness.Namespace(t)
	gen := target(t, ns)
	path := "/apis/apps/v1/namespaces/" + ns + "/deployments/web"
	hold := p.proxy.HoldAfter(t, func(r *http.Request, _ []byte) bool { return r.Method == http.MethodPatch && r.URL.Path == path })
	k := execution(t, ns, "scale-web", scaleSpec(ns, 5))
	select {
	case <-hold.Reached():
	case <-time.After(90 * time.Second):
		require.FailNow(t, "the worker never wrote the Deployment")
	}
	require.Equal(t, int32(5), *deployment(t, ns, "web").Spec.Replicas, "the write landed before the kill")
	p.kill(t, what)
	if what != worker {
		// The answer reaches a worker that cannot report it.
		hold.Release()
	}
	time.Sleep(down[what])
	p.restart(t, what)
	hold.Release()

	k = settle(t, k, v1alpha1.PhaseCompleted, 2*time.Minute)
	assert.Equal(t, gen+1, generation(t, ns, "web"), "the spec changed exactly once")
	res := k.Status.ExecutionResults
	require.NotNil(t, res)
	require.Len(t, res.ResourcesAffected, 1)
	assert.Equal(t, "scaled", res.ResourcesAffected[0].Action, "the landed write, not an unchanged re-run")
	assert.Equal(t, "replicas: 0", res.ResourcesAffected[0].Before)
	if what == worker {
		assert.Equal(t, int32(1), res.RetriesAttempted, "the killed attempt was retried")
	}
	how := "the retry recognised the landed write"
	if res.RetriesAttempted == 0 {
		how = "the worker reported the landed write once " + what + " was back"
	}
	return fmt.Sprintf("generation +%d; %s; retries %d: %s", generation(t, ns, "web")-gen, k.Status.Phase, res.RetriesAttempted, how)
}

// jobPastTTL: the Job's Pod runs `remedy exec` from the image on the real
// node and scales the target; the worker, which saw the Job finish, is
// killed while it reads the Pod's result (its request held at the proxy), and
// the TTL controller collects the finished Job before a worker is back. The
// action is not run again, and the run fails saying so.
func jobPastTTL(t *testing.T, p *parts, what string) string {
	ns := harness.Namespace(t)
	gen := target(t, ns)
	spec := scaleSpec(ns, 5)
	spec.Executor = v1alpha1.ExecutorJob
	// The worker lists a finished Job's Pods to read their result.
	read := p.proxy.HoldBefore(t, func(r *http.Request, _ []byte) bool {
		return r.Method == http.MethodGet && r.URL.Path == "/api/v1/namespaces/"+devenv.Namespace+"/pods" && strings.Contains(r.URL.Query().Get("labelSelector"), "job-name=")
	})
	k := execution(t, ns, "scale-web", spec)
	select {
	case <-read.Reached():
	case <-time.After(2 * time.Minute):
		require.FailNow(t, "the worker never read a finished Job's Pods")
	}
	k = harness.Eventually(t, k, time.Minute, func(k *v1alpha1.KubernetesExecution) bool { return k.Status.WorkflowID != "" })
	jobs := harness.JobsOf(t, k)
	require.Len(t, jobs, 1)
	job := jobs[0]
	require.True(t, succeeded(job), "the Job completed in a real Pod: %+v", job.Status)
	require.Equal(t, string(job.UID), harness.RecordedJobUID(t, k.Status.WorkflowID), "the run recorded the UID of the Job it created")
	require.Equal(t, gen+1, generation(t, ns, "web"), "the Job's Pod scaled the Deployment")
	pod := jobPod(t, job.Name)

	p.kill(t, what)
	if what != worker {
		// The result reaches a worker that cannot report it.
		read.Release()
	}
	require.Eventually(t, func() bool { return len(harness.JobsOf(t, k)) == 0 }, time.Minute, 200*time.Millisecond, "the TTL controller collects the finished Job")
	p.restart(t, what)
	read.Release()

	k = harness.Eventually(t, k, 2*time.Minute, func(k *v1alpha1.KubernetesExecution) bool {
		return k.Status.Phase == v1alpha1.PhaseRollbackReady || k.Status.Phase.Terminal()
	})
	if what == worker {
		// Nobody recorded the Job's result before it was collected.
		assert.Equal(t, v1alpha1.PhaseFailed, k.Status.Phase)
		assert.Equal(t, activities.ReasonExecutionFailed, k.Status.Reason)
		assert.Contains(t, k.Status.Message, "it is not run again")
	} else {
		// The worker read the result and reports it once Temporal is back; a
		// worker that could not, fails it as unknown. Either way it ran once.
		assert.Contains(t, []v1alpha1.Phase{v1alpha1.PhaseRollbackReady, v1alpha1.PhaseCompleted, v1alpha1.PhaseFailed}, k.Status.Phase, k.Status.Message)
	}
	assert.Empty(t, harness.JobsOf(t, k), "the collected Job was not created again")
	assert.Equal(t, gen+1, generation(t, ns, "web"), "the action ran exactly once")
	return fmt.Sprintf("Job completed in Pod %s and collected by TTL (3s) while down; generation +%d; %s (%s), Job not recreated",
		pod, generation(t, ns, "web")-gen, k.Status.Phase, k.Status.Reason)
}

// succeeded: the Job controller decided the Job succeeded (the Pod's count
// may still be uncounted then, as when the worker reads the result).
func succeeded(job batchv1.Job) bool {
	for _, c := range job.Status.Conditions {
		if (c.Type == batchv1.JobComplete || c.Type == batchv1.JobSuccessCriteriaMet) && c.Status == corev1.ConditionTrue {
			return true
		}
	}
	return false
}

// jobPod is the name of Job name's one Pod, which succeeded on the node.
func jobPod(t *testing.T, job string) string {
	t.Helper()
	var pods corev1.PodList
	require.NoError(t, harness.Kube().List(context.Background(), &pods, ctrlclient.InNamespace(devenv.Namespace), ctrlclient.MatchingLabels{"job-name": job}))
	require.Len(t, pods.Items, 1)
	pod := pods.Items[0]
	require.Equal(t, corev1.PodSucceeded, pod.Status.Phase)
	require.NotEmpty(t, pod.Spec.NodeName, "the Pod ran on the node")
	return pod.Name
}

const debounce = 5 * time.Second

// reloadDebounce: a ConfigMap edit restarts at once and opens the window; a
// second edit inside it waits for it to close; the process is killed inside
// the window and stays down past it. The second edit rolls exactly once.
// The operator is down for an edit too, which rolls once when it is back.
func reloadDebounce(t *testing.T, p *parts, what string) string {
	ctx := context.Background()
	ns := harness.Namespace(t)
	create(t, &v1alpha1.ConfigReloadPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: "reload", Namespace: ns},
		Spec: v1alpha1.ConfigReloadPolicySpec{
			ConfigMapSelector: metav1.LabelSelector{MatchLabels: map[string]string{"reload": "true"}},
			WorkloadSelector:  metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}},
			Debounce:          v1alpha1.DurationOf(debounce),
		},
	})
	cm := &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: "settings", Namespace: ns, Labels: map[string]string{"reload": "true", "env": "prod"}},
		Data:       map[string]string{"mode": "a"},
	}
	create(t, cm)
	labels := map[string]string{"app": "web", "env": "prod"}
	create(t, &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: ns, Labels: labels},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To[int32](0),
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{harness.DemoContainer("web")}},
			},
		},
	})
	const hash = "remedy.dev/config-hash-settings"
	harness.Eventually(t, &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: ns}}, time.Minute,
		func(d *appsv1.Deployment) bool { return d.Annotations[hash] != "" })
	edit := func(v string) {
		t.Helper()
		require.Eventually(t, func() bool {
			var cur corev1.ConfigMap
			if harness.Kube().Get(ctx, ctrlclient.ObjectKeyFromObject(cm), &cur) != nil {
				return false
			}
			cur.Data["mode"] = v
			return harness.Kube().Update(ctx, &cur) == nil
		}, time.Minute, 200*time.Millisecond)
	}
	gen := settled(t, ns, "web")
	// A rollout: the template change, with the hash annotations in the same write.
	const rollout = 1
	edit("b") // the leading edge: restarts at once
	harness.Eventually(t, &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: ns}}, time.Minute,
		func(d *appsv1.Deployment) bool { return d.Generation > gen })
	rolled := settled(t, ns, "web")
	require.Equal(t, gen+rollout, rolled, "the leading edge rolled once")
	edit("c")
	id := workflows.ReloadWorkflowID(ns, "Deployment", "web")
	require.Eventually(t, func() bool {
		var st workflows.ReloadStatus
		tc := procs.Env().Temporal
		if what == upgraded {
			// The previous release answers unsealed, as it sealed nothing.
			tc = p.upgrade.previous
		}
		v, err := tc.QueryWorkflow(ctx, id, "", workflows.QueryStatus)
		return err == nil && v.Get(&st) == nil && len(st.Pending) == 1 && st.DueAt != ""
	}, 20*time.Second, 20*time.Millisecond, "the change within the window waits for it to close")

	p.kill(t, what)
	want, note := rolled+rollout, "edit inside the window rolled once"
	switch what {
	case operator:
		// The pending change is Temporal's: it rolls with the operator down.
		harness.Eventually(t, &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: ns}}, time.Minute,
			func(d *appsv1.Deployment) bool { return d.Generation > rolled })
		require.Equal(t, rolled+rollout, settled(t, ns, "web"))
		edit("d")
		want, note = rolled+2*rollout, "edit inside the window rolled once while the operator was down; an edit while down rolled once after its restart"
		stays(t, ns, "web", rolled+rollout, debounce+time.Second, "nothing rolls for an edit while the operator is down")
	case apiserver:
		time.Sleep(down[what])
	default:
		stays(t, ns, "web", rolled, 2*debounce, "nothing rolls while "+what+" is down")
	}
	p.restart(t, what)

	harness.Eventually(t, &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: ns}}, 2*time.Minute,
		func(d *appsv1.Deployment) bool { return d.Generation >= want })
	stays(t, ns, "web", want, 2*debounce, "exactly one rollout per window")
	d := deployment(t, ns, "web")
	assert.Equal(t, d.Annotations[hash], d.Spec.Template.Annotations[hash], "the last rollout applied the newest data")
	rs := settledReplicaSets(t, ns, "web")
	assert.Equal(t, int(want-gen)/rollout+1, rs, "one ReplicaSet per rollout, and the first")
	return fmt.Sprintf("%s; generation +%d; %d ReplicaSets", note, d.Generation-gen, rs)
}

// rrBetweenSteps: a RemediationRequest scales, then restarts. The worker's
// create of the second step is held before it reaches the API server, and
// the process is killed there. The request completes with each step done once.
func rrBetweenSteps(t *testing.T, p *parts, what string) string {
	ns := harness.Namespace(t)
	gen := target(t, ns)
	path := "/apis/remedy.dev/v1alpha1/namespaces/" + ns + "/kubernetesexecutions"
	hold := p.proxy.HoldBefore(t, func(r *http.Request, body []byte) bool {
		return r.Method == http.MethodPost && r.URL.Path == path && strings.Contains(string(body), `"fix-restart"`)
	})
	target := v1alpha1.ObjectRef{APIVersion: "apps/v1", Kind: "Deployment", Namespace: ns, Name: "web"}
	rr := &v1alpha1.RemediationRequest{
		ObjectMeta: metav1.ObjectMeta{Name: "fix", Namespace: ns},
		Spec: v1alpha1.RemediationRequestSpec{Steps: []v1alpha1.RemediationStep{
			{Name: "scale", Execution: v1alpha1.KubernetesExecutionSpec{Action: "scale", Target: target,
				Parameters: &v1alpha1.ActionParameters{Replicas: ptr.To[int32](3)}}},
			{Name: "restart", Execution: v1alpha1.KubernetesExecutionSpec{Action: "restart", Target: target}},
		}},
	}
	create(t, rr)
	select {
	case <-hold.Reached():
	case <-time.After(2 * time.Minute):
		require.FailNow(t, "the second step was never created")
	}
	require.Equal(t, gen+1, generation(t, ns, "web"), "the first step is done")
	p.kill(t, what)
	if what != worker {
		// The create goes on, and meets the part that is down.
		hold.Release()
	}
	time.Sleep(down[what])
	p.restart(t, what)
	hold.Release()

	rr = harness.Eventually(t, rr, 3*time.Minute, func(r *v1alpha1.RemediationRequest) bool { return r.Status.Phase.Terminal() })
	require.Equal(t, v1alpha1.PhaseCompleted, rr.Status.Phase, "reason %s: %s", rr.Status.Reason, rr.Status.Message)
	d := deployment(t, ns, "web")
	assert.Equal(t, gen+2, d.Generation, "one scale and one restart")
	assert.Equal(t, int32(3), *d.Spec.Replicas)
	assert.NotEmpty(t, d.Spec.Template.Annotations["kubectl.kubernetes.io/restartedAt"])
	var steps v1alpha1.KubernetesExecutionList
	require.NoError(t, harness.Kube().List(context.Background(), &steps, ctrlclient.InNamespace(ns)))
	assert.Len(t, steps.Items, 2, "one execution per step")
	rs := settledReplicaSets(t, ns, "web")
	assert.Equal(t, 2, rs, "one rollout: the restart")
	return fmt.Sprintf("killed with step 2 not yet created; generation +%d; %d executions; %d ReplicaSets; %s", d.Generation-gen, len(steps.Items), rs, rr.Status.Phase)
}

// driftOpen: in an enforce namespace a person scales a Deployment's
// ReplicaSet and the Deployment controller's revert is denied as drift,
// which opens the parent's drift workflow. The process is killed while it
// is open and brought back; a once approval then lets exactly one revert through.
func driftOpen(t *testing.T, p *parts, what string) string {
	ctx := context.Background()
	ns := harness.Namespace(t)
	require.NoError(t, harness.Kube().Patch(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}},
		ctrlclient.RawPatch(types.MergePatchType, []byte(`{"metadata":{"annotations":{"kausality.io/mode":"enforce"}}}`))))
	dep := harness.Deployment(t, ns, "web", 0)
	var rs appsv1.ReplicaSet
	require.Eventually(t, func() bool {
		var list appsv1.ReplicaSetList
		if harness.Kube().List(ctx, &list, ctrlclient.InNamespace(ns)) != nil || len(list.Items) != 1 {
			return false
		}
		rs = list.Items[0]
		d := deployment(t, ns, "web")
		return rs.Annotations["kausality.io/updaters"] != "" && d.Status.ObservedGeneration == d.Generation
	}, time.Minute, 200*time.Millisecond, "the Deployment controller made a traced ReplicaSet")
	rsGen := rs.Generation
	require.NoError(t, harness.Kube().Patch(ctx, &rs, ctrlclient.RawPatch(types.MergePatchType, []byte(`{"spec":{"replicas":2}}`))))
	id := workflows.DriftWorkflowID(string(dep.UID))
	require.Eventually(t, func() bool {
		d, err := procs.Env().Temporal.DescribeWorkflowExecution(ctx, id, "")
		return err == nil && d.WorkflowExecutionInfo.GetCloseTime() == nil && p.callbacks.count(string(dep.UID), "Detected") == 1
	}, 2*time.Minute, 200*time.Millisecond, "the revert was judged drift and reported")

	p.kill(t, what)
	time.Sleep(down[what])
	p.restart(t, what)

	require.NoError(t, harness.Kube().Patch(ctx, &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web"}},
		ctrlclient.RawPatch(types.MergePatchType, []byte(`{"metadata":{"annotations":{"kausality.io/approvals":"[{\"apiVersion\":\"apps/v1\",\"kind\":\"ReplicaSet\",\"name\":\"*\",\"mode\":\"once\"}]"}}}`))))
	// A touch of the ReplicaSet wakes the controller from its backoff.
	require.NoError(t, harness.Kube().Patch(ctx, &rs, ctrlclient.RawPatch(types.MergePatchType, []byte(`{"metadata":{"labels":{"touched":"yes"}}}`))))
	got := harness.Eventually(t, &appsv1.ReplicaSet{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: rs.Name}}, 3*time.Minute,
		func(r *appsv1.ReplicaSet) bool { return *r.Spec.Replicas == 0 })
	harness.WaitClosed(t, id, time.Minute)
	// The run has closed: every report it sent was answered before its activity completed.
	require.Eventually(t, func() bool { return p.callbacks.count(string(dep.UID), "Resolved") >= 1 }, time.Minute, 200*time.Millisecond)
	assert.Equal(t, rsGen+2, got.Generation, "the person's scale and one revert")
	assert.Equal(t, 1, p.callbacks.count(string(dep.UID), "Detected"), "one Detected report")
	assert.Equal(t, 1, p.callbacks.count(string(dep.UID), "Resolved"), "one Resolved report")
	return fmt.Sprintf("ReplicaSet generation +%d (scale, one revert); reports Detected %d, Resolved %d; workflow closed",
		got.Generation-rsGen, p.callbacks.count(string(dep.UID), "Detected"), p.callbacks.count(string(dep.UID), "Resolved"))
}

// leaderFailover: two operators with the manifest's leader election; a run
// waits for approval; the leader is killed and a person approves with
// kubectl. The follower takes over and relays it: one write, within the
// lease duration plus a few seconds.
func leaderFailover(t *testing.T, p *parts) {
	begun := time.Now()
	second := procs.StartPod(t, procs.Deployment(t, "remedy-operator"), 1)
	require.Eventually(t, func() bool {
		code, _ := procs.Get(second.URL("probes", "/readyz"))
		return code == 200
	}, 90*time.Second, 100*time.Millisecond, "second operator never ready:\n%s", second.Out)
	procs.RouteService(t, "remedy-webhook", second)
	require.True(t, procs.Leads(p.operator) && !procs.Leads(second), "the first operator leads")
	leader := p.operator

	ns := harness.Namespace(t)
	gen := target(t, ns)
	spec := scaleSpec(ns, 4)
	spec.Approval = &v1alpha1.ApprovalSpec{Required: true, Timeout: v1alpha1.DurationOf(10 * time.Minute)}
	k := settle(t, execution(t, ns, "scale-web", spec), v1alpha1.PhaseWaitingApproval, 90*time.Second)

	killed := time.Now()
	leader.Kill()
	// The dead pod fails readiness, so the EndpointSlice controller takes it
	// out of the webhook Service.
	procs.Unroute(t, leader)
	p.kubectl.Run(t, "patch", "rar", k.Status.ApprovalRequestRef.Name, "-n", ns, "--subresource=status", "--type=merge",
		"-p", `{"status":{"decision":"Approved","decisionMessage":"fault suite"}}`, "--as=alice", "--as-group=sre-approvers")
	k = harness.Eventually(t, k, procs.LeaseDuration+30*time.Second, func(k *v1alpha1.KubernetesExecution) bool {
		return k.Status.Phase == v1alpha1.PhaseRollbackReady || k.Status.Phase.Terminal()
	})
	took := time.Since(killed)
	led := procs.Leads(second)
	k = settle(t, k, v1alpha1.PhaseCompleted, time.Minute)
	t.Logf("failover: the run went on %.1fs after the leader was killed (lease %s)", took.Seconds(), procs.LeaseDuration)
	// A follower tries every RetryPeriod (2s) jittered up to 2.2x and sees
	// the expiry up to one try late: the lease plus two tries at worst.
	assert.Less(t, took, procs.LeaseDuration+9*time.Second, "handover and relay within the lease duration plus a few seconds")
	assert.True(t, led, "the follower leads")
	assert.Equal(t, gen+1, generation(t, ns, "web"), "one write")
	stays(t, ns, "web", gen+1, 2*time.Second, "no second write")

	outcome := "PASS"
	if t.Failed() {
		outcome = "FAIL"
	}
	tableMu.Lock()
	table[[2]string{"operator x2", "leader failover"}] = row{outcome: fmt.Sprintf("%s (%.0fs)", outcome, time.Since(begun).Seconds()),
		detail: fmt.Sprintf("kubectl approval while the leader was dead; run went on %.1fs after the kill (lease %s); generation +%d; %s",
			took.Seconds(), procs.LeaseDuration, generation(t, ns, "web")-gen, k.Status.Phase)}
	tableMu.Unlock()
	// The survivor serves the suite from here on.
	p.operator = second
}

// rrCompensating: a RemediationRequest scales web, then api, and its third
// step fails. The compensation rolls api back, then web; the process is
// killed while web's rollback write is held. Once it is back the
// compensation finishes: both rolled back, newest first, each once.
func rrCompensating(t *testing.T, p *parts, what string) string {
	ns := harness.Namespace(t)
	gen := target(t, ns)
	harness.Deployment(t, ns, "api", 0)
	apiGen := settled(t, ns, "api")
	path := "/apis/apps/v1/namespaces/" + ns + "/deployments/web"
	hold := p.proxy.HoldBefore(t, func(r *http.Request, body []byte) bool {
		return r.Method == http.MethodPatch && r.URL.Path == path && r.URL.Query().Get("dryRun") == "" &&
			strings.Contains(string(body), `"spec":{"replicas":0}`)
	})
	ref := func(name string) v1alpha1.ObjectRef {
		return v1alpha1.ObjectRef{APIVersion: "apps/v1", Kind: "Deployment", Namespace: ns, Name: name}
	}
	scale := func(name string, replicas int32) v1alpha1.KubernetesExecutionSpec {
		return v1alpha1.KubernetesExecutionSpec{Action: "scale", Target: ref(name), Parameters: &v1alpha1.ActionParameters{Replicas: ptr.To(replicas)}}
	}
	fails := scale("api", 5)
	fails.PreConditions = []v1alpha1.Condition{{Name: "never", Rego: "package pre.never\n\npass if input.target.spec.replicas == 42\n",
		Required: true, Timeout: v1alpha1.DurationOf(time.Second)}}
	rr := &v1alpha1.RemediationRequest{
		ObjectMeta: metav1.ObjectMeta{Name: "undo", Namespace: ns},
		Spec: v1alpha1.RemediationRequestSpec{Steps: []v1alpha1.RemediationStep{
			{Name: "web", Execution: scale("web", 2)},
			{Name: "api", Execution: scale("api", 3)},
			{Name: "fails", Execution: fails},
		}},
	}
	create(t, rr)
	select {
	case <-hold.Reached():
	case <-time.After(2 * time.Minute):
		require.FailNow(t, "the rollback of the first step was never sent")
	}
	require.Equal(t, int32(0), *deployment(t, ns, "api").Spec.Replicas, "the second step was rolled back first")
	p.kill(t, what)
	if what != worker {
		// The write goes on, and meets the part that is down.
		hold.Release()
	}
	time.Sleep(down[what])
	p.restart(t, what)
	hold.Release()

	rr = harness.Eventually(t, rr, 3*time.Minute, func(r *v1alpha1.RemediationRequest) bool { return r.Status.Phase.Terminal() })
	require.Equal(t, v1alpha1.PhaseFailed, rr.Status.Phase)
	require.Equal(t, workflows.ReasonRolledBack, rr.Status.Reason, rr.Status.Message)
	assert.Contains(t, rr.Status.Message, "rolled back, newest first: api, web")
	for _, s := range rr.Status.Steps[:2] {
		assert.Equal(t, v1alpha1.StepRolledBack, s.Rollback, s.Name)
	}
	web, api := deployment(t, ns, "web"), deployment(t, ns, "api")
	assert.Equal(t, int32(0), *web.Spec.Replicas)
	assert.Equal(t, int32(0), *api.Spec.Replicas)
	assert.Equal(t, gen+2, web.Generation, "one scale and one rollback")
	assert.Equal(t, apiGen+2, api.Generation, "one scale and one rollback")
	var steps v1alpha1.KubernetesExecutionList
	require.NoError(t, harness.Kube().List(context.Background(), &steps, ctrlclient.InNamespace(ns)))
	assert.Len(t, steps.Items, 3, "one execution per step")
	return fmt.Sprintf("killed with the first step's rollback write held; web generation +%d, api +%d; %s (%s)",
		web.Generation-gen, api.Generation-apiGen, rr.Status.Phase, rr.Status.Reason)
}
