package operator

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/remedy-dev/remedy/api/v1alpha1"
)

func TestPlanCleanup(t *testing.T) {
	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		name     string
		finished bool
		ago      time.Duration
		ttl      *int32
		def      time.Duration
		want     cleanupPlan
	}{
		{"running: kept, nothing to wait for", false, 0, ptr.To[int32](0), time.Hour, cleanupPlan{}},
		{"no ttl, no default: kept", true, 24 * time.Hour, nil, 0, cleanupPlan{}},
		{"no ttl: the default applies", true, 2 * time.Hour, nil, time.Hour, cleanupPlan{delete: true}},
		{"no ttl: the default not yet up", true, 20 * time.Minute, nil, time.Hour, cleanupPlan{requeueAfter: 40 * time.Minute}},
		{"ttl 0: at once", true, 0, ptr.To[int32](0), 0, cleanupPlan{delete: true}},
		{"ttl beats the default", true, 2 * time.Minute, ptr.To[int32](60), 24 * time.Hour, cleanupPlan{delete: true}},
		{"ttl longer than the default", true, 2 * time.Hour, ptr.To[int32](86400), time.Hour, cleanupPlan{requeueAfter: 22 * time.Hour}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.want, planCleanup(now.Add(-tc.ago), tc.finished, tc.ttl, tc.def, now))
		})
	}
}

// Only what finished by itself is cleaned up: a run in its rollback window
// is not, nor a RemediationRequest's step, nor an undecided request.
func TestCleanupFinished(t *testing.T) {
	at := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	ready := []metav1.Condition{{Type: v1alpha1.ConditionReady, Status: metav1.ConditionTrue, Reason: "Succeeded", LastTransitionTime: metav1.NewTime(at)}}
	kexec := func(phase v1alpha1.Phase, step bool) *v1alpha1.KubernetesExecution {
		k := &v1alpha1.KubernetesExecution{Status: v1alpha1.KubernetesExecutionStatus{Phase: phase, Conditions: ready}}
		if step {
			k.Spec.RemediationRequestRef = &v1alpha1.LocalRef{Name: "fix"}
			k.OwnerReferences = []metav1.OwnerReference{{APIVersion: v1alpha1.GroupVersion.String(), Kind: "RemediationRequest", Name: "fix", Controller: ptr.To(true)}}
		}
		return k
	}
	exec := cleanupKinds[0]
	got, ok := exec.finished(kexec(v1alpha1.PhaseCompleted, false))
	assert.True(t, ok)
	assert.Equal(t, at, got)
	_, ok = exec.finished(kexec(v1alpha1.PhaseRollbackReady, false))
	assert.False(t, ok, "in its rollback window")
	_, ok = exec.finished(kexec(v1alpha1.PhaseCompleted, true))
	assert.False(t, ok, "a step goes with its request")

	rr := &v1alpha1.RemediationRequest{Status: v1alpha1.RemediationRequestStatus{Phase: v1alpha1.PhaseFailed, Conditions: ready}}
	_, ok = cleanupKinds[1].finished(rr)
	assert.True(t, ok)

	rar := &v1alpha1.RemediationApprovalRequest{Spec: v1alpha1.RemediationApprovalRequestSpec{WorkflowID: "kexec/shop/scale-web/u1"}}
	_, ok = cleanupKinds[2].finished(rar)
	assert.False(t, ok, "undecided")
	rar.Status.Decision, rar.Status.DecidedAt = v1alpha1.DecisionApproved, &metav1.Time{Time: at}
	got, ok = cleanupKinds[2].finished(rar)
	assert.True(t, ok)
	assert.Equal(t, at, got)
	assert.Equal(t, "kexec/shop/scale-web/u1", cleanupKinds[2].workflowID(rar), "its workflow must have closed first")
}
