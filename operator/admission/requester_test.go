package admission

import (
	"testing"

	"github.com/stretchr/testify/assert"
	authenticationv1 "k8s.io/api/authentication/v1"

	"github.com/remedy-dev/remedy/api/v1alpha1"
)

func TestStampedRequester(t *testing.T) {
	const worker = "system:serviceaccount:remedy-system:remedy-worker"
	alice := authenticationv1.UserInfo{Username: "alice", UID: "u1", Groups: []string{"oncall"}}
	body := &v1alpha1.Requester{Username: "root", Groups: []string{"system:masters"}}
	cases := []struct {
		name string
		user authenticationv1.UserInfo
		body *v1alpha1.Requester
		step bool
		want string
	}{
		{name: "a person's body is overwritten", user: alice, body: body, want: "alice"},
		{name: "a person may not pass a requester even on a step", user: alice, body: body, step: true, want: "alice"},
		{name: "the worker passes a step's requester on", user: authenticationv1.UserInfo{Username: worker}, body: body, step: true, want: "root"},
		{name: "the worker outside a step is itself", user: authenticationv1.UserInfo{Username: worker}, body: body, want: worker},
		{name: "the worker with no body requester is itself", user: authenticationv1.UserInfo{Username: worker}, step: true, want: worker},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.want, StampedRequester(tc.user, tc.body, tc.step, worker).Username)
		})
	}
	assert.Equal(t, v1alpha1.Requester{Username: "alice", UID: "u1", Groups: []string{"oncall"}}, StampedRequester(alice, nil, false, worker))
}
