package workflows

import (
	"bytes"
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/mock"
	"github.com/stretchr/testify/require"
	commonpb "go.temporal.io/api/common/v1"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/testsuite"

	"github.com/remedy-dev/remedy/activities/approval"
	"github.com/remedy-dev/remedy/activities/gate"
	"github.com/remedy-dev/remedy/api/v1alpha1"
	"github.com/remedy-dev/remedy/internal/seal"
)

// personSays is a decision a person sends through the codec server: the
// test's converter seals it as the codec server's /encode does.
type personSays struct {
	who  seal.Person
	body any
}

// sealingConverter is Remedy's data converter, which also seals personSays
// values as a person's.
type sealingConverter struct {
	converter.DataConverter
	keys *seal.Keyring
}

func (c sealingConverter) ToPayload(v any) (*commonpb.Payload, error) {
	p, ok := v.(personSays)
	if !ok {
		return c.DataConverter.ToPayload(v)
	}
	plain, err := converter.GetDefaultDataConverter().ToPayload(p.body)
	if err != nil {
		return nil, err
	}
	return c.keys.SealPerson(plain, p.who)
}

func (c sealingConverter) ToPayloads(vs ...any) (*commonpb.Payloads, error) {
	out := &commonpb.Payloads{}
	for _, v := range vs {
		p, err := c.ToPayload(v)
		if err != nil {
			return nil, err
		}
		out.Payloads = append(out.Payloads, p)
	}
	return out, nil
}

// personEnv is approvalEnvOf with sealed payloads; authorized lists who may
// decide (AuthorizeApprover) and the returned slice who was asked.
func personEnv(t *testing.T, s *testsuite.WorkflowTestSuite, pol gate.PolicyResult, authorized ...string) (
	*testsuite.TestWorkflowEnvironment, *approval.ApprovalRequestInput, *gate.Decision, *[]approval.ApproverInput,
) {
	env, created, recorded := approvalEnvOf(t, s, pol)
	keys, err := seal.NewKeyring("k1", map[string][]byte{"k1": bytes.Repeat([]byte{7}, seal.KeySize)})
	require.NoError(t, err)
	env.SetDataConverter(sealingConverter{DataConverter: seal.DataConverter(keys), keys: keys})
	var asked []approval.ApproverInput
	env.OnActivity(approvals.AuthorizeApprover, mock.Anything, mock.Anything).Return(func(_ context.Context, in approval.ApproverInput) (string, error) {
		asked = append(asked, in)
		for _, a := range authorized {
			if a == in.Person.Username {
				return "", nil
			}
		}
		return "user " + in.Person.Username + " may not decide", nil
	}).Maybe()
	return env, created, recorded, &asked
}

var (
	alice   = seal.Person{Username: "alice", UID: "u-1", Groups: []string{"oncall"}, Extra: map[string][]string{"scopes": {"approve"}}}
	mallory = seal.Person{Username: "mallory", Groups: []string{"dev"}}
)

// A person's signal is decided by their Kubernetes identity, after the
// workflow asks whether they may approve; the name in the body and a
// claimed "via kubectl" count for nothing.
func TestPersonSignalIsAuthorizedAndAttributed(t *testing.T) {
	s, logs := loggedSuite()
	env, created, recorded, asked := personEnv(t, s, allowed, "alice")
	env.RegisterDelayedCallback(func() {
		env.SignalWorkflow(SignalApprove, personSays{mallory, ApprovalSignal{Approver: "alice", Via: "kubectl", Reason: "trust me"}})
	}, time.Minute)
	env.RegisterDelayedCallback(func() {
		env.SignalWorkflow(SignalApprove, personSays{alice, ApprovalSignal{Approver: "root", Reason: "checked"}})
	}, 2*time.Minute)
	env.ExecuteWorkflow(ExecutionWorkflow, approvalInput(time.Hour))
	st := result(t, env)

	assert.Equal(t, v1alpha1.PhaseCompleted, st.Phase, st.Message)
	assert.Equal(t, gate.Decision{Decision: v1alpha1.DecisionApproved, DecidedBy: "alice", Via: v1alpha1.DecidedViaSignal, Message: "checked", At: recorded.At}, *recorded)
	require.Len(t, *asked, 2)
	assert.Equal(t, approval.ApproverInput{Namespace: "shop", Name: created.Name, Person: mallory}, (*asked)[0])
	assert.Equal(t, alice, (*asked)[1].Person, "the SubjectAccessReview gets the person's uid, groups and extra")
	assert.Contains(t, logs.warnings(), "ignoring a person's approval decision: user mallory may not decide")
}

// A person's update is refused at once when they requested the change, and
// after the authorization when they may not approve; the run keeps waiting
// for someone who may.
func TestPersonUpdateIsAuthorized(t *testing.T) {
	env, _, recorded, asked := personEnv(t, &testsuite.WorkflowTestSuite{}, policyRequires(true), "alice", "bob")
	var selfRefused, unauthorized error
	update := func(p personSays, refused *error, completed *error) func() {
		return func() {
			env.UpdateWorkflow(UpdateDecide, "", &testsuite.TestUpdateCallback{
				OnReject: func(err error) { *refused = err }, OnAccept: func() {},
				OnComplete: func(_ any, err error) { *completed = err },
			}, p)
		}
	}
	var ignored, accepted, noErr error
	env.RegisterDelayedCallback(update(personSays{alice, DecideRequest{Approved: true, Approver: "bob"}}, &selfRefused, &noErr), time.Minute)
	env.RegisterDelayedCallback(update(personSays{mallory, DecideRequest{Approved: true}}, &ignored, &unauthorized), 2*time.Minute)
	env.RegisterDelayedCallback(update(personSays{seal.Person{Username: "bob"}, DecideRequest{Approved: true, Reason: "go"}}, &ignored, &accepted), 3*time.Minute)
	env.ExecuteWorkflow(ExecutionWorkflow, requestedBy("alice", nil))
	st := result(t, env)

	require.EqualError(t, selfRefused, "alice requested this change, and approval request shop/scale-web-approval needs an approver other than the requester",
		"the authenticated requester is refused, whatever name the body gives")
	require.ErrorContains(t, unauthorized, "user mallory may not decide")
	require.NoError(t, ignored)
	require.NoError(t, accepted)
	assert.Equal(t, "bob", recorded.DecidedBy)
	assert.Equal(t, v1alpha1.DecidedViaUpdate, recorded.Via)
	assert.Equal(t, v1alpha1.PhaseCompleted, st.Phase, st.Message)
	require.Len(t, *asked, 2, "the self-approval is refused before anyone is asked")
}

// The operator's relay of a kubectl decision is Remedy's (no person): it
// keeps its attribution and needs no second authorization.
func TestRelayedDecisionIsNotAPersons(t *testing.T) {
	env, created, recorded, asked := personEnv(t, &testsuite.WorkflowTestSuite{}, allowed)
	env.RegisterDelayedCallback(func() {
		env.SignalWorkflow(SignalReject, ApprovalSignal{Approver: "carol", Via: "kubectl", Reason: "no", Request: created.Name, Namespace: created.Namespace})
	}, time.Minute)
	env.ExecuteWorkflow(ExecutionWorkflow, approvalInput(time.Hour))
	st := result(t, env)

	assert.Equal(t, v1alpha1.PhaseFailed, st.Phase)
	assert.Equal(t, gate.Decision{Decision: v1alpha1.DecisionRejected, DecidedBy: "carol", Via: v1alpha1.DecidedViaKubectl, Message: "no", At: recorded.At}, *recorded)
	assert.Empty(t, *asked)
}
