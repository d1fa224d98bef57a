package plugin

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/remedy-dev/remedy/api/v1alpha1"
)

// RBAC's refusal gets the hint; the approval webhook's refusals say why themselves.
func TestWithApproverHint(t *testing.T) {
	rar := schema.GroupResource{Group: "remedy.dev", Resource: "remediationapprovalrequests"}
	rbac := apierrors.NewForbidden(rar, "x", errors.New(`User "mallory" cannot get resource`))
	assert.Contains(t, withApproverHint(rbac).Error(), approverHint)
	for _, msg := range []string{
		`admission webhook "approval-status.remedy.dev" denied the request: user "alice" requested this change and may not approve it`,
		`admission webhook "approval-status.remedy.dev" denied the request: an anonymous user ("system:anonymous") may not decide`,
		`admission webhook "approval-status.remedy.dev" denied the request: it needs the verb "approve"`,
	} {
		err := apierrors.NewForbidden(rar, "x", nil)
		err.ErrStatus.Message = msg // as the API server words an admission refusal
		assert.Equal(t, msg, withApproverHint(err).Error())
	}
	other := errors.New("connection refused")
	assert.Equal(t, other, withApproverHint(other))
}

func TestDistinctNote(t *testing.T) {
	assert.Empty(t, distinctNote(v1alpha1.ApprovalContext{Requester: "alice"}))
	assert.Equal(t, " by an approver other than the requester alice", distinctNote(v1alpha1.ApprovalContext{Requester: "alice", RequireDistinctApprover: true}))
}
