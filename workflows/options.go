package workflows

import (
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/remedy-dev/remedy/activities"
	"github.com/remedy-dev/remedy/api/v1alpha1"
)

// quickOptions suit short API calls: reads, validation and dry-runs.
var quickOptions = workflow.ActivityOptions{
	StartToCloseTimeout: 30 * time.Second,
	RetryPolicy: &temporal.RetryPolicy{
		InitialInterval:        500 * time.Millisecond,
		BackoffCoefficient:     2,
		MaximumInterval:        10 * time.Second,
		MaximumAttempts:        5,
		NonRetryableErrorTypes: activities.NonRetryable,
	},
}

// Defaults for specs built without the CRD's defaulting, e.g. in replays.
const (
	defaultExecutionTimeout = 5 * time.Minute
	defaultRollbackWindow   = time.Hour
)

// executeOptions bound the executing step by spec.timeout and spec.maxRetries.
func executeOptions(spec v1alpha1.KubernetesExecutionSpec) workflow.ActivityOptions {
	timeout, retries := defaultExecutionTimeout, int32(2)
	if spec.Timeout != nil && spec.Timeout.Duration > 0 {
		timeout = spec.Timeout.Duration
	}
	if spec.MaxRetries != nil {
		retries = *spec.MaxRetries
	}
	return workflow.ActivityOptions{
		ScheduleToCloseTimeout: timeout,
		StartToCloseTimeout:    timeout,
		RetryPolicy: &temporal.RetryPolicy{
			InitialInterval:        time.Second,
			BackoffCoefficient:     2,
			MaximumInterval:        30 * time.Second,
			MaximumAttempts:        retries + 1,
			NonRetryableErrorTypes: activities.NonRetryable,
		},
	}
}
