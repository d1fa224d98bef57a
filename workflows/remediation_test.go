package workflows

import (
	"context"
	"fmt"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/mock"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/testsuite"
	"k8s.io/utils/ptr"

	"github.com/remedy-dev/remedy/activities/execution"
	"github.com/remedy-dev/remedy/activities/gate"
	"github.com/remedy-dev/remedy/activities/status"
	"github.com/remedy-dev/remedy/api/v1alpha1"
	"github.com/remedy-dev/remedy/internal/actions"
)

// saga fakes the world of a RemediationRequest's steps: Deployments with
// replicas, and a log of every write in the order the workflows made it.
type saga struct {
	mu       sync.Mutex
	replicas map[string]int32
	writes   []string
	// failWrite fails the write whose log line it names, with err.
	failWrite map[string]error
	// missing targets are not found.
	missing map[string]bool
	pushes  []v1alpha1.RemediationRequestStatus
}

func newSaga() *saga {
	return &saga{replicas: map[string]int32{}, failWrite: map[string]error{}, missing: map[string]bool{}}
}

func (s *saga) plan(req actions.Request) (actions.Plan, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	name := req.Target.Name
	if s.missing[name] {
		return actions.Plan{}, permanentErr(v1alpha1.ReasonNotFound, `deployments.apps "`+name+`" not found`)
	}
	if req.Action == "restart" {
		return actions.Plan{Change: v1alpha1.ResourceChange{Kind: "Deployment", Name: name, Action: "restarted", Before: "restartedAt: never", After: "restartedAt: " + req.Token},
			Rollback: v1alpha1.RollbackInformation{Reason: "a rolling restart cannot be undone"}}, nil
	}
	cur, want := s.replicas[name], *req.Params.Replicas
	return actions.Plan{
		Change: v1alpha1.ResourceChange{Kind: "Deployment", Name: name, Action: "scaled",
			Before: fmt.Sprintf("replicas: %d", cur), After: fmt.Sprintf("replicas: %d", want)},
		Rollback: v1alpha1.RollbackInformation{Available: true, RollbackAction: "scale", RollbackParameters: &v1alpha1.ActionParameters{Replicas: ptr.To(cur)}},
		NoOp:     cur == want,
	}, nil
}

func (s *saga) write(_ context.Context, w gate.Write) (execution.ExecuteResult, error) {
	p, err := s.plan(w.Request)
	if err != nil {
		return execution.ExecuteResult{}, err
	}
	line := w.Request.Action + " " + w.Request.Target.Name
	if w.Request.Action == "scale" {
		line += fmt.Sprintf(" %d", *w.Request.Params.Replicas)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.failWrite[line]; err != nil {
		s.writes = append(s.writes, line+" (failed)")
		return execution.ExecuteResult{}, err
	}
	s.writes = append(s.writes, line)
	if w.Request.Action == "scale" {
		s.replicas[w.Request.Target.Name] = *w.Request.Params.Replicas
	}
	return execution.ExecuteResult{Plan: p}, nil
}

func (s *saga) env(t *testing.T) *testsuite.TestWorkflowEnvironment {
	return s.on(newEnv(t))
}

// on registers the saga's world in env.
func (s *saga) on(env *testsuite.TestWorkflowEnvironment) *testsuite.TestWorkflowEnvironment {
	env.RegisterWorkflow(RemediationWorkflow)
	env.RegisterActivity(&execution.Remediation{})
	allowAll(env)
	env.OnActivity(subjects.VerifyRemediation, mock.Anything, mock.Anything, mock.Anything).Return(nil).Maybe()
	env.OnActivity(validation.CheckSpec, mock.Anything, mock.Anything, mock.Anything).Return(nil).Maybe()
	env.OnActivity(executionActs.InspectTarget, mock.Anything, mock.Anything).Return(func(_ context.Context, req actions.Request) (actions.Plan, error) {
		return s.plan(req)
	}).Maybe()
	env.OnActivity(executionActs.ExecuteInline, mock.Anything, mock.Anything).Return(s.write).Maybe()
	env.OnActivity(remediation.CreateStepExecution, mock.Anything, mock.Anything).Return(func(_ context.Context, in execution.StepInput) (execution.StepRef, error) {
		return execution.StepRef{Name: in.Request + "-" + in.Step.Name, UID: "uid-" + in.Step.Name}, nil
	}).Maybe()
	env.OnActivity(statuses.PushRemediationStatus, mock.Anything, mock.Anything).Return(func(_ context.Context, in status.RemediationStatusPush) error {
		s.mu.Lock()
		defer s.mu.Unlock()
		s.pushes = append(s.pushes, in.Status)
		return nil
	}).Maybe()
	return env
}

func (s *saga) run(t *testing.T, policy v1alpha1.RollbackPolicy, steps ...v1alpha1.RemediationStep) v1alpha1.RemediationRequestStatus {
	t.Helper()
	env := s.env(t)
	env.ExecuteWorkflow(RemediationWorkflow, RemediationInput{Namespace: "shop", Name: "fix", UID: "rr1",
		Spec: v1alpha1.RemediationRequestSpec{Steps: steps, RollbackPolicy: policy}})
	require.True(t, env.IsWorkflowCompleted())
	var res RemediationResult
	err := env.GetWorkflowResult(&res)
	require.NoError(t, FinalResult(err, &res))
	assertClosedAs(t, res.Status.Phase, res.Status.Reason, err)
	return res.Status
}

func scaleStep(name, target string, replicas int32) v1alpha1.RemediationStep {
	return v1alpha1.RemediationStep{Name: name, Execution: v1alpha1.KubernetesExecutionSpec{Action: "scale",
		Target:     v1alpha1.ObjectRef{APIVersion: "apps/v1", Kind: "Deployment", Namespace: "shop", Name: target},
		Parameters: &v1alpha1.ActionParameters{Replicas: ptr.To(replicas)}}}
}

func restartStep(name, target string) v1alpha1.RemediationStep {
	return v1alpha1.RemediationStep{Name: name, Execution: v1alpha1.KubernetesExecutionSpec{Action: "restart",
		Target: v1alpha1.ObjectRef{APIVersion: "apps/v1", Kind: "Deployment", Namespace: "shop", Name: target}}}
}

func rollbacks(st v1alpha1.RemediationRequestStatus) []v1alpha1.StepRollback {
	var out []v1alpha1.StepRollback
	for _, s := range st.Steps {
		out = append(out, s.Rollback)
	}
	return out
}

// Long because it is a table: one row per saga outcome (steps, failures, rollback policy).
func TestRemediationSaga(t *testing.T) {
	for _, tc := range []struct {
		name   string
		policy v1alpha1.RollbackPolicy
		steps  []v1alpha1.RemediationStep
		setup  func(s *saga)
		// writes in the order they were made
		writes        []string
		phase         v1alpha1.Phase
		reason        string
		message       []string
		rollback      []v1alpha1.StepRollback
		finalReplicas map[string]int32
	}{
		{
			name:  "the third step fails: steps 2 and 1 roll back in reverse order",
			steps: []v1alpha1.RemediationStep{scaleStep("one", "a", 2), scaleStep("two", "b", 3), scaleStep("three", "c", 4)},
			setup: func(s *saga) {
				s.failWrite["scale c 4"] = permanentErr(v1alpha1.ReasonExecutionFailed, "admission webhook denied the request")
			},
			writes: []string{"scale a 2", "scale b 3", "scale c 4 (failed)", "scale b 1", "scale a 1"},
			phase:  v1alpha1.PhaseFailed, reason: v1alpha1.ReasonRolledBack,
			message:       []string{"step three failed: ExecutionFailed: admission webhook denied the request", "rolled back, newest first: two, one"},
			rollback:      []v1alpha1.StepRollback{v1alpha1.StepRolledBack, v1alpha1.StepRolledBack, ""},
			finalReplicas: map[string]int32{"a": 1, "b": 1, "c": 1},
		},
		{
			name:  "a rollback that fails is reported, and the others still run",
			steps: []v1alpha1.RemediationStep{scaleStep("one", "a", 2), scaleStep("two", "b", 3), scaleStep("three", "c", 4)},
			setup: func(s *saga) {
				s.failWrite["scale c 4"] = permanentErr(v1alpha1.ReasonExecutionFailed, "denied")
				s.failWrite["scale b 1"] = permanentErr(v1alpha1.ReasonForbidden, "remedy-action-scale may not patch deployments")
			},
			writes: []string{"scale a 2", "scale b 3", "scale c 4 (failed)", "scale b 1 (failed)", "scale a 1"},
			phase:  v1alpha1.PhaseFailed, reason: v1alpha1.ReasonRollbackFailed,
			message:       []string{"rolled back, newest first: one", "could not roll back: two (remedy-action-scale may not patch deployments)"},
			rollback:      []v1alpha1.StepRollback{v1alpha1.StepRolledBack, v1alpha1.StepRollbackFailed, ""},
			finalReplicas: map[string]int32{"a": 1, "b": 3, "c": 1},
		},
		{
			name:  "every step is checked before the first write",
			steps: []v1alpha1.RemediationStep{scaleStep("one", "a", 2), scaleStep("ghost", "nothere", 3)},
			setup: func(s *saga) { s.missing["nothere"] = true },
			phase: v1alpha1.PhaseFailed, reason: v1alpha1.ReasonNotFound,
			message:       []string{`step ghost: deployments.apps "nothere" not found`, "nothing was changed"},
			rollback:      []v1alpha1.StepRollback{"", ""},
			finalReplicas: map[string]int32{"a": 1},
		},
		{
			name:  "the first step fails: nothing to roll back",
			steps: []v1alpha1.RemediationStep{scaleStep("one", "a", 2), scaleStep("two", "b", 3)},
			setup: func(s *saga) {
				s.failWrite["scale a 2"] = permanentErr(v1alpha1.ReasonExecutionFailed, "denied")
			},
			writes: []string{"scale a 2 (failed)"},
			phase:  v1alpha1.PhaseFailed, reason: v1alpha1.ReasonStepFailed,
			message:       []string{"step one failed: ExecutionFailed: denied; no completed step changed anything, so nothing was rolled back"},
			rollback:      []v1alpha1.StepRollback{"", ""},
			finalReplicas: map[string]int32{"a": 1, "b": 1},
		},
		{
			name:   "rollbackPolicy Never keeps the completed steps",
			policy: v1alpha1.RollbackNever,
			steps:  []v1alpha1.RemediationStep{scaleStep("one", "a", 2), scaleStep("two", "b", 3)},
			setup: func(s *saga) {
				s.failWrite["scale b 3"] = permanentErr(v1alpha1.ReasonExecutionFailed, "denied")
			},
			writes: []string{"scale a 2", "scale b 3 (failed)"},
			phase:  v1alpha1.PhaseFailed, reason: v1alpha1.ReasonStepFailed,
			message:       []string{"rollbackPolicy Never: nothing rolled back; kept: one"},
			rollback:      []v1alpha1.StepRollback{v1alpha1.StepKept, ""},
			finalReplicas: map[string]int32{"a": 2, "b": 1},
		},
		{
			name:  "a restart has no inverse: the request says it was not undone",
			steps: []v1alpha1.RemediationStep{scaleStep("one", "a", 2), restartStep("bounce", "a"), scaleStep("three", "c", 4)},
			setup: func(s *saga) {
				s.failWrite["scale c 4"] = permanentErr(v1alpha1.ReasonExecutionFailed, "denied")
			},
			writes: []string{"scale a 2", "restart a", "scale c 4 (failed)", "scale a 1"},
			phase:  v1alpha1.PhaseFailed, reason: v1alpha1.ReasonRollbackIncomplete,
			message:       []string{"rolled back, newest first: one", "not undone, no inverse: bounce (a rolling restart cannot be undone)"},
			rollback:      []v1alpha1.StepRollback{v1alpha1.StepRolledBack, v1alpha1.StepNoRollback, ""},
			finalReplicas: map[string]int32{"a": 1},
		},
		{
			name:  "a step already in the desired state changes nothing and needs no undoing",
			steps: []v1alpha1.RemediationStep{scaleStep("same", "a", 1), scaleStep("two", "b", 3), scaleStep("three", "c", 4)},
			setup: func(s *saga) {
				s.failWrite["scale c 4"] = permanentErr(v1alpha1.ReasonExecutionFailed, "denied")
			},
			writes: []string{"scale b 3", "scale c 4 (failed)", "scale b 1"},
			phase:  v1alpha1.PhaseFailed, reason: v1alpha1.ReasonRolledBack,
			message:       []string{"rolled back, newest first: two", "nothing to undo: same"},
			rollback:      []v1alpha1.StepRollback{v1alpha1.StepNothingToUndo, v1alpha1.StepRolledBack, ""},
			finalReplicas: map[string]int32{"a": 1, "b": 1},
		},
		{
			name:  "every step a no-op: the request completes as NoChange",
			steps: []v1alpha1.RemediationStep{scaleStep("same", "a", 1), scaleStep("also", "b", 1)},
			phase: v1alpha1.PhaseCompleted, reason: v1alpha1.ReasonNoChange,
			message:       []string{"all 2 steps found their targets already in the desired state"},
			rollback:      []v1alpha1.StepRollback{"", ""},
			finalReplicas: map[string]int32{"a": 1, "b": 1},
		},
		{
			name:   "success finalizes every step",
			steps:  []v1alpha1.RemediationStep{scaleStep("one", "a", 2), restartStep("bounce", "a")},
			writes: []string{"scale a 2", "restart a"},
			phase:  v1alpha1.PhaseCompleted, reason: v1alpha1.ReasonSucceeded,
			message:       []string{"2 steps completed"},
			rollback:      []v1alpha1.StepRollback{"", ""},
			finalReplicas: map[string]int32{"a": 2},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := newSaga()
			for _, n := range []string{"a", "b", "c"} {
				s.replicas[n] = 1
			}
			if tc.setup != nil {
				tc.setup(s)
			}
			st := s.run(t, tc.policy, tc.steps...)
			assert.Equal(t, tc.phase, st.Phase, st.Message)
			assert.Equal(t, tc.reason, st.Reason, st.Message)
			for _, m := range tc.message {
				assert.Contains(t, st.Message, m)
			}
			assert.Equal(t, tc.writes, s.writes)
			assert.Equal(t, tc.rollback, rollbacks(st))
			for n, want := range tc.finalReplicas {
				assert.Equal(t, want, s.replicas[n], n)
			}
			require.NotEmpty(t, s.pushes)
			assert.Equal(t, st, s.pushes[len(s.pushes)-1], "the last write is the final status")
		})
	}
}
