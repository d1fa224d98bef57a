package admission

import (
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/remedy-dev/remedy/api/v1alpha1"
)

func TestDecideStatusChange(t *testing.T) {
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	at := &metav1.Time{Time: now.Add(-time.Minute)}
	decided := v1alpha1.RemediationApprovalRequestStatus{Decision: v1alpha1.DecisionApproved, DecidedBy: "alice", DecidedVia: v1alpha1.DecidedViaSignal, DecidedAt: at}
	requiredBy := now.Add(time.Minute)
	carolApproved := &v1alpha1.RequestedDecision{Decision: v1alpha1.DecisionApproved, RequestedBy: "carol", RequestedAt: metav1.NewTime(now.Add(-time.Second))}
	requested := v1alpha1.RemediationApprovalRequestStatus{RequestedDecision: carolApproved}
	closed := func(reason string) v1alpha1.RemediationApprovalRequestStatus {
		return v1alpha1.RemediationApprovalRequestStatus{Conditions: []metav1.Condition{{Type: v1alpha1.ConditionReady, Status: metav1.ConditionFalse,
			Reason: reason, Message: "subject scale-web ended before a decision; nothing will be executed"}}}
	}
	canceled, mismatched := closed("Canceled"), closed("WorkflowMismatch")
	withDecision := func(s v1alpha1.RemediationApprovalRequestStatus, d v1alpha1.Decision) v1alpha1.RemediationApprovalRequestStatus {
		s.Decision = d
		return s
	}
	for _, tc := range []struct {
		name       string
		change     StatusChange
		wantCode   int32 // 0: allowed
		wantStatus *v1alpha1.RemediationApprovalRequestStatus
	}{
		{
			name:   "operator refreshes timeRemaining",
			change: StatusChange{New: v1alpha1.RemediationApprovalRequestStatus{TimeRemaining: "14m30s"}, User: "operator"},
		},
		{
			name:     "decision without the approve verb is forbidden",
			change:   StatusChange{New: v1alpha1.RemediationApprovalRequestStatus{Decision: v1alpha1.DecisionApproved}, User: "eve"},
			wantCode: http.StatusForbidden,
		},
		{
			name: "kubectl decision becomes a requested decision attributed to the user, not the body",
			change: StatusChange{New: v1alpha1.RemediationApprovalRequestStatus{Decision: v1alpha1.DecisionRejected, DecidedBy: "mallory",
				DecidedVia: v1alpha1.DecidedViaSignal, DecidedAt: at, DecisionMessage: "no", TimeRemaining: "1m"},
				User: "carol", Authorized: true, RequiredBy: requiredBy, Now: now},
			wantStatus: &v1alpha1.RemediationApprovalRequestStatus{TimeRemaining: "1m", RequestedDecision: &v1alpha1.RequestedDecision{
				Decision: v1alpha1.DecisionRejected, RequestedBy: "carol", RequestedAt: metav1.NewTime(now), Message: "no"}},
		},
		{
			name:     "users cannot expire a request",
			change:   StatusChange{New: v1alpha1.RemediationApprovalRequestStatus{Decision: v1alpha1.DecisionExpired}, User: "carol", Authorized: true, RequiredBy: requiredBy, Now: now},
			wantCode: http.StatusUnprocessableEntity,
		},
		{
			name:     "no kubectl decision at requiredBy",
			change:   StatusChange{New: v1alpha1.RemediationApprovalRequestStatus{Decision: v1alpha1.DecisionApproved}, User: "carol", Authorized: true, RequiredBy: now, Now: now},
			wantCode: http.StatusConflict,
		},
		{
			name: "a canceled request takes no decision",
			change: StatusChange{Old: canceled, New: withDecision(canceled, v1alpha1.DecisionApproved), User: "carol", Authorized: true,
				RequiredBy: requiredBy, Now: now},
			wantCode: http.StatusConflict,
		},
		{
			name: "nor does one naming another workflow",
			change: StatusChange{Old: mismatched, New: withDecision(mismatched, v1alpha1.DecisionRejected), User: "carol", Authorized: true,
				RequiredBy: requiredBy, Now: now},
			wantCode: http.StatusConflict,
		},
		{
			name:   "the operator may still write a closed request's status",
			change: StatusChange{Old: canceled, New: canceled, User: "operator", Expirer: true, RequiredBy: requiredBy, Now: now},
		},
		{
			name:     "a person's update that changes nothing (a typo the API server dropped) is refused",
			change:   StatusChange{Old: canceled, New: canceled, User: "carol", Authorized: true, RequiredBy: requiredBy, Now: now},
			wantCode: http.StatusUnprocessableEntity,
		},
		{
			name:     "a person's decision that is not Approved or Rejected is refused before it becomes a request",
			change:   StatusChange{New: v1alpha1.RemediationApprovalRequestStatus{Decision: "Approve"}, User: "carol", Authorized: true, RequiredBy: requiredBy, Now: now},
			wantCode: http.StatusUnprocessableEntity,
		},
		{
			name: "nor after it",
			change: StatusChange{New: v1alpha1.RemediationApprovalRequestStatus{Decision: v1alpha1.DecisionApproved}, User: "carol", Authorized: true,
				RequiredBy: now.Add(-time.Hour), Now: now},
			wantCode: http.StatusConflict,
		},
		{
			name: "the worker records the timer's Expired after requiredBy",
			change: StatusChange{New: v1alpha1.RemediationApprovalRequestStatus{Decision: v1alpha1.DecisionExpired, DecidedBy: "timer", DecidedVia: v1alpha1.DecidedViaTimer, DecidedAt: at},
				User: "system:serviceaccount:remedy-system:remedy-worker", Trusted: true, Authorized: true, RequiredBy: now, Now: now},
		},
		{
			name: "a second kubectl decision while the first is on its way is refused: the first wins",
			change: StatusChange{Old: requested, New: v1alpha1.RemediationApprovalRequestStatus{RequestedDecision: carolApproved, Decision: v1alpha1.DecisionRejected},
				User: "dave", Authorized: true, RequiredBy: requiredBy, Now: now},
			wantCode: http.StatusConflict,
		},
		{
			name: "the worker records the decision the workflow took over a requested one",
			change: StatusChange{Old: requested, New: func() v1alpha1.RemediationApprovalRequestStatus {
				s := decided
				s.RequestedDecision = carolApproved
				return s
			}(),
				User: "system:serviceaccount:remedy-system:remedy-worker", Trusted: true, Authorized: true, RequiredBy: requiredBy, Now: now},
		},
		{
			name:     "nobody writes requestedDecision directly",
			change:   StatusChange{New: requested, User: "carol", Authorized: true, RequiredBy: requiredBy, Now: now},
			wantCode: http.StatusUnprocessableEntity,
		},
		{
			name:     "nor rewrites it",
			change:   StatusChange{Old: requested, New: v1alpha1.RemediationApprovalRequestStatus{RequestedDecision: &v1alpha1.RequestedDecision{Decision: v1alpha1.DecisionRejected, RequestedBy: "carol"}}, User: "carol", Authorized: true},
			wantCode: http.StatusUnprocessableEntity,
		},
		{
			name: "a writer that read the request before the kubectl decision keeps it (and meets the resourceVersion check)",
			change: StatusChange{Old: requested, New: v1alpha1.RemediationApprovalRequestStatus{TimeRemaining: "30s"},
				User: "system:serviceaccount:remedy-system:remedy-operator", RequiredBy: requiredBy, Now: now},
			wantStatus: &v1alpha1.RemediationApprovalRequestStatus{TimeRemaining: "30s", RequestedDecision: carolApproved},
		},
		{
			name: "so does the worker recording the workflow's decision",
			change: StatusChange{Old: requested, New: decided,
				User: "system:serviceaccount:remedy-system:remedy-worker", Trusted: true, Authorized: true, RequiredBy: requiredBy, Now: now},
			wantStatus: func() *v1alpha1.RemediationApprovalRequestStatus {
				s := decided
				s.RequestedDecision = carolApproved
				return &s
			}(),
		},
		{
			name:   "the worker records a Temporal decision as attributed",
			change: StatusChange{New: decided, User: "system:serviceaccount:remedy-system:remedy-worker", Trusted: true, Authorized: true},
		},
		{
			name:     "even the worker needs the approve verb",
			change:   StatusChange{New: decided, User: "system:serviceaccount:remedy-system:remedy-worker", Trusted: true},
			wantCode: http.StatusForbidden,
		},
		{
			name:     "a decision is final",
			change:   StatusChange{Old: decided, New: v1alpha1.RemediationApprovalRequestStatus{Decision: v1alpha1.DecisionRejected, DecidedAt: at}, User: "carol", Authorized: true},
			wantCode: http.StatusConflict,
		},
		{
			name:     "attribution is final too",
			change:   StatusChange{Old: decided, New: func() v1alpha1.RemediationApprovalRequestStatus { s := decided; s.DecidedBy = "mallory"; return s }(), User: "mallory"},
			wantCode: http.StatusConflict,
		},
		{
			name: "the operator expires a request past requiredBy whose workflow is gone, even one it closed, without the approve verb",
			change: StatusChange{Old: canceled, New: withDecision(canceled, v1alpha1.DecisionExpired), User: "operator", Expirer: true,
				RequiredBy: now, Now: now},
		},
		{
			name:     "but not before requiredBy",
			change:   StatusChange{New: v1alpha1.RemediationApprovalRequestStatus{Decision: v1alpha1.DecisionExpired}, User: "operator", Expirer: true, RequiredBy: requiredBy, Now: now},
			wantCode: http.StatusConflict,
		},
		{
			name:     "and it decides nothing else",
			change:   StatusChange{New: v1alpha1.RemediationApprovalRequestStatus{Decision: v1alpha1.DecisionApproved}, User: "operator", Expirer: true, RequiredBy: now, Now: now},
			wantCode: http.StatusForbidden,
		},
		{
			name:     "nor expires a decided request",
			change:   StatusChange{Old: decided, New: withDecision(decided, v1alpha1.DecisionExpired), User: "operator", Expirer: true, RequiredBy: now, Now: now},
			wantCode: http.StatusConflict,
		},
		{
			name: "the requester may not approve a request that needs another approver",
			change: StatusChange{New: v1alpha1.RemediationApprovalRequestStatus{Decision: v1alpha1.DecisionApproved}, User: "alice", Authorized: true,
				Requester: "alice", DistinctApprover: true, RequiredBy: requiredBy, Now: now},
			wantCode: http.StatusForbidden,
		},
		{
			name: "another approver may",
			change: StatusChange{New: v1alpha1.RemediationApprovalRequestStatus{Decision: v1alpha1.DecisionApproved}, User: "carol", Authorized: true,
				Requester: "alice", DistinctApprover: true, RequiredBy: requiredBy, Now: now},
			wantStatus: &v1alpha1.RemediationApprovalRequestStatus{RequestedDecision: &v1alpha1.RequestedDecision{
				Decision: v1alpha1.DecisionApproved, RequestedBy: "carol", RequestedAt: metav1.NewTime(now)}},
		},
		{
			name: "and the requester may withdraw their request by rejecting it",
			change: StatusChange{New: v1alpha1.RemediationApprovalRequestStatus{Decision: v1alpha1.DecisionRejected}, User: "alice", Authorized: true,
				Requester: "alice", DistinctApprover: true, RequiredBy: requiredBy, Now: now},
			wantStatus: &v1alpha1.RemediationApprovalRequestStatus{RequestedDecision: &v1alpha1.RequestedDecision{
				Decision: v1alpha1.DecisionRejected, RequestedBy: "alice", RequestedAt: metav1.NewTime(now)}},
		},
		{
			name: "without the rule the requester approves",
			change: StatusChange{New: v1alpha1.RemediationApprovalRequestStatus{Decision: v1alpha1.DecisionApproved}, User: "alice", Authorized: true,
				Requester: "alice", RequiredBy: requiredBy, Now: now},
			wantStatus: &v1alpha1.RemediationApprovalRequestStatus{RequestedDecision: &v1alpha1.RequestedDecision{
				Decision: v1alpha1.DecisionApproved, RequestedBy: "alice", RequestedAt: metav1.NewTime(now)}},
		},
		{
			name: "an anonymous user decides nothing, whatever RBAC grants",
			change: StatusChange{New: v1alpha1.RemediationApprovalRequestStatus{Decision: v1alpha1.DecisionRejected}, User: AnonymousUser, Anonymous: true, Authorized: true,
				RequiredBy: requiredBy, Now: now},
			wantCode: http.StatusForbidden,
		},
		{
			name:     "attribution without a decision is refused",
			change:   StatusChange{New: v1alpha1.RemediationApprovalRequestStatus{DecidedBy: "mallory"}, User: "mallory"},
			wantCode: http.StatusUnprocessableEntity,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v := DecideStatusChange(tc.change)
			assert.Equal(t, tc.wantCode == 0, v.Allowed, v.Message)
			assert.Equal(t, tc.wantCode, v.Code)
			assert.Equal(t, tc.wantStatus, v.Status)
		})
	}
}

func TestMainResourceStatusChange(t *testing.T) {
	approved := v1alpha1.RemediationApprovalRequestStatus{Decision: v1alpha1.DecisionApproved}
	msg := MainResourceStatusChange("", "shop", "web-approval", v1alpha1.RemediationApprovalRequestStatus{}, approved)
	assert.Contains(t, msg, "add --subresource=status")
	assert.Empty(t, MainResourceStatusChange("", "shop", "web-approval", approved, approved), "metadata updates pass")
	assert.Empty(t, MainResourceStatusChange("status", "shop", "web-approval", v1alpha1.RemediationApprovalRequestStatus{}, approved), "the status subresource is DecideStatusChange's")
}

func TestNeedsAuthorization(t *testing.T) {
	approved := v1alpha1.RemediationApprovalRequestStatus{Decision: v1alpha1.DecisionApproved}
	expired := v1alpha1.RemediationApprovalRequestStatus{Decision: v1alpha1.DecisionExpired}
	assert.True(t, NeedsAuthorization(v1alpha1.RemediationApprovalRequestStatus{}, approved, false))
	assert.False(t, NeedsAuthorization(approved, approved, false))
	assert.False(t, NeedsAuthorization(v1alpha1.RemediationApprovalRequestStatus{}, v1alpha1.RemediationApprovalRequestStatus{TimeRemaining: "30s"}, false))
	assert.True(t, NeedsAuthorization(v1alpha1.RemediationApprovalRequestStatus{}, approved, true), "the expirer decides nothing but Expired")
	assert.False(t, NeedsAuthorization(v1alpha1.RemediationApprovalRequestStatus{}, expired, true))
	assert.True(t, NeedsAuthorization(v1alpha1.RemediationApprovalRequestStatus{}, expired, false))
}

func TestAnonymous(t *testing.T) {
	assert.True(t, Anonymous(AnonymousUser, []string{UnauthenticatedGroup}))
	assert.True(t, Anonymous("", nil))
	assert.True(t, Anonymous(" ", []string{"system:authenticated"}))
	assert.True(t, Anonymous("bob", []string{UnauthenticatedGroup}))
	assert.False(t, Anonymous("bob", []string{"system:authenticated"}))
}
