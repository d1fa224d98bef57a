package workflows

import (
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/mock"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/testsuite"

	"github.com/remedy-dev/remedy/activities/execution"
	"github.com/remedy-dev/remedy/activities/gate"
	"github.com/remedy-dev/remedy/api/v1alpha1"
)

func TestDecodeDecide(t *testing.T) {
	for _, tc := range []struct {
		name    string
		raw     string
		want    DecideRequest
		wantErr string
	}{
		{name: "approve", raw: `{"approved":true,"approver":"alice","reason":"go"}`, want: DecideRequest{Approved: true, Approver: "alice", Reason: "go"}},
		{name: "explicit reject", raw: `{"approved":false,"approver":"bob","request":"r","namespace":"shop"}`,
			want: DecideRequest{Approver: "bob", Request: "r", Namespace: "shop"}},
		{name: "misspelled approved", raw: `{"approve":true,"approver":"alice"}`, wantErr: `decide: unknown field "approve"; the payload is a JSON object with the fields "approved", "approver"`},
		{name: "approved missing", raw: `{"approver":"alice"}`, wantErr: `decide: "approved" is required: true approves, false rejects`},
		{name: "approved not a bool", raw: `{"approved":"yes","approver":"alice"}`, wantErr: "decide: cannot unmarshal string"},
		{name: "empty", raw: ``, wantErr: "decide: the payload is empty"},
		{name: "null", raw: `null`, wantErr: "decide: the payload is empty"},
		{name: "two values", raw: `{"approved":true,"approver":"a"} {}`, wantErr: "more than one JSON value"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := decodeDecide(json.RawMessage(tc.raw))
			if tc.wantErr != "" {
				require.Error(t, err)
				assert.Contains(t, err.Error(), tc.wantErr)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tc.want, got)
		})
	}
}

// A typo in a decide update is refused before it is written to history, so
// it neither approves nor, as `approved` defaulting to false did, rejects.
func TestDecideUpdateRefusesMalformedPayloads(t *testing.T) {
	env, _, recorded := approvalEnv(t, allowed)
	var refusals []string
	update := func(payload map[string]any) func() {
		return func() {
			env.UpdateWorkflow(UpdateDecide, "", &testsuite.TestUpdateCallback{
				OnReject:   func(err error) { refusals = append(refusals, err.Error()) },
				OnAccept:   func() {},
				OnComplete: func(any, error) {},
			}, payload)
		}
	}
	env.RegisterDelayedCallback(update(map[string]any{"approve": true, "approver": "alice"}), time.Minute)
	env.RegisterDelayedCallback(update(map[string]any{"approver": "alice"}), 2*time.Minute)
	env.RegisterDelayedCallback(update(map[string]any{"approved": true, "approver": "alice", "reason": "go"}), 3*time.Minute)
	in := approvalInput(time.Hour)
	in.Spec.RollbackWindow = v1alpha1.DurationOf(time.Second)
	env.ExecuteWorkflow(ExecutionWorkflow, in)
	s := result(t, env)

	require.Len(t, refusals, 2)
	assert.Contains(t, refusals[0], `unknown field "approve"`)
	assert.Contains(t, refusals[1], `"approved" is required`)
	assert.Equal(t, v1alpha1.DecisionApproved, recorded.Decision)
	assert.Equal(t, "alice", recorded.DecidedBy)
	assert.Equal(t, v1alpha1.PhaseCompleted, s.Phase, s.Message)
}

// Signals cannot be refused: one with a field the payload does not have is
// dropped with a Warning, so a misspelled "request" cannot decide whichever
// request is open.
func TestApprovalSignalWithUnknownFieldIsIgnored(t *testing.T) {
	s, logs := loggedSuite()
	env, _, recorded := approvalEnvOf(t, s, allowed)
	env.RegisterDelayedCallback(func() {
		env.SignalWorkflow(SignalApprove, map[string]any{"approver": "mallory", "requst": "other-approval"})
	}, time.Minute)
	env.RegisterDelayedCallback(func() { env.SignalWorkflow(SignalReject, ApprovalSignal{Approver: "bob"}) }, 2*time.Minute)
	env.ExecuteWorkflow(ExecutionWorkflow, approvalInput(time.Hour))
	st := result(t, env)

	assert.Equal(t, gate.Decision{Decision: v1alpha1.DecisionRejected, DecidedBy: "bob", Via: v1alpha1.DecidedViaSignal, At: recorded.At}, *recorded)
	assert.Equal(t, v1alpha1.ReasonApprovalRejected, st.Reason)
	assert.Contains(t, logs.warnings(), `ignoring signal with a malformed payload signal approve error unknown field "requst"`)
}

// A rollback signal still rolls back, and says what it could not read.
func TestRollbackSignalWithUnknownFieldWarns(t *testing.T) {
	s, logs := loggedSuite()
	env := newEnvOf(t, s)
	env.OnActivity(validation.CheckSpec, mock.Anything, mock.Anything, mock.Anything).Return(nil)
	allowAll(env)
	env.OnActivity(executionActs.InspectTarget, mock.Anything, mock.Anything).Return(scalePlan, nil)
	env.OnActivity(executionActs.ExecuteInline, mock.Anything, mock.Anything).Return(execution.ExecuteResult{Plan: scalePlan}, nil).Twice()
	env.RegisterDelayedCallback(func() {
		env.SignalWorkflow(SignalRollback, map[string]any{"requestor": "alice"})
	}, time.Minute)
	env.ExecuteWorkflow(ExecutionWorkflow, scaleInput(time.Hour, false))
	st := result(t, env)

	assert.Equal(t, v1alpha1.ReasonRolledBack, st.Reason, st.Message)
	assert.Equal(t, "rolling back as requested by an unnamed requester", st.PhaseTransitions[len(st.PhaseTransitions)-2].Message)
	assert.Contains(t, logs.warnings(), `signal payload is malformed; using the fields it names signal rollback error unknown field "requestor"`)
}

// warnLog keeps the Warnings a workflow logs, as "msg key value ...".
type warnLog struct {
	mu    sync.Mutex
	warns []string
}

func loggedSuite() (*testsuite.WorkflowTestSuite, *warnLog) {
	var s testsuite.WorkflowTestSuite
	l := &warnLog{}
	s.SetLogger(l)
	return &s, l
}

func (l *warnLog) Debug(string, ...any) {}
func (l *warnLog) Info(string, ...any)  {}
func (l *warnLog) Error(string, ...any) {}
func (l *warnLog) Warn(msg string, keyvals ...any) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.warns = append(l.warns, strings.TrimSpace(fmt.Sprintln(append([]any{msg}, keyvals...)...)))
}

func (l *warnLog) warnings() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return strings.Join(l.warns, "\n")
}
