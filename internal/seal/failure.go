package seal

import (
	"errors"

	failurepb "go.temporal.io/api/failure/v1"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/temporal"
)

// TypeRefused is the ApplicationError type of a refused payload: an activity
// whose input was refused, or a run whose input was, fails with it, and no
// retry policy retries it (the same payload is refused every time).
const TypeRefused = "PayloadRefused"

// refusalFailures marks a refused payload non-retryable. The SDK reports a
// payload it cannot decode as a plain error (internal_worker.go,
// activityExecutor.Execute), which a retry policy would retry: every retry of
// a rogue worker's scheduled activity would be refused again, and counted.
type refusalFailures struct {
	converter.FailureConverter
}

// ErrorToFailure turns a refusal into a typed non-retryable ApplicationError.
func (f refusalFailures) ErrorToFailure(err error) *failurepb.Failure {
	var app *temporal.ApplicationError
	if IsRefused(err) && !errors.As(err, &app) {
		err = temporal.NewNonRetryableApplicationError(err.Error(), TypeRefused, err)
	}
	return f.FailureConverter.ErrorToFailure(err)
}
