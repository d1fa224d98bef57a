package gate

import (
	"errors"
	"fmt"

	"go.temporal.io/sdk/temporal"
	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/remedy-dev/remedy/activities/fail"
)

// APIText marks a failure whose text the API server wrote: a dry-run's or a
// write's refusal ("Invalid value: ...", an admission webhook's or policy's
// message), which may quote the target's values. It rides as the
// failure's details, with the status the API server answered, so the run
// can publish the code and reason without the text (Readable.Failure).
type APIText struct {
	Code   int32  `json:"code,omitempty"`
	Reason string `json:"reason,omitempty"`
}

// reasonAPIError is the type of a retryable failure the API server answered.
const reasonAPIError = "APIServerError"

// FromAPIServer is classify for the error of a dry-run or a write, marked
// APIText when the API server answered it.
func FromAPIServer(failReason string, err error) error {
	c := fail.Classify(failReason, err)
	var st apierrors.APIStatus
	if c == nil || !errors.As(err, &st) {
		return c
	}
	return WithAPIText(c, APIText{Code: st.Status().Code, Reason: string(st.Status().Reason)})
}

// WithAPIText re-types err, as retryable or not as it was, with t as details.
func WithAPIText(err error, t APIText) error {
	var app *temporal.ApplicationError
	if errors.As(err, &app) {
		return temporal.NewApplicationErrorWithOptions(app.Message(), app.Type(),
			temporal.ApplicationErrorOptions{NonRetryable: app.NonRetryable(), Cause: errors.Unwrap(app), Details: []any{t}})
	}
	return temporal.NewApplicationErrorWithOptions(err.Error(), reasonAPIError, temporal.ApplicationErrorOptions{Cause: err, Details: []any{t}})
}

// APITextOf says whether err's text is the API server's, and its status.
func APITextOf(err error) (APIText, bool) {
	var app *temporal.ApplicationError
	var t APIText
	if !errors.As(err, &app) || !app.HasDetails() || app.Details(&t) != nil {
		return APIText{}, false
	}
	return t, true
}

// Failure is the message of a failed dry-run or write as the run may
// publish it. The API server's text may echo the values the write carried
// or the object holds, so a requester who may not read the target (and
// whoever reads the execution) sees its code and reason only; Remedy's own
// refusals (the gate, the policy) quote no values and are shown as they are.
func (r Readable) Failure(err error) string {
	var app *temporal.ApplicationError
	text := err.Error()
	if errors.As(err, &app) {
		text = app.Message()
	}
	t, ok := APITextOf(err)
	if r.Allowed || !ok {
		return text
	}
	if t.Code == 0 {
		return fmt.Sprintf("the write failed (%s); its message is not shown, since it may quote the target's values: %s", t.Reason, r.marker())
	}
	return fmt.Sprintf("the API server answered %d %s; its message is not shown, since it may quote the target's values: %s", t.Code, t.Reason, r.marker())
}
