package webhook

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
			name: "kubectl decision is attributed to the user, not the body",
			change: StatusChange{New: v1alpha1.RemediationApprovalRequestStatus{Decision: v1alpha1.DecisionRejected, DecidedBy: "mallory",
				DecidedVia: v1alpha1.DecidedViaSignal, DecisionMessage: "no"}, User: "carol", Authorized: true, Now: now},
			wantStatus: &v1alpha1.RemediationApprovalRequestStatus{Decision: v1alpha1.DecisionRejected, DecidedBy: "carol",
				DecidedVia: v1alpha1.DecidedViaKubectl, DecidedAt: &metav1.Time{Time: now}, DecisionMessage: "no"},
		},
		{
			name:     "users cannot expire a request",
			change:   StatusChange{New: v1alpha1.RemediationApprovalRequestStatus{Decision: v1alpha1.DecisionExpired}, User: "carol", Authorized: true},
			wantCode: http.StatusUnprocessableEntity,
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

func TestNeedsAuthorization(t *testing.T) {
	approved := v1alpha1.RemediationApprovalRequestStatus{Decision: v1alpha1.DecisionApproved}
	assert.True(t, NeedsAuthorization(v1alpha1.RemediationApprovalRequestStatus{}, approved))
	assert.False(t, NeedsAuthorization(approved, approved))
	assert.False(t, NeedsAuthorization(v1alpha1.RemediationApprovalRequestStatus{}, v1alpha1.RemediationApprovalRequestStatus{TimeRemaining: "30s"}))
}
