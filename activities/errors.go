// Package activities holds everything Remedy's workflows do to the world.
// Activities are methods on structs whose fields are their dependencies; the
// worker package is the only place that builds those structs.
package activities

import (
	"errors"

	"go.temporal.io/sdk/temporal"
	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/remedy-dev/remedy/activities/actions"
)

// Failure reasons. They are the ApplicationError types of permanent failures
// and the values of .status.reason.
const (
	ReasonInvalidParameters = "InvalidParameters"
	ReasonForbidden         = "Forbidden"
	ReasonNotFound          = "NotFound"
	ReasonPolicyDenied      = "PolicyDenied"
	ReasonDryRunFailed      = "DryRunFailed"
	ReasonExecutionFailed   = "ExecutionFailed"
	ReasonExecutionTimeout  = "ExecutionTimeout"
	// ReasonPolicyMissing: no safety policy is loaded, so nothing may run.
	ReasonPolicyMissing = "PolicyMissing"
	// ReasonSubjectMismatch: the workflow's object is gone, or is not the one it was started for.
	ReasonSubjectMismatch = "SubjectMismatch"
)

// NonRetryable lists the types a RetryPolicy must not retry.
var NonRetryable = []string{
	ReasonInvalidParameters, ReasonForbidden, ReasonNotFound,
	ReasonPolicyDenied, ReasonDryRunFailed, ReasonExecutionFailed, ReasonPolicyMissing, ReasonSubjectMismatch,
}

func permanent(reason string, err error) error {
	return temporal.NewNonRetryableApplicationError(err.Error(), reason, err)
}

// classify turns an action or API error into a typed permanent failure, or
// leaves it retryable (conflicts, timeouts, unavailable servers).
func classify(failReason string, err error) error {
	var inv *actions.InvalidError
	switch {
	case err == nil:
		return nil
	case errors.As(err, &inv):
		return permanent(ReasonInvalidParameters, err)
	case apierrors.IsForbidden(err):
		return permanent(ReasonForbidden, err)
	case apierrors.IsNotFound(err):
		return permanent(ReasonNotFound, err)
	case apierrors.IsInvalid(err), apierrors.IsBadRequest(err), apierrors.IsMethodNotSupported(err):
		return permanent(failReason, err)
	default:
		return err
	}
}
