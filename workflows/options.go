package workflows

import (
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/remedy-dev/remedy/activities/fail"
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
		NonRetryableErrorTypes: fail.NonRetryable,
	},
}

// stepCreateOptions ride out an outage of the requester webhook, which the
// operator serves and every KubernetesExecution create passes (failurePolicy
// Fail): an operator restart or failover takes longer than quickOptions'
// five attempts. A retry finds the execution an earlier attempt created, and
// refusals (Forbidden, Invalid) are permanent at once. Retry policies are not
// part of replay, so runs in flight take these too.
var stepCreateOptions = workflow.ActivityOptions{
	StartToCloseTimeout:    30 * time.Second,
	ScheduleToCloseTimeout: 5 * time.Minute,
	RetryPolicy: &temporal.RetryPolicy{
		InitialInterval:        500 * time.Millisecond,
		BackoffCoefficient:     2,
		MaximumInterval:        10 * time.Second,
		NonRetryableErrorTypes: fail.NonRetryable,
	},
}

// Defaults for specs built without the CRD's defaulting, e.g. in replays.
const (
	defaultExecutionTimeout = 5 * time.Minute
	defaultRollbackWindow   = time.Hour
	defaultConditionTimeout = 30 * time.Second
)

// inlineHeartbeatTimeout is how long a write's silence means its worker died.
const inlineHeartbeatTimeout = 10 * time.Second

// executeOptions bound each attempt of the executing step by spec.timeout and
// the attempts by spec.maxRetries. The heartbeat timeout retries a dead
// worker's attempt within seconds; the schedule-to-close leaves that retry
// room (it used to equal the attempt's timeout, so a crash ended the run).
func executeOptions(spec v1alpha1.KubernetesExecutionSpec) workflow.ActivityOptions {
	timeout, retries := executionTimeout(spec), maxRetries(spec)
	return workflow.ActivityOptions{
		ScheduleToCloseTimeout: time.Duration(retries+1)*timeout + time.Minute,
		StartToCloseTimeout:    timeout,
		HeartbeatTimeout:       inlineHeartbeatTimeout,
		RetryPolicy: &temporal.RetryPolicy{
			InitialInterval:        time.Second,
			BackoffCoefficient:     2,
			MaximumInterval:        30 * time.Second,
			MaximumAttempts:        retries + 1,
			NonRetryableErrorTypes: fail.NonRetryable,
		},
	}
}

func executionTimeout(spec v1alpha1.KubernetesExecutionSpec) time.Duration {
	if d := spec.Timeout.Or(0); d > 0 {
		return d
	}
	return defaultExecutionTimeout
}

func maxRetries(spec v1alpha1.KubernetesExecutionSpec) int32 {
	if spec.MaxRetries != nil {
		return *spec.MaxRetries
	}
	return 2
}

// jobOptions leave retries to the Job's own backoffLimit; the activity is
// retried only to resume watching the same Job after a worker dies.
func jobOptions(spec v1alpha1.KubernetesExecutionSpec) workflow.ActivityOptions {
	timeout := executionTimeout(spec) + time.Minute
	return workflow.ActivityOptions{
		StartToCloseTimeout: timeout,
		HeartbeatTimeout:    15 * time.Second,
		RetryPolicy: &temporal.RetryPolicy{
			InitialInterval:        time.Second,
			BackoffCoefficient:     2,
			MaximumInterval:        10 * time.Second,
			MaximumAttempts:        5,
			NonRetryableErrorTypes: fail.NonRetryable,
		},
	}
}

// rollbackRetryWindow is how long a rollback keeps retrying through
// transient failures before it fails.
const rollbackRetryWindow = 10 * time.Minute

// rollbackOptions keep retrying a rollback through transient failures (the
// API server or a webhook down for a while) for rollbackRetryWindow, whatever
// spec.maxRetries says: a rollback is what leaves nothing half-done, so only
// a permanent refusal (Forbidden, NotFound, ...) or the window's end fails it.
func rollbackOptions(spec v1alpha1.KubernetesExecutionSpec) workflow.ActivityOptions {
	o := executeOptions(spec)
	o.ScheduleToCloseTimeout = max(o.ScheduleToCloseTimeout, rollbackRetryWindow)
	o.RetryPolicy.MaximumAttempts = 0
	return o
}

// rollbackCheckOptions are quickOptions retried like rollbackOptions, for
// the checks a rollback passes before its write.
func rollbackCheckOptions() workflow.ActivityOptions {
	o := quickOptions
	o.ScheduleToCloseTimeout = rollbackRetryWindow
	policy := *quickOptions.RetryPolicy
	policy.MaximumAttempts = 0
	o.RetryPolicy = &policy
	return o
}

// conditionOptions give a condition its own timeout plus room for the last evaluation.
func conditionOptions(c v1alpha1.Condition) workflow.ActivityOptions {
	timeout := c.Timeout.Or(defaultConditionTimeout)
	return workflow.ActivityOptions{
		StartToCloseTimeout: timeout + 30*time.Second,
		HeartbeatTimeout:    10 * time.Second,
		RetryPolicy: &temporal.RetryPolicy{
			InitialInterval:        time.Second,
			MaximumAttempts:        3,
			NonRetryableErrorTypes: fail.NonRetryable,
		},
	}
}

// minRecordWindow is how long a decision taken at or after requiredBy (an
// expiry) may still take to record.
const minRecordWindow = 2 * time.Minute

// recordOptions retry recording a decision with backoff until requiredBy (at
// least minRecordWindow): the approval webhook on RAR status is down while the
// operator restarts, and a decision already taken must not fail the run then.
func recordOptions(now, requiredBy time.Time) workflow.ActivityOptions {
	o := quickOptions
	o.ScheduleToCloseTimeout = max(requiredBy.Sub(now), minRecordWindow)
	policy := *quickOptions.RetryPolicy
	policy.MaximumAttempts = 0
	o.RetryPolicy = &policy
	return o
}

// recordLocalOptions give the local write a few seconds; an approval-webhook
// outage outlasts them and falls back to the activity, which retries until requiredBy.
var recordLocalOptions = workflow.LocalActivityOptions{
	ScheduleToCloseTimeout: 10 * time.Second,
	StartToCloseTimeout:    5 * time.Second,
	RetryPolicy: &temporal.RetryPolicy{
		InitialInterval:    200 * time.Millisecond,
		BackoffCoefficient: 2,
		MaximumInterval:    2 * time.Second,
	},
}
