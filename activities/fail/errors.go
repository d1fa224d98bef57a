// Package activities holds everything Remedy's workflows do to the world.
// Activities are methods on structs whose fields are their dependencies; the
// worker package is the only place that builds those structs.
package fail

import (
	"errors"

	"go.temporal.io/sdk/temporal"
	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/remedy-dev/remedy/api/v1alpha1"
	"github.com/remedy-dev/remedy/internal/actions"
)

// NonRetryable lists the types a RetryPolicy must not retry.
var NonRetryable = []string{
	v1alpha1.ReasonInvalidParameters, v1alpha1.ReasonForbidden, v1alpha1.ReasonNotFound,
	v1alpha1.ReasonPolicyDenied, v1alpha1.ReasonDryRunFailed, v1alpha1.ReasonExecutionFailed, v1alpha1.ReasonPolicyMissing, v1alpha1.ReasonSubjectMismatch,
}

func Permanent(reason string, err error) error {
	return temporal.NewNonRetryableApplicationError(err.Error(), reason, err)
}

// Classify turns an action or API error into a typed permanent failure, or
// leaves it retryable (conflicts, timeouts, unavailable servers).
func Classify(failReason string, err error) error {
	var inv *actions.InvalidError
	switch {
	case err == nil:
		return nil
	case errors.As(err, &inv):
		return Permanent(v1alpha1.ReasonInvalidParameters, err)
	case apierrors.IsForbidden(err):
		return Permanent(v1alpha1.ReasonForbidden, err)
	case apierrors.IsNotFound(err):
		return Permanent(v1alpha1.ReasonNotFound, err)
	case apierrors.IsInvalid(err), apierrors.IsBadRequest(err), apierrors.IsMethodNotSupported(err):
		return Permanent(failReason, err)
	default:
		return err
	}
}

func Truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n]
}
