package operator

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	ctrlclient "sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/remedy-dev/remedy/api/v1alpha1"
)

func TestOpenRunsCap(t *testing.T) {
	ctx := context.Background()
	now := time.Date(2026, 11, 21, 10, 0, 0, 0, time.UTC)
	run := func(name string, phase v1alpha1.Phase, started bool) *v1alpha1.KubernetesExecution {
		k := &v1alpha1.KubernetesExecution{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: name}, Status: v1alpha1.KubernetesExecutionStatus{Phase: phase}}
		if started {
			k.Status.WorkflowID = "kexec/shop/" + name
		}
		return k
	}
	step := run("step", v1alpha1.PhaseExecuting, true)
	step.Spec.RemediationRequestRef = &v1alpha1.LocalRef{Name: "fix"}
	step.OwnerReferences = []metav1.OwnerReference{{APIVersion: v1alpha1.GroupVersion.String(), Kind: "RemediationRequest", Name: "fix", UID: "u", Controller: ptr.To(true)}}
	rr := &v1alpha1.RemediationRequest{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "fix"},
		Status: v1alpha1.RemediationRequestStatus{Phase: v1alpha1.PhaseExecuting, WorkflowID: "rr/shop/fix"}}
	other := run("elsewhere", v1alpha1.PhaseExecuting, true)
	other.Namespace = "payments"
	c := fake.NewClientBuilder().WithScheme(Scheme()).WithObjects(
		run("executing", v1alpha1.PhaseExecuting, true),
		run("waiting", v1alpha1.PhaseWaitingApproval, true),
		run("offering-rollback", v1alpha1.PhaseRollbackReady, true),
		run("done", v1alpha1.PhaseCompleted, true),
		run("failed", v1alpha1.PhaseFailed, true),
		run("held", v1alpha1.PhasePending, false),
		step, rr, other,
	).WithStatusSubresource(&v1alpha1.KubernetesExecution{}).Build()

	// Open: executing, waiting and the request; not its step, nor what ended or offers a rollback.
	o := newOpenRuns(3, c)
	open, _, err := o.count(ctx, "shop")
	require.NoError(t, err)
	assert.Equal(t, 3, open)
	ok, err := o.admit(ctx, "shop", executionRun("held"), now)
	require.NoError(t, err)
	assert.False(t, ok, "three open runs hold a fourth back")
	ok, err = o.admit(ctx, "payments", executionRun("new"), now)
	require.NoError(t, err)
	assert.True(t, ok, "each namespace has its own cap")

	o = newOpenRuns(4, c)
	ok, err = o.admit(ctx, "shop", executionRun("held"), now)
	require.NoError(t, err)
	assert.True(t, ok)
	ok, err = o.admit(ctx, "shop", executionRun("held"), now)
	require.NoError(t, err)
	assert.True(t, ok, "a run admitted again (its start failed) keeps its slot")
	ok, err = o.admit(ctx, "shop", remediationRun("next"), now)
	require.NoError(t, err)
	assert.False(t, ok, "an admitted start counts before the cache shows it")

	// The cache shows the start: it counts from there, not twice.
	var held v1alpha1.KubernetesExecution
	require.NoError(t, c.Get(ctx, ctrlclient.ObjectKey{Namespace: "shop", Name: "held"}, &held))
	held.Status.WorkflowID, held.Status.Phase = "kexec/shop/held", v1alpha1.PhaseValidating
	require.NoError(t, c.Status().Update(ctx, &held))
	ok, err = o.admit(ctx, "shop", remediationRun("next"), now)
	require.NoError(t, err)
	assert.False(t, ok)
	assert.Empty(t, o.admitted["shop"][executionRun("held")], "the cache counts it now")

	// An admitted start the cache never shows (deleted before it started) stops counting.
	o = newOpenRuns(5, c)
	ok, err = o.admit(ctx, "shop", executionRun("gone"), now)
	require.NoError(t, err)
	require.True(t, ok)
	ok, err = o.admit(ctx, "shop", executionRun("late"), now.Add(time.Second))
	require.NoError(t, err)
	assert.False(t, ok)
	ok, err = o.admit(ctx, "shop", executionRun("late"), now.Add(admittedFor+time.Second))
	require.NoError(t, err)
	assert.True(t, ok)

	var none *openRuns
	ok, err = none.admit(ctx, "shop", executionRun("x"), now)
	require.NoError(t, err)
	assert.True(t, ok, "no cap (0) admits everything")
	assert.Nil(t, newOpenRuns(0, c))
}

func TestPlanHeld(t *testing.T) {
	now := time.Date(2026, 11, 21, 10, 0, 0, 0, time.UTC)
	kexec := &v1alpha1.KubernetesExecution{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "scale", Generation: 1}}
	p := planHeldExecution(kexec, 2, now)
	require.NotNil(t, p.status)
	assert.False(t, p.start)
	assert.True(t, p.limited)
	assert.Equal(t, openRunsRecheck, p.requeueAfter)
	assert.Equal(t, v1alpha1.PhasePending, p.status.Phase)
	assert.Equal(t, v1alpha1.ReasonOpenRunsLimited, p.status.Reason)
	want := "namespace shop has reached the operator's limit of 2 open runs (--max-open-runs-per-namespace): this run starts when one of them completes, fails or offers its rollback"
	assert.Equal(t, want, p.status.Message)
	assert.Empty(t, p.status.WorkflowID)
	require.Len(t, p.events, 1)
	assert.Equal(t, event{corev1.EventTypeWarning, v1alpha1.ReasonOpenRunsLimited, want}, p.events[0])
	require.Len(t, p.status.Conditions, 1)
	assert.Equal(t, v1alpha1.ReasonOpenRunsLimited, p.status.Conditions[0].Reason)

	// Held already: no write, no Event, no count; look again later.
	kexec.Status = *p.status
	again := planHeldExecution(kexec, 2, now.Add(openRunsRecheck))
	assert.Nil(t, again.status)
	assert.Empty(t, again.events)
	assert.False(t, again.limited)
	assert.Equal(t, openRunsRecheck, again.requeueAfter)

	// Admitted at last: it starts, and the reason of the wait is gone.
	start := planExecution(kexec, "kexec/shop/scale/u", nil, runLook{}, false, now.Add(time.Minute))
	assert.True(t, start.start)
	require.NotNil(t, start.status)
	assert.Empty(t, start.status.Reason)
	assert.Empty(t, start.status.Message)
	assert.Equal(t, string(v1alpha1.PhasePending), start.status.Conditions[0].Reason)

	rr := &v1alpha1.RemediationRequest{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "fix", Generation: 1}}
	rp := planHeldRemediation(rr, 2, now)
	require.NotNil(t, rp.status)
	assert.True(t, rp.limited)
	assert.Equal(t, v1alpha1.ReasonOpenRunsLimited, rp.status.Reason)
	rr.Status = *rp.status
	assert.Nil(t, planHeldRemediation(rr, 2, now).status)
	rstart := planRemediation(rr, "rr/shop/fix/u", nil, runLook{}, now)
	assert.True(t, rstart.start)
	assert.Empty(t, rstart.status.Reason)
}
