package gate

import (
	"context"
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.temporal.io/api/serviceerror"
	workflowservice "go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/temporal"

	"github.com/remedy-dev/remedy/activities/internal/activitytest"
	"github.com/remedy-dev/remedy/api/v1alpha1"
)

// notFound is a Temporal that knows no workflow.
type notFound struct{}

func (notFound) DescribeWorkflowExecution(context.Context, string, string) (*workflowservice.DescribeWorkflowExecutionResponse, error) {
	return nil, serviceerror.NewNotFound("workflow not found")
}

// unreachable is a Temporal that does not answer.
type unreachable struct{}

func (unreachable) DescribeWorkflowExecution(context.Context, string, string) (*workflowservice.DescribeWorkflowExecutionResponse, error) {
	return nil, serviceerror.NewUnavailable("frontend down")
}

func TestOpenRunsBindTheCallerToItsSubjectsOpenRun(t *testing.T) {
	id := v1alpha1.ReloadWorkflowID("shop", "Deployment", "web")
	tests := []struct {
		name     string
		callerID string
		temporal func() (*OpenRuns, *activitytest.OpenRunFake)
		// refused: "" passes; otherwise the refusal's type, "" retryable when retry.
		refused string
		retry   bool
	}{
		{name: "the open reload run", callerID: id, temporal: openRunIs(ReloadWorkflowType, "", "")},
		{name: "another workflow", callerID: "rogue/shop", temporal: openRunIs(ReloadWorkflowType, "", ""), refused: v1alpha1.ReasonSubjectMismatch},
		{name: "a run of another type under the ID", callerID: id, temporal: openRunIs("Rogue", "", ""), refused: v1alpha1.ReasonSubjectMismatch},
		{name: "a run on another task queue under the ID", callerID: id, temporal: openRunIs(ReloadWorkflowType, "rogue", ""), refused: v1alpha1.ReasonSubjectMismatch},
		{name: "not the open run of the ID", callerID: id, temporal: openRunIs(ReloadWorkflowType, "", "a-later-run"), refused: v1alpha1.ReasonSubjectMismatch},
		{name: "no run of the ID", callerID: id, temporal: func() (*OpenRuns, *activitytest.OpenRunFake) {
			return &OpenRuns{Temporal: notFound{}, TaskQueue: activitytest.TestTaskQueue}, nil
		}, refused: v1alpha1.ReasonSubjectMismatch},
		{name: "no Temporal client", callerID: id, temporal: func() (*OpenRuns, *activitytest.OpenRunFake) { return &OpenRuns{}, nil }, refused: v1alpha1.ReasonSubjectMismatch},
		{name: "Temporal unavailable is retried", callerID: id, temporal: func() (*OpenRuns, *activitytest.OpenRunFake) {
			return &OpenRuns{Temporal: unreachable{}, TaskQueue: activitytest.TestTaskQueue}, nil
		}, retry: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			runs, f := tt.temporal()
			bind := func(ctx context.Context) error { return runs.Reload(ctx, "shop", "Deployment", "web") }
			for range 2 {
				err := activitytest.AsRun(t, tt.callerID, bind, bind, nil, nil)
				if tt.refused == "" && !tt.retry {
					require.NoError(t, err)
					continue
				}
				require.Error(t, err)
				var app *temporal.ApplicationError
				if tt.retry {
					assert.False(t, errors.As(err, &app) && app.NonRetryable(), "Temporal not answering is retried: %v", err)
					continue
				}
				require.True(t, errors.As(err, &app), "got %v", err)
				assert.True(t, app.NonRetryable())
				assert.Equal(t, tt.refused, app.Type())
			}
			if f == nil || tt.callerID != id {
				return
			}
			if tt.refused == "" {
				assert.Equal(t, 1, f.Described, "a run found open is remembered")
			} else {
				assert.Equal(t, 2, f.Described, "a refusal is never remembered")
			}
		})
	}
}

func openRunIs(typ, queue, runID string) func() (*OpenRuns, *activitytest.OpenRunFake) {
	return func() (*OpenRuns, *activitytest.OpenRunFake) {
		f := &activitytest.OpenRunFake{Typ: typ, Queue: queue, RunID: runID}
		return &OpenRuns{Temporal: f, TaskQueue: activitytest.TestTaskQueue}, f
	}
}

func TestOpenRunsRememberOnlyTheRunFoundOpen(t *testing.T) {
	f := &activitytest.OpenRunFake{Typ: ReloadWorkflowType}
	runs := &OpenRuns{Temporal: f, TaskQueue: activitytest.TestTaskQueue}
	id := v1alpha1.ReloadWorkflowID("shop", "Deployment", "web")
	runs.remember(id, "an-earlier-run")
	assert.False(t, runs.known(id, activitytest.TestRunID), "a continue-as-new's next run is a new run ID")
	assert.True(t, runs.known(id, "an-earlier-run"))
	for i := range maxOpenRuns + 1 {
		runs.remember(v1alpha1.ReloadWorkflowID("shop", "Deployment", string(rune('a'+i%26))+string(rune(i))), "r")
	}
	assert.LessOrEqual(t, len(runs.open), maxOpenRuns)
}
