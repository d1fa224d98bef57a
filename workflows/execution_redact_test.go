package workflows

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/mock"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/testsuite"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"

	"github.com/remedy-dev/remedy/activities/execution"
	"github.com/remedy-dev/remedy/activities/gate"
	"github.com/remedy-dev/remedy/activities/status"
	"github.com/remedy-dev/remedy/api/v1alpha1"
	"github.com/remedy-dev/remedy/internal/actions"
)

const (
	livePassword = "hunter2-live"
	notReadable  = "<redacted: alice may not get configmaps/settings>"
)

// patchInput patches a ConfigMap's password, with a dry-run.
func patchInput(window time.Duration) ExecutionInput {
	return ExecutionInput{Namespace: "shop", Name: "rotate", UID: "u1", Spec: v1alpha1.KubernetesExecutionSpec{
		Action:         "patch",
		Target:         v1alpha1.ObjectRef{APIVersion: "v1", Kind: "ConfigMap", Namespace: "shop", Name: "settings"},
		Parameters:     &v1alpha1.ActionParameters{Patch: &apiextensionsv1.JSON{Raw: []byte(`{"data":{"password":"rotated"}}`)}},
		DryRun:         true,
		RollbackWindow: v1alpha1.DurationOf(window),
		Requester:      &v1alpha1.Requester{Username: "alice"},
	}}
}

// inverse restores the live password.
var inverse = v1alpha1.ActionParameters{Patch: &apiextensionsv1.JSON{Raw: []byte(`{"data":{"password":"` + livePassword + `"}}`)}}

var passwordPlan = actions.Plan{
	Change: v1alpha1.ResourceChange{Kind: "ConfigMap", Namespace: "shop", Name: "settings", Action: "patched",
		Before: `data.password: "` + livePassword + `"`, After: `data.password: "rotated"`},
	Rollback: v1alpha1.RollbackInformation{Available: true, RollbackAction: "patch", RollbackParameters: &inverse},
}

// readsEnv is newEnv without its answer to the read check, which the case gives.
func readsEnv(t *testing.T) *testsuite.TestWorkflowEnvironment {
	env := untrustedEnvOf(t, &testsuite.WorkflowTestSuite{})
	env.OnActivity(subjects.VerifyExecution, mock.Anything, mock.Anything, mock.Anything).Return(nil).Maybe()
	env.OnActivity(validation.CheckRequester, mock.Anything, mock.Anything).Return(nil).Maybe()
	return env
}

// onPatch answers the checks and the writes of patchInput; reads is what the
// requester may read; dryRuns counts the dry-runs.
func onPatch(env *testsuite.TestWorkflowEnvironment, reads gate.Readable, dryRuns *int) {
	env.OnActivity(validation.CheckSpec, mock.Anything, mock.Anything, mock.Anything).Return(nil)
	allowAll(env)
	env.OnActivity(validation.MayReadTarget, mock.Anything, mock.Anything).Return(reads, nil)
	env.OnActivity(executionActs.InspectTarget, mock.Anything, mock.Anything).Return(passwordPlan, nil)
	env.OnActivity(executionActs.DryRun, mock.Anything, mock.Anything).Return(func(context.Context, actions.Request) (v1alpha1.DryRunResults, error) {
		*dryRuns++
		return v1alpha1.DryRunResults{Performed: true, Success: true, EstimatedImpact: actions.Impact(passwordPlan.Change)}, nil
	}).Maybe()
	env.OnActivity(executionActs.ExecuteInline, mock.Anything, mock.MatchedBy(func(w gate.Write) bool { return w.RollbackKey == nil })).
		Return(execution.ExecuteResult{Plan: passwordPlan, Logs: "patched settings: " + actions.Impact(passwordPlan.Change)}, nil).Maybe()
}

// published is everything the run published: each status it pushed, and its last.
func published(t *testing.T, env *testsuite.TestWorkflowEnvironment, final v1alpha1.KubernetesExecutionStatus) string {
	t.Helper()
	var b strings.Builder
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	require.NoError(t, enc.Encode(struct {
		Pushes []status.ExecutionStatusPush
		Final  v1alpha1.KubernetesExecutionStatus
	}{pushesOf(env), final}))
	return b.String()
}

// A requester who may have the patch run but may not get the ConfigMap reads
// none of its values from the run, and the rollback still restores them: the
// run keeps the real inverse and the gate matches it by the digest.
func TestValuesRedactedForARequesterWhoMayNotGetTheTarget(t *testing.T) {
	env := readsEnv(t)
	dryRuns := 0
	onPatch(env, gate.Readable{Marker: notReadable}, &dryRuns)
	var rollback gate.Write
	env.OnActivity(executionActs.ExecuteInline, mock.Anything, mock.MatchedBy(func(w gate.Write) bool { return w.RollbackKey != nil })).
		Return(func(_ context.Context, w gate.Write) (execution.ExecuteResult, error) {
			rollback = w
			back := passwordPlan
			back.Change.Before, back.Change.After = passwordPlan.Change.After, passwordPlan.Change.Before
			return execution.ExecuteResult{Plan: back}, nil
		}).Once()
	var ready v1alpha1.KubernetesExecutionStatus
	env.RegisterDelayedCallback(func() {
		v, err := env.QueryWorkflow(QueryStatus)
		require.NoError(t, err)
		require.NoError(t, v.Get(&ready))
		env.SignalWorkflow(SignalRollback, RollbackRequest{Requester: "alice"})
	}, 10*time.Minute)
	env.ExecuteWorkflow(ExecutionWorkflow, patchInput(time.Hour))
	s := result(t, env)

	assert.Equal(t, v1alpha1.ReasonRolledBack, s.Reason)
	assert.Equal(t, 1, dryRuns)
	all := published(t, env, s)
	assert.NotContains(t, all, livePassword)
	assert.NotContains(t, all, "rotated", "after values are not shown either")
	assert.Contains(t, all, notReadable)
	assert.Equal(t, notReadable, s.ValidationResults.DryRunResults.EstimatedImpact)
	assert.Equal(t, notReadable, s.ExecutionResults.ResourcesAffected[0].Before)
	assert.Equal(t, notReadable, s.ExecutionResults.Logs)

	require.Equal(t, v1alpha1.PhaseRollbackReady, ready.Phase)
	rb := ready.RollbackInformation
	require.NotNil(t, rb)
	assert.True(t, rb.Available)
	assert.Equal(t, "patch", rb.RollbackAction)
	assert.Nil(t, rb.RollbackParameters)
	assert.Equal(t, notReadable, rb.Redacted)
	assert.Equal(t, "rollback to "+notReadable+" available for 1h0m0s through the rollback signal", ready.Message)

	// The rollback writes the real inverse, with the key its digest was made with.
	assert.JSONEq(t, string(inverse.Patch.Raw), string(rollback.Request.Params.Patch.Raw))
	assert.Len(t, rollback.RollbackKey, 32)
	digest, err := gate.RollbackDigest(rollback.RollbackKey, rollback.Request.Params)
	require.NoError(t, err)
	assert.Equal(t, rb.ParametersDigest, digest)
}

// A requester who may get the ConfigMap reads its values as before; the
// gate still matches the rollback by the digest.
func TestValuesShownToARequesterWhoMayGetTheTarget(t *testing.T) {
	env := readsEnv(t)
	dryRuns := 0
	onPatch(env, gate.Readable{Allowed: true}, &dryRuns)
	var ready v1alpha1.KubernetesExecutionStatus
	env.RegisterDelayedCallback(func() {
		v, err := env.QueryWorkflow(QueryStatus)
		require.NoError(t, err)
		require.NoError(t, v.Get(&ready))
	}, 10*time.Minute)
	env.ExecuteWorkflow(ExecutionWorkflow, patchInput(time.Hour))
	s := result(t, env)

	assert.Equal(t, v1alpha1.ReasonSucceeded, s.Reason)
	assert.Equal(t, `data.password: "`+livePassword+`" -> "rotated"`, s.ValidationResults.DryRunResults.EstimatedImpact)
	assert.Equal(t, passwordPlan.Change, s.ExecutionResults.ResourcesAffected[0])
	rb := ready.RollbackInformation
	require.NotNil(t, rb)
	require.NotNil(t, rb.RollbackParameters)
	assert.JSONEq(t, string(inverse.Patch.Raw), string(rb.RollbackParameters.Patch.Raw))
	assert.Regexp(t, `^hmac-sha256:[0-9a-f]{64}$`, rb.ParametersDigest)
	assert.Empty(t, rb.Redacted)
}

// A precondition that stops the run stops it before the dry-run: nothing of
// the target's values was computed or published, whatever the requester may read.
func TestPreconditionFailingStopsBeforeTheDryRun(t *testing.T) {
	for _, reads := range []gate.Readable{{Allowed: true}, {Marker: notReadable}} {
		env := readsEnv(t)
		dryRuns := 0
		onPatch(env, reads, &dryRuns)
		onCondition(env, "healthy", true, false)
		env.ExecuteWorkflow(ExecutionWorkflow, withConditions(patchInput(time.Hour), []v1alpha1.Condition{cond("healthy", true)}, nil))
		s := result(t, env)

		assert.Equal(t, v1alpha1.ReasonPreconditionFailed, s.Reason)
		assert.Zero(t, dryRuns)
		assert.Nil(t, s.ValidationResults.DryRunResults)
		assert.NotContains(t, published(t, env, s), livePassword)
	}
}
