package alerts

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/remedy-dev/remedy/api/v1alpha1"
	"github.com/remedy-dev/remedy/internal/alertmanager"
	"github.com/remedy-dev/remedy/test/harness"
	"github.com/remedy-dev/remedy/workflows"
)

// workloadRule restarts the workload that controls the alert's Pod.
func workloadRule(ns, name, alertname string) *v1alpha1.RemediationRule {
	r := restartRule(ns, name, alertname)
	r.Spec.Template.Steps[0].Execution.Target.Name = "{{ .Workload.Name }}"
	return r
}

// crashingPod makes Deployment web's ReplicaSet and one Pod of it, as the
// controller would, and returns the Pod's name.
func crashingPod(t *testing.T, ns string) string {
	t.Helper()
	dep := harness.Deployment(t, ns, "web", 0)
	rs := &appsv1.ReplicaSet{ObjectMeta: metav1.ObjectMeta{Name: "web-7d4b9", Namespace: ns, Labels: dep.Spec.Template.Labels},
		Spec: appsv1.ReplicaSetSpec{Replicas: ptr.To[int32](1), Selector: dep.Spec.Selector, Template: dep.Spec.Template}}
	ownedBy(rs, dep, "Deployment")
	require.NoError(t, harness.Kube().Create(context.Background(), rs))
	pods(t, rs, "ReplicaSet", "web", "web-7d4b9-x2x")
	return "web-7d4b9-x2x"
}

// A Pod alert carries no deployment label: the rule names the Deployment
// by .Workload, which the worker resolves from the alert's pod label.
func TestPodAlertNamesItsWorkload(t *testing.T) {
	ns := tenant(t)
	pod := crashingPod(t, ns)
	rule := createRule(t, workloadRule(ns, "crashloop", "KubePodCrashLooping"))
	l := labels(ns, "KubePodCrashLooping", "pod", pod, "container", "web")
	fire(t, l)
	var rr v1alpha1.RemediationRequest
	require.Eventually(t, func() bool {
		got := requestsOf(t, ns, rule.Name)
		if len(got) == 1 {
			rr = got[0]
		}
		return len(got) == 1
	}, 60*time.Second, 100*time.Millisecond)
	assert.Equal(t, v1alpha1.ObjectRef{APIVersion: "apps/v1", Kind: "Deployment", Namespace: ns, Name: "web"}, rr.Spec.Steps[0].Execution.Target)
	got := ruleStatus(t, rule, 60*time.Second, func(r *v1alpha1.RemediationRule) bool {
		rec := record(r, alertmanager.Fingerprint(l))
		return rec != nil && rec.Target != ""
	})
	assert.Equal(t, "Deployment/web", record(got, alertmanager.Fingerprint(l)).Target)
	resolve(t, l)
	harness.WaitClosed(t, v1alpha1.AlertWorkflowID(ns, rule.Name, alertmanager.Fingerprint(l)), 60*time.Second)
}

// An alert whose Pod has no workload is refused with which Pod and what is
// missing, never run against an empty name.
func TestPodAlertWithoutAWorkloadIsRefusedWithTheReason(t *testing.T) {
	ns := tenant(t)
	bare := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "bare", Namespace: ns}, Spec: corev1.PodSpec{Containers: []corev1.Container{harness.DemoContainer("bare")}}}
	require.NoError(t, harness.Kube().Create(context.Background(), bare))
	rule := createRule(t, workloadRule(ns, "crashloop", "KubePodCrashLooping"))
	for _, tc := range []struct {
		name   string
		labels map[string]string
		want   string
	}{
		{"no pod label", labels(ns, "KubePodCrashLooping", "deployment", "web"), `the template uses .Workload.Name, but the alert has no "pod" label`},
		{"a Pod that is gone", labels(ns, "KubePodCrashLooping", "pod", "ghost"), "but the alert's Pod " + ns + "/ghost or its ReplicaSet no longer exists"},
		{"a bare Pod", labels(ns, "KubePodCrashLooping", "pod", "bare"), "but the alert's Pod " + ns + "/bare has no controlling workload"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fire(t, tc.labels)
			id := v1alpha1.AlertWorkflowID(ns, rule.Name, alertmanager.Fingerprint(tc.labels))
			var res workflows.AlertResult
			require.Eventually(t, func() bool {
				return harness.Temporal().GetWorkflow(context.Background(), id, "").Get(context.Background(), &res) == nil
			}, 60*time.Second, 200*time.Millisecond)
			assert.Equal(t, v1alpha1.AlertRefused, res.Phase)
			assert.Equal(t, v1alpha1.ReasonInvalidParameters, res.Reason)
			assert.Contains(t, res.Message, tc.want)
			assert.Contains(t, res.Message, "render RemediationRule crashloop: steps[0].execution.target.name: the template uses", "the refusal names the field")
		})
	}
	assert.Empty(t, requestsOf(t, ns, rule.Name), "nothing ran")
}

// The silence gate renders the rule's steps to re-check the author's grant
// on each target: it resolves .Workload the same way, so a Pod alert's run
// holds its silence.
func TestPodAlertRunHoldsItsSilence(t *testing.T) {
	ns := tenant(t)
	pod := crashingPod(t, ns)
	r := workloadRule(ns, "crashloop", "KubePodCrashLooping")
	// The step waits for a person, so the run is still there to look at.
	r.Spec.Template.Steps[0].Execution.Approval = &v1alpha1.ApprovalSpec{Required: true}
	r.Spec.Silence = &v1alpha1.SilenceSpec{Enabled: true, Duration: v1alpha1.DurationOf(time.Minute)}
	rule := createRule(t, r)
	l := labels(ns, "KubePodCrashLooping", "pod", pod, "container", "web")
	fp := alertmanager.Fingerprint(l)
	fire(t, l)
	running := ruleStatus(t, rule, 60*time.Second, func(r *v1alpha1.RemediationRule) bool {
		rec := record(r, fp)
		return rec != nil && rec.Phase == v1alpha1.AlertRunning && rec.Silence != ""
	})
	assert.Equal(t, "active", silence(t, record(running, fp).Silence).Status.State)
	resolve(t, l)
	harness.WaitClosed(t, v1alpha1.AlertWorkflowID(ns, rule.Name, fp), 60*time.Second)
}
