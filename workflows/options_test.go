package workflows

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/temporal"
	"k8s.io/utils/ptr"

	"github.com/remedy-dev/remedy/activities/fail"
	"github.com/remedy-dev/remedy/api/v1alpha1"
)

func TestExecuteOptionsRetryADeadWorkersWrite(t *testing.T) {
	o := executeOptions(v1alpha1.KubernetesExecutionSpec{Timeout: v1alpha1.DurationOf(2 * time.Minute)})
	assert.Equal(t, 2*time.Minute, o.StartToCloseTimeout)
	assert.Equal(t, inlineHeartbeatTimeout, o.HeartbeatTimeout)
	assert.Greater(t, o.ScheduleToCloseTimeout, o.StartToCloseTimeout, "a timed-out attempt leaves room for its retry")
	assert.Equal(t, int32(3), o.RetryPolicy.MaximumAttempts)
}

// A rollback is retried through an outage for rollbackRetryWindow, not spec.maxRetries times.
func TestRollbackOptionsRideOutAnOutage(t *testing.T) {
	spec := v1alpha1.KubernetesExecutionSpec{Timeout: v1alpha1.DurationOf(time.Minute), MaxRetries: ptr.To[int32](0)}
	o := rollbackOptions(spec)
	assert.Zero(t, o.RetryPolicy.MaximumAttempts, "retried until the window ends, not a count")
	assert.Equal(t, rollbackRetryWindow, o.ScheduleToCloseTimeout)
	assert.Equal(t, inlineHeartbeatTimeout, o.HeartbeatTimeout)
	assert.Equal(t, fail.NonRetryable, o.RetryPolicy.NonRetryableErrorTypes, "a permanent refusal still fails at once")
	assert.Equal(t, int32(1), executeOptions(spec).RetryPolicy.MaximumAttempts, "the forward write keeps spec.maxRetries")
	c := rollbackCheckOptions()
	assert.Zero(t, c.RetryPolicy.MaximumAttempts)
	assert.Equal(t, rollbackRetryWindow, c.ScheduleToCloseTimeout)
	assert.Equal(t, int32(5), quickOptions.RetryPolicy.MaximumAttempts, "quickOptions itself unchanged")
}

func TestRecordOptionsWaitUntilRequiredBy(t *testing.T) {
	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		name       string
		requiredBy time.Time
		want       time.Duration
	}{
		{"decided early", now.Add(time.Hour), time.Hour},
		{"decided just before the deadline", now.Add(10 * time.Second), minRecordWindow},
		{"expired", now, minRecordWindow},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := recordOptions(now, tc.requiredBy)
			assert.Equal(t, tc.want, o.ScheduleToCloseTimeout)
			assert.Zero(t, o.RetryPolicy.MaximumAttempts, "retried until the deadline, not a count")
			assert.Equal(t, int32(5), quickOptions.RetryPolicy.MaximumAttempts, "quickOptions itself unchanged")
		})
	}
}

func TestReasonOfNamesOnlyPermanentFailures(t *testing.T) {
	for _, tc := range []struct {
		name string
		err  error
		want string
	}{
		{"permanent", temporal.NewNonRetryableApplicationError("no", v1alpha1.ReasonForbidden, nil), v1alpha1.ReasonForbidden},
		{"typed by the retry policy", temporal.NewApplicationError("gone", v1alpha1.ReasonNotFound), v1alpha1.ReasonNotFound},
		{"retries ran out", temporal.NewApplicationError("webhook down", "wrapError"), "fallback"},
		{"timeout", temporal.NewTimeoutError(enumspb.TIMEOUT_TYPE_HEARTBEAT, nil), v1alpha1.ReasonExecutionTimeout},
		{"none", nil, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.want, reasonOf(tc.err, "fallback"))
		})
	}
}
