package workflows

import (
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/interceptor"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/remedy-dev/remedy/activities/status"
	"github.com/remedy-dev/remedy/api/v1alpha1"
	"github.com/remedy-dev/remedy/internal/metrics"
)

// A signal no handler reads ("approved" for "approve") is accepted by
// Temporal and would do nothing silently; the interceptor warns and counts it
// when it arrives, and leaves known signals alone.
func TestUnknownSignalIsLoggedAndCounted(t *testing.T) {
	s, logs := loggedSuite()
	unknown := metrics.WorkflowUnknownSignals.WithLabelValues("ExecutionWorkflow")
	before := testutil.ToFloat64(unknown)
	env, _, recorded := approvalEnvOf(t, s, allowed)
	env.SetWorkerOptions(worker.Options{Interceptors: []interceptor.WorkerInterceptor{&UnknownSignals{}}})
	env.RegisterDelayedCallback(func() { env.SignalWorkflow("approved", ApprovalSignal{Approver: "alice"}) }, time.Minute)
	env.RegisterDelayedCallback(func() { env.SignalWorkflow("roll-back", RollbackRequest{Requester: "alice"}) }, 2*time.Minute)
	env.RegisterDelayedCallback(func() {
		assert.Contains(t, logs.warnings(), "unknown signal: this workflow reads no signal of that name, so it does nothing signal approved workflowType ExecutionWorkflow knownSignals approve, reject, rollback, finalize")
		assert.Contains(t, logs.warnings(), "signal roll-back")
		env.SignalWorkflow(SignalApprove, ApprovalSignal{Approver: "alice"})
	}, 3*time.Minute)
	env.ExecuteWorkflow(ExecutionWorkflow, approvalInput(time.Hour))
	result(t, env)

	assert.Equal(t, "alice", recorded.DecidedBy)
	assert.Equal(t, 2.0, testutil.ToFloat64(unknown)-before, "approved and roll-back; approve is known")
	assert.NotContains(t, logs.warnings(), "signal approve ")
}

// names records the workflow names RegisterAll registers.
type names []string

func (n *names) RegisterWorkflowWithOptions(_ any, o workflow.RegisterOptions) {
	*n = append(*n, o.Name)
}

// Every registered workflow type says which signals it reads; one missing
// from knownSignals would be checked by nobody.
func TestEveryWorkflowTypeListsItsSignals(t *testing.T) {
	var registered names
	RegisterAll(&registered)
	require.NotEmpty(t, registered)
	for _, name := range registered {
		assert.NotEmpty(t, knownSignals[name], "knownSignals has no entry for %s", name)
	}
	assert.Len(t, knownSignals, len(registered), "knownSignals lists a workflow type that is not registered")
}

// recordedWarnings is a SignalWarner that keeps what it is handed.
type recordedWarnings []status.SignalWarning

func (r *recordedWarnings) WarnSignal(w status.SignalWarning) { *r = append(*r, w) }

// A malformed or misnamed signal reaches the workflow's object as a
// warning, numbered in history order, and names the decide update.
func TestSignalWarningsNameTheObject(t *testing.T) {
	env, _, recorded := approvalEnv(t, allowed)
	var warnings recordedWarnings
	env.SetWorkerOptions(worker.Options{Interceptors: []interceptor.WorkerInterceptor{&UnknownSignals{Warner: &warnings}}})
	env.RegisterDelayedCallback(func() { env.SignalWorkflow("approved", ApprovalSignal{Approver: "alice"}) }, time.Minute)
	env.RegisterDelayedCallback(func() { env.SignalWorkflow(SignalApprove, map[string]string{"approvr": "alice"}) }, 2*time.Minute)
	env.RegisterDelayedCallback(func() { env.SignalWorkflow(SignalApprove, ApprovalSignal{Approver: "alice"}) }, 3*time.Minute)
	in := approvalInput(time.Hour)
	env.ExecuteWorkflow(ExecutionWorkflow, in)
	result(t, env)
	assert.Equal(t, "alice", recorded.DecidedBy, "the well-formed approve decided")

	require.Len(t, warnings, 2)
	for i, w := range warnings {
		assert.Equal(t, "KubernetesExecution", w.Regarding.Kind)
		assert.Equal(t, in.Namespace, w.Regarding.Namespace)
		assert.Equal(t, in.Name, w.Regarding.Name)
		assert.Equal(t, i+1, w.Seq)
		assert.Contains(t, w.Note, "prefer the decide update")
	}
	assert.Equal(t, v1alpha1.ReasonUnknownSignal, warnings[0].Reason)
	assert.Contains(t, warnings[0].Note, `signal "approved" was accepted by Temporal but does nothing: ExecutionWorkflow reads only the signals approve, reject, rollback, finalize`)
	assert.Equal(t, v1alpha1.ReasonMalformedSignal, warnings[1].Reason)
	assert.Contains(t, warnings[1].Note, `signal "approve" was accepted by Temporal but ignored: its payload is malformed: unknown field "approvr"`)
}
