package workflows

import (
	"errors"
	"fmt"

	"go.temporal.io/sdk/temporal"

	"github.com/remedy-dev/remedy/api/v1alpha1"
)

// closeRun is how a run's workflow ends, given its final phase and reason:
// a run that failed (Failed, Rejected, InvalidParameters, ...) closes the
// workflow as failed, with the reason as the error type and the final status
// as the error's details, so the Temporal Web UI and `temporal workflow list`
// show it red with its reason instead of a green Completed; a canceled run
// (reason Canceled, whatever its phase) closes canceled. Anything else completes with the result. The status the
// run wrote into .status, and its status query, say the same either way.
//
// The close is part of the history: a replay of a run that closed completed
// against code that closes it failed does not return the same result, and
// the replayer reports it. So this is decided once, for every run (see
// DEVELOPERS.md: from v0.1.0 on, a change of it is gated).
func closeRun[R any](phase v1alpha1.Phase, reason, message string, result R) (R, error) {
	switch {
	case reason == v1alpha1.ReasonCanceled:
		// Canceled in its rollback window, a run is Completed: its action was
		// made. Its workflow was canceled all the same.
		return result, temporal.NewCanceledError(result)
	case phase != v1alpha1.PhaseFailed:
		return result, nil
	}
	if reason == "" {
		reason = string(phase)
	}
	return result, temporal.NewNonRetryableApplicationError(fmt.Sprintf("%s: %s", reason, message), reason, nil, result)
}

// FinalResult reads the result of a run whose workflow closed as closeRun
// closes it: err is what getting the workflow's (or child workflow's)
// result returned. A domain failure or cancelation decodes its details into
// result and returns nil; any other error is returned as it is.
func FinalResult(err error, result any) error {
	if err == nil {
		return nil
	}
	var app *temporal.ApplicationError
	if errors.As(err, &app) && app.HasDetails() {
		if derr := app.Details(result); derr != nil {
			return fmt.Errorf("decode final status of failed run: %w", derr)
		}
		return nil
	}
	var canceled *temporal.CanceledError
	if errors.As(err, &canceled) && canceled.HasDetails() {
		if derr := canceled.Details(result); derr != nil {
			return fmt.Errorf("decode final status of canceled run: %w", derr)
		}
		return nil
	}
	return err
}
