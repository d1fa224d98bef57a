package operator

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/remedy-dev/remedy/api/v1alpha1"
)

func TestPlanLateRollback(t *testing.T) {
	now := time.Date(2026, 11, 21, 10, 0, 0, 0, time.UTC)
	at := func(s int) metav1.MicroTime { return metav1.NewMicroTime(now.Add(time.Duration(s) * time.Second)) }
	windowClosed := []v1alpha1.PhaseTransition{
		{Phase: v1alpha1.PhaseExecuting, Reason: "Executing", Time: at(-40)},
		{Phase: v1alpha1.PhaseRollbackReady, Reason: "RollbackAvailable", Time: at(-39)},
		{Phase: v1alpha1.PhaseCompleted, Reason: "Succeeded", Time: at(-9)},
	}
	rolledBack := append(windowClosed[:2:2],
		v1alpha1.PhaseTransition{Phase: v1alpha1.PhaseExecuting, Reason: "RollingBack", Time: at(-20)},
		v1alpha1.PhaseTransition{Phase: v1alpha1.PhaseCompleted, Reason: "RolledBack", Time: at(-19)})
	noWindow := []v1alpha1.PhaseTransition{{Phase: v1alpha1.PhaseFailed, Reason: "Forbidden", Time: at(-5)}}
	kexec := func(annotated bool, trs []v1alpha1.PhaseTransition, conds ...metav1.Condition) *v1alpha1.KubernetesExecution {
		k := &v1alpha1.KubernetesExecution{ObjectMeta: metav1.ObjectMeta{Generation: 1}, Status: v1alpha1.KubernetesExecutionStatus{
			WorkflowID: "id", PhaseTransitions: trs, Conditions: conds}}
		last := trs[len(trs)-1]
		k.Status.Phase, k.Status.Reason = last.Phase, last.Reason
		if annotated {
			k.Annotations = map[string]string{RollbackAnnotation: "errors up"}
		}
		return k
	}
	const late = `rollback requested after the window closed at 2026-11-21T09:59:51Z; the run has ended Completed (Succeeded), so nothing was rolled back (annotation remedy.dev/rollback="errors up")`
	for _, tc := range []struct {
		name  string
		kexec *v1alpha1.KubernetesExecution
		want  string // "" : nothing planned
	}{
		{name: "annotation after the window", kexec: kexec(true, windowClosed), want: late},
		{name: "said once", kexec: kexec(true, windowClosed, metav1.Condition{Type: ConditionRollbackRequest, Message: late})},
		{name: "no annotation", kexec: kexec(false, windowClosed)},
		{name: "the annotation that rolled it back", kexec: kexec(true, rolledBack)},
		{name: "never offered a rollback", kexec: kexec(true, noWindow),
			want: `rollback requested, but this execution never offered one: it ended Failed (Forbidden), so nothing was rolled back (annotation remedy.dev/rollback="errors up")`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := planExecution(tc.kexec, "id", nil, runLook{}, false, now)
			if tc.want == "" {
				assert.Nil(t, p.status)
				assert.Empty(t, p.events)
				return
			}
			require.NotNil(t, p.status)
			c := meta.FindStatusCondition(p.status.Conditions, ConditionRollbackRequest)
			require.NotNil(t, c)
			assert.Equal(t, metav1.ConditionFalse, c.Status)
			assert.Equal(t, reasonRollbackTooLate, c.Reason)
			assert.Equal(t, tc.want, c.Message)
			assert.Equal(t, []event{{corev1.EventTypeWarning, reasonRollbackTooLate, tc.want}}, p.events)
			assert.Nil(t, p.rollback, "a closed workflow cannot be signalled")
		})
	}
}
