package node

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	ctrlclient "sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/remedy-dev/remedy/api/v1alpha1"
	"github.com/remedy-dev/remedy/operator"
	"github.com/remedy-dev/remedy/test/harness"
)

// heldJobRun starts a job-executor scale of Deployment ns/web to 3, made by
// oncall-rita who holds `execute` on scale in ns, and returns once its Job's
// Pod waits, unscheduled on the cordoned node: the write gate passed the
// Job's creation, and the Pod has not yet asked.
func heldJobRun(t *testing.T, ns string) (k *v1alpha1.KubernetesExecution, pod corev1.Pod, uncordon func()) {
	t.Helper()
	ctx := context.Background()
	harness.Deployment(t, ns, "web", 1)
	grantRita(t, ns)
	uncordon = cordon(t)
	k = &v1alpha1.KubernetesExecution{ObjectMeta: metav1.ObjectMeta{Name: "scale-by-job", Namespace: ns}, Spec: v1alpha1.KubernetesExecutionSpec{
		Action: "scale", Target: target(ns, "web"), Executor: v1alpha1.ExecutorJob, MaxRetries: ptr.To[int32](3),
		Parameters: &v1alpha1.ActionParameters{Replicas: ptr.To[int32](3)}, RollbackWindow: v1alpha1.DurationOf(0),
	}}
	require.NoError(t, asUser(t, "oncall-rita").Create(ctx, k))
	require.Eventually(t, func() bool { return len(harness.JobsOf(t, k)) == 1 }, runTimeout, 100*time.Millisecond, "the run creates its Job")
	pod = jobPods(t, harness.JobsOf(t, k)[0].Name, 1, corev1.PodPending)[0]
	require.Empty(t, pod.Spec.NodeName, "the Pod waits unscheduled")
	return k, pod, uncordon
}

// TestJobPodAsksTheGateImmediatelyBeforeItsWrite: the write gate passed
// when the Job was created; while its Pod waits to be scheduled, the
// requester's grant is revoked, or the namespace protected. The Pod starts,
// asks the exec gate immediately before its write, is refused, exits
// non-zero and writes nothing; the Job controller starts no other Pod, and
// the run fails with the gate's reason.
func TestJobPodAsksTheGateImmediatelyBeforeItsWrite(t *testing.T) {
	for _, tc := range []struct {
		name   string
		change func(t *testing.T, ns string)
		reason string
	}{
		{"grant revoked", func(t *testing.T, ns string) {
			require.NoError(t, harness.Kube().Delete(context.Background(), &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "job-oncall-rita", Namespace: ns}}))
		}, "Forbidden"},
		{"namespace protected", func(t *testing.T, ns string) {
			nsObj := &corev1.Namespace{}
			require.NoError(t, harness.Kube().Get(context.Background(), ctrlclient.ObjectKey{Name: ns}, nsObj))
			nsObj.Labels["remedy.dev/protected"] = "true"
			require.NoError(t, harness.Kube().Update(context.Background(), nsObj))
		}, "ProtectedNamespace"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ns := harness.Namespace(t)
			k, pod, uncordon := heldJobRun(t, ns)
			tc.change(t, ns)
			uncordon()

			k = harness.Eventually(t, k, runTimeout, func(k *v1alpha1.KubernetesExecution) bool { return k.Status.Phase.Terminal() })
			require.Equal(t, v1alpha1.PhaseFailed, k.Status.Phase, "%s: %s", k.Status.Reason, k.Status.Message)
			assert.Equal(t, tc.reason, k.Status.Reason, k.Status.Message)
			failed := jobPods(t, pod.Labels["job-name"], 1, corev1.PodFailed)
			require.Len(t, failed, 1)
			assert.Equal(t, pod.UID, failed[0].UID, "the one Pod, never retried")
			term := terminated(t, failed[0])
			assert.NotZero(t, term.ExitCode)
			assert.Contains(t, term.Message, "refused by the write gate", "the Pod's own account of the refusal")
			assert.Equal(t, int32(1), replicas(t, ns, "web"), "nothing was scaled")
		})
	}
}

// TestJobOfACanceledRunIsRemoved: while the Job's Pod waits to be
// scheduled, the execution is deleted (the operator cancels its run) or its
// run is canceled directly; the run deletes its Job, and with it the Pod,
// so nothing is left armed to write once the node takes Pods again.
func TestJobOfACanceledRunIsRemoved(t *testing.T) {
	for _, tc := range []struct {
		name   string
		cancel func(t *testing.T, k *v1alpha1.KubernetesExecution)
	}{
		{"execution deleted", func(t *testing.T, k *v1alpha1.KubernetesExecution) {
			require.NoError(t, harness.Kube().Delete(context.Background(), k))
		}},
		{"run canceled", func(t *testing.T, k *v1alpha1.KubernetesExecution) {
			k = harness.Eventually(t, k, runTimeout, func(k *v1alpha1.KubernetesExecution) bool { return k.Status.WorkflowID != "" })
			require.NoError(t, harness.Temporal().CancelWorkflow(context.Background(), k.Status.WorkflowID, ""))
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ns := harness.Namespace(t)
			k, pod, uncordon := heldJobRun(t, ns)
			job := harness.JobsOf(t, k)[0]
			tc.cancel(t, k)

			require.Eventually(t, func() bool {
				return apierrors.IsNotFound(harness.Kube().Get(context.Background(), ctrlclient.ObjectKeyFromObject(&job), &batchv1.Job{}))
			}, runTimeout, 100*time.Millisecond, "the canceled run deletes its Job")
			require.Eventually(t, func() bool {
				return apierrors.IsNotFound(harness.Kube().Get(context.Background(), ctrlclient.ObjectKeyFromObject(&pod), &corev1.Pod{}))
			}, runTimeout, 100*time.Millisecond, "and its Pod goes with it")
			uncordon()
			assert.Equal(t, int32(1), replicas(t, ns, "web"), "nothing was scaled")
		})
	}
}

func replicas(t *testing.T, ns, name string) int32 {
	t.Helper()
	var d appsv1.Deployment
	require.NoError(t, harness.Kube().Get(context.Background(), ctrlclient.ObjectKey{Namespace: ns, Name: name}, &d))
	return ptr.Deref(d.Spec.Replicas, 0)
}

// grantRita lets oncall-rita create executions in ns and run scale there.
func grantRita(t *testing.T, ns string) {
	t.Helper()
	ctx := context.Background()
	subject := []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: "oncall-rita"}}
	require.NoError(t, harness.Kube().Create(ctx, &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: "job-oncall-rita", Namespace: ns}, Rules: []rbacv1.PolicyRule{
		{APIGroups: []string{"remedy.dev"}, Resources: []string{"kubernetesexecutions"}, Verbs: []string{"create", "get"}},
		{APIGroups: []string{"remedy.dev"}, Resources: []string{"actions"}, ResourceNames: []string{"scale"}, Verbs: []string{"execute"}},
	}}))
	require.NoError(t, harness.Kube().Create(ctx, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "job-oncall-rita", Namespace: ns},
		RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "job-oncall-rita"}, Subjects: subject}))
}

func asUser(t *testing.T, user string) ctrlclient.Client {
	t.Helper()
	cfg := rest.CopyConfig(harness.Config())
	cfg.Impersonate = rest.ImpersonationConfig{UserName: user, Groups: []string{"system:authenticated"}}
	c, err := ctrlclient.New(cfg, ctrlclient.Options{Scheme: operator.Scheme()})
	require.NoError(t, err)
	return c
}
