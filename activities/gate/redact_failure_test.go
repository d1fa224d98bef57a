package gate

import (
	"errors"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/temporal"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/remedy-dev/remedy/activities/fail"
	"github.com/remedy-dev/remedy/api/v1alpha1"
)

// The API server's text of a refused dry-run or write is published only to
// a requester who may read the target; its code and reason always are, and
// Remedy's own refusals, which quote no values, are shown as they are.
func TestFailureTextFollowsReadAccess(t *testing.T) {
	const secret = "hunter2"
	invalid := apierrors.NewInvalid(schema.GroupKind{Kind: "ConfigMap"}, "settings",
		field.ErrorList{field.Invalid(field.NewPath("data", "password"), secret, "must not be reused")})
	denied := apierrors.NewForbidden(schema.GroupResource{Resource: "configmaps"}, "settings",
		errors.New(`admission webhook "deny.example.com" denied the request: password `+secret+` is weak`))
	notReadable := Readable{Marker: NotReadableMarker("alice", "configmaps", "settings")}
	tests := []struct {
		name     string
		err      error
		reads    Readable
		want     []string
		withheld bool
	}{
		{name: "invalid value, requester may get", err: FromAPIServer(v1alpha1.ReasonDryRunFailed, invalid), reads: Readable{Allowed: true}, want: []string{secret}},
		{name: "invalid value, requester may not get", err: FromAPIServer(v1alpha1.ReasonDryRunFailed, invalid), reads: notReadable,
			want: []string{"422 Invalid", notReadable.Marker}, withheld: true},
		{name: "webhook denial, requester may not get", err: FromAPIServer(v1alpha1.ReasonExecutionFailed, fmt.Errorf("patch: %w", denied)), reads: notReadable,
			want: []string{"403 Forbidden", notReadable.Marker}, withheld: true},
		{name: "read access unknown", err: FromAPIServer(v1alpha1.ReasonDryRunFailed, invalid), reads: Readable{}, want: []string{unknownMarker}, withheld: true},
		{name: "retryable server error, requester may not get", err: FromAPIServer(v1alpha1.ReasonExecutionFailed, apierrors.NewInternalError(errors.New("webhook saw "+secret))),
			reads: notReadable, want: []string{"500 InternalError"}, withheld: true},
		{name: "a failed job's message", err: WithAPIText(fail.Permanent(v1alpha1.ReasonExecutionFailed, errors.New("patch refused: "+secret)), APIText{Reason: "BackoffLimitExceeded"}),
			reads: notReadable, want: []string{"the write failed (BackoffLimitExceeded)"}, withheld: true},
		{name: "Remedy's own refusal", err: fail.Permanent(v1alpha1.ReasonPolicyDenied, errors.New("scale refused at the write: replicas above 10")), reads: notReadable,
			want: []string{"replicas above 10"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := tt.reads.Failure(tt.err)
			for _, w := range tt.want {
				assert.Contains(t, got, w)
			}
			if tt.withheld {
				assert.NotContains(t, got, secret)
			}
		})
	}
}

// FromAPIServer keeps classify's typing (permanent or retried) and adds the
// API server's status; an error the API server did not answer is left alone.
func TestFromAPIServerKeepsTheRetryPolicy(t *testing.T) {
	var app *temporal.ApplicationError
	err := FromAPIServer(v1alpha1.ReasonDryRunFailed, apierrors.NewInvalid(schema.GroupKind{Kind: "ConfigMap"}, "settings", nil))
	require.True(t, errors.As(err, &app))
	assert.True(t, app.NonRetryable())
	assert.Equal(t, v1alpha1.ReasonDryRunFailed, app.Type())
	st, ok := APITextOf(err)
	require.True(t, ok)
	assert.Equal(t, APIText{Code: 422, Reason: "Invalid"}, st)

	err = FromAPIServer(v1alpha1.ReasonExecutionFailed, apierrors.NewConflict(schema.GroupResource{Resource: "configmaps"}, "settings", errors.New("changed")))
	require.True(t, errors.As(err, &app))
	assert.False(t, app.NonRetryable(), "a conflict is retried")
	_, ok = APITextOf(err)
	assert.True(t, ok)

	plain := errors.New("dial tcp: connection refused")
	assert.Equal(t, plain, FromAPIServer(v1alpha1.ReasonExecutionFailed, plain))
	_, ok = APITextOf(fail.Permanent(v1alpha1.ReasonPolicyDenied, plain))
	assert.False(t, ok)
}
