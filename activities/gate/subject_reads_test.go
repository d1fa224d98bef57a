package gate

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/workflow"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrlclient "sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/remedy-dev/remedy/activities/internal/activitytest"
	"github.com/remedy-dev/remedy/api/v1alpha1"
)

// bindReadAs runs b.bindRead(r) as an activity of a workflow with ID id
// (its run ID is testRunID) and returns its error.
func bindReadAs(t *testing.T, b *RunReads, id string, r ReadFor) error {
	t.Helper()
	var suite testsuite.WorkflowTestSuite
	env := suite.NewTestWorkflowEnvironment()
	env.SetStartWorkflowOptions(client.StartWorkflowOptions{ID: id})
	read := func(ctx context.Context) error { return b.bindRead(ctx, r) }
	env.RegisterActivity(read)
	env.ExecuteWorkflow(func(ctx workflow.Context) error {
		ctx = workflow.WithActivityOptions(ctx, workflow.ActivityOptions{StartToCloseTimeout: time.Minute,
			RetryPolicy: &temporal.RetryPolicy{MaximumAttempts: 1}})
		return workflow.ExecuteActivity(ctx, read).Get(ctx, nil)
	})
	require.True(t, env.IsWorkflowCompleted())
	return env.GetWorkflowError()
}

// TestReadsBoundToTheSubjectsRun: a read made for a person passes only in
// the run its subject records, for that subject's action, target and
// requester; the subject is the one the caller's workflow ID names.
func TestReadsBoundToTheSubjectsRun(t *testing.T) {
	const kexecID, rrID = "kexec/shop/x/u1", "rr/shop/fix/rr-uid"
	alice := &v1alpha1.Requester{Username: "alice"}
	web := v1alpha1.ObjectRef{APIVersion: "apps/v1", Kind: "Deployment", Namespace: "shop", Name: "web"}
	api := web
	api.Name = "api"
	scale := ReadFor{What: "inspect", Action: "scale", Target: web, Requester: alice}
	k := func(runID string, phase v1alpha1.Phase) *v1alpha1.KubernetesExecution {
		return &v1alpha1.KubernetesExecution{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "x", UID: "u1"},
			Spec:   v1alpha1.KubernetesExecutionSpec{Action: "scale", Target: web, Requester: alice},
			Status: v1alpha1.KubernetesExecutionStatus{WorkflowID: kexecID, RunID: runID, Phase: phase}}
	}
	rr := &v1alpha1.RemediationRequest{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "fix", UID: "rr-uid"},
		Spec: v1alpha1.RemediationRequestSpec{Requester: alice, Steps: []v1alpha1.RemediationStep{
			{Name: "a", Execution: v1alpha1.KubernetesExecutionSpec{Action: "restart", Target: api}},
			{Name: "b", Execution: v1alpha1.KubernetesExecutionSpec{Action: "scale", Target: web}}}},
		Status: v1alpha1.RemediationRequestStatus{Phase: v1alpha1.PhaseValidating, WorkflowID: rrID, RunID: activitytest.TestRunID}}
	other := func(f func(*ReadFor)) ReadFor { r := scale; f(&r); return r }
	for _, tc := range []struct {
		name string
		id   string
		obj  ctrlclient.Object
		read ReadFor
		pass bool
	}{
		{"the execution's recorded run", kexecID, k(activitytest.TestRunID, v1alpha1.PhaseValidating), scale, true},
		{"a condition of the recorded run", kexecID, k(activitytest.TestRunID, v1alpha1.PhaseVerifying), other(func(r *ReadFor) { r.Action = "" }), true},
		{"another run under the execution's ID", kexecID, k("the-closed-run", v1alpha1.PhaseValidating), scale, false},
		{"a finished execution", kexecID, k(activitytest.TestRunID, v1alpha1.PhaseCompleted), scale, false},
		{"another target", kexecID, k(activitytest.TestRunID, v1alpha1.PhaseValidating), other(func(r *ReadFor) { r.Target = api }), false},
		{"another action", kexecID, k(activitytest.TestRunID, v1alpha1.PhaseValidating), other(func(r *ReadFor) { r.Action = "restart" }), false},
		{"another requester", kexecID, k(activitytest.TestRunID, v1alpha1.PhaseValidating), other(func(r *ReadFor) { r.Requester = &v1alpha1.Requester{Username: "mallory"} }), false},
		{"no requester", kexecID, k(activitytest.TestRunID, v1alpha1.PhaseValidating), other(func(r *ReadFor) { r.Requester = nil }), false},
		{"a workflow of no Remedy object", "rogue/shop", k(activitytest.TestRunID, v1alpha1.PhaseValidating), scale, false},
		{"an execution that does not exist", "kexec/shop/y/u2", k(activitytest.TestRunID, v1alpha1.PhaseValidating), scale, false},
		{"a step of the request's run", rrID, rr, scale, true},
		{"no step of the request", rrID, rr, other(func(r *ReadFor) { r.Action = "restart" }), false},
		{"an alert run, with no way to verify it", "alert/shop/rule/f00", rr, scale, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, _ := activitytest.CountingClient(t, tc.obj)
			err := bindReadAs(t, &RunReads{Subjects: &Subjects{Client: c}}, tc.id, tc.read)
			if tc.pass {
				require.NoError(t, err)
				return
			}
			var app *temporal.ApplicationError
			require.ErrorAs(t, err, &app)
			assert.Equal(t, v1alpha1.ReasonSubjectMismatch, app.Type())
			assert.True(t, app.NonRetryable(), "a refused read is refused for good")
		})
	}
}

// TestSeenAnswersOnlyAPass: a binding the worker saw passing is answered
// from its copy without a read; a copy that shows anything else (another
// run, a finished object) is read again live, and the live object decides.
func TestSeenAnswersOnlyAPass(t *testing.T) {
	const id = "kexec/shop/x/u1"
	alice := &v1alpha1.Requester{Username: "alice"}
	web := v1alpha1.ObjectRef{APIVersion: "apps/v1", Kind: "Deployment", Namespace: "shop", Name: "web"}
	k := &v1alpha1.KubernetesExecution{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "x", UID: "u1", ResourceVersion: "5"},
		Spec:   v1alpha1.KubernetesExecutionSpec{Action: "scale", Target: web, Requester: alice},
		Status: v1alpha1.KubernetesExecutionStatus{WorkflowID: id, RunID: activitytest.TestRunID, Phase: v1alpha1.PhaseValidating}}
	read := ReadFor{What: "inspect", Action: "scale", Target: web, Requester: alice}
	for _, tc := range []struct {
		name      string
		kept      func(*v1alpha1.KubernetesExecution)
		live      func(*v1alpha1.KubernetesExecution)
		gets      int32
		refused   bool
		keptAfter v1alpha1.Phase
	}{
		{"a kept pass needs no read", func(*v1alpha1.KubernetesExecution) {}, func(*v1alpha1.KubernetesExecution) {}, 0, false, v1alpha1.PhaseValidating},
		{"a kept copy of another run is read again, and the live run passes",
			func(k *v1alpha1.KubernetesExecution) { k.Status.RunID = "other" }, func(*v1alpha1.KubernetesExecution) {}, 1, false, v1alpha1.PhaseValidating},
		{"a kept copy that passes but is finished live: the copy passes (the gate reads live)",
			func(*v1alpha1.KubernetesExecution) {}, func(k *v1alpha1.KubernetesExecution) { k.Status.Phase = v1alpha1.PhaseCompleted }, 0, false, v1alpha1.PhaseValidating},
		{"a kept finished copy is read again, and the live one refuses",
			func(k *v1alpha1.KubernetesExecution) { k.Status.Phase = v1alpha1.PhaseCompleted }, func(k *v1alpha1.KubernetesExecution) { k.Status.Phase = v1alpha1.PhaseCompleted },
			1, true, v1alpha1.PhaseCompleted},
	} {
		t.Run(tc.name, func(t *testing.T) {
			live, kept := k.DeepCopy(), k.DeepCopy()
			tc.live(live)
			tc.kept(kept)
			c, gets := activitytest.CountingClient(t, live)
			seen := NewSeen(8)
			seen.Put(kept)
			err := bindReadAs(t, &RunReads{Subjects: &Subjects{Client: c, Seen: seen}}, id, read)
			assert.Equal(t, tc.gets, gets.Load(), "live reads")
			if tc.refused {
				require.Error(t, err)
			} else {
				require.NoError(t, err)
			}
			var now v1alpha1.KubernetesExecution
			require.True(t, seen.Get("u1", &now))
			assert.Equal(t, tc.keptAfter, now.Status.Phase)
		})
	}
}

// TestSeenKeepsTheNewest: a slow read never replaces what a later write
// returned, and the oldest subject leaves first.
func TestSeenKeepsTheNewest(t *testing.T) {
	seen := NewSeen(2)
	obj := func(uid, rv string, phase v1alpha1.Phase) *v1alpha1.KubernetesExecution {
		return &v1alpha1.KubernetesExecution{ObjectMeta: metav1.ObjectMeta{UID: types.UID("u" + uid), ResourceVersion: rv}, Status: v1alpha1.KubernetesExecutionStatus{Phase: phase}}
	}
	seen.Put(obj("1", "10", v1alpha1.PhaseExecuting))
	seen.Put(obj("1", "9", v1alpha1.PhaseValidating))
	var k v1alpha1.KubernetesExecution
	require.True(t, seen.Get("u1", &k))
	assert.Equal(t, v1alpha1.PhaseExecuting, k.Status.Phase, "the older read did not replace the newer write")
	k.Status.Phase = v1alpha1.PhaseFailed
	var again v1alpha1.KubernetesExecution
	require.True(t, seen.Get("u1", &again))
	assert.Equal(t, v1alpha1.PhaseExecuting, again.Status.Phase, "get hands out a copy")

	seen.Put(obj("2", "1", v1alpha1.PhasePending))
	seen.Put(obj("3", "1", v1alpha1.PhasePending))
	assert.False(t, seen.Get("u1", &k), "the least recently used left")
	assert.True(t, seen.Get("u3", &k))
	assert.False(t, seen.Get("u3", &v1alpha1.RemediationRequest{}), "a copy goes only into its own type")
	seen.Forget("u3")
	assert.False(t, seen.Get("u3", &k))
	var none *Seen
	none.Put(obj("4", "1", v1alpha1.PhasePending))
	assert.False(t, none.Get("u4", &k), "a nil Seen keeps nothing")
}
