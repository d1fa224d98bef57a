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
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	ctrlclient "sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/remedy-dev/remedy/api/v1alpha1"
	"github.com/remedy-dev/remedy/internal/devenv"
	"github.com/remedy-dev/remedy/test/harness"
	"github.com/remedy-dev/remedy/workflows"
)

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
		time.Sleep(down[what]) // the fault itself: the part stays down; asserts nothing
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
	time.Sleep(down[what]) // the fault itself: the part stays down; asserts nothing
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
		assert.Equal(t, v1alpha1.ReasonExecutionFailed, k.Status.Reason)
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
