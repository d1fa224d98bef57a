package harness

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"
	historypb "go.temporal.io/api/history/v1"
	"go.temporal.io/sdk/worker"
	"google.golang.org/protobuf/encoding/protojson"

	"github.com/remedy-dev/remedy/internal/seal"
	"github.com/remedy-dev/remedy/workflows"
)

// UpdateHistories, set by REMEDY_UPDATE_HISTORIES=1, rewrites the committed
// histories under workflows/testdata/histories from live runs.
// REMEDY_UPDATE_HISTORIES=missing writes only the histories not committed yet,
// so recording a new branch leaves the other committed histories as they are.
var (
	UpdateHistories = os.Getenv("REMEDY_UPDATE_HISTORIES") == "1"
	recordMissing   = os.Getenv("REMEDY_UPDATE_HISTORIES") == "missing"
)

// awaitClosed waits for the latest run of the workflow to close as a run
// does: completed, or failed or canceled with its final status
// (workflows.FinalResult).
func awaitClosed(t *testing.T, workflowID string) {
	t.Helper()
	ctx := context.Background()
	var final json.RawMessage
	require.NoError(t, workflows.FinalResult(env.Temporal.GetWorkflow(ctx, workflowID, "").Get(ctx, &final), &final), "workflow %s did not close with a final status", workflowID)
}

// ReplayHistory fetches the latest run of the workflow, which must have
// closed with a final status, replays it against the current workflow code and, when
// updating, commits it as file.
func ReplayHistory(t *testing.T, workflowID, file string) {
	t.Helper()
	awaitClosed(t, workflowID)
	replayRun(t, workflowID, "", file)
}

// ReplayRun does what ReplayHistory does for one run (runID; empty is the
// latest), however it closed: completed, failed or continued as new.
func ReplayRun(t *testing.T, workflowID, runID, file string) {
	t.Helper()
	d, err := env.Temporal.DescribeWorkflowExecution(context.Background(), workflowID, runID)
	require.NoError(t, err)
	require.NotNil(t, d.GetWorkflowExecutionInfo().GetCloseTime(), "workflow %s (run %q) is still open", workflowID, runID)
	replayRun(t, workflowID, runID, file)
}

// ReplayChain replays every run of the continue-as-new chain that ends in
// the workflow's latest, completed run, oldest first, and commits run i
// (from 1) as file with "-<i>" before its extension. It returns the number of runs.
func ReplayChain(t *testing.T, workflowID, file string) int {
	t.Helper()
	ctx := context.Background()
	awaitClosed(t, workflowID)
	d, err := env.Temporal.DescribeWorkflowExecution(ctx, workflowID, "")
	require.NoError(t, err)
	var runs []string
	for run := d.GetWorkflowExecutionInfo().GetExecution().GetRunId(); run != ""; {
		runs = append(runs, run)
		run = history(t, workflowID, run).Events[0].GetWorkflowExecutionStartedEventAttributes().GetContinuedExecutionRunId()
	}
	slices.Reverse(runs)
	ext := filepath.Ext(file)
	for i, run := range runs {
		replayRun(t, workflowID, run, fmt.Sprintf("%s-%d%s", strings.TrimSuffix(file, ext), i+1, ext))
	}
	return len(runs)
}

func history(t *testing.T, workflowID, runID string) *historypb.History {
	t.Helper()
	iter := env.Temporal.GetWorkflowHistory(context.Background(), workflowID, runID, false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	h := &historypb.History{}
	for iter.HasNext() {
		e, err := iter.Next()
		require.NoError(t, err)
		h.Events = append(h.Events, e)
	}
	require.NotEmpty(t, h.Events)
	// Recorded unsealed: the committed histories replay with the plain converter and hold no key.
	require.NoError(t, env.Keys.Unseal(context.Background(), h), "unseal the history of %s", workflowID)
	return h
}

func replayRun(t *testing.T, workflowID, runID, file string) {
	t.Helper()
	h := history(t, workflowID, runID)
	r, err := worker.NewWorkflowReplayerWithOptions(worker.WorkflowReplayerOptions{DataConverter: seal.PlainDataConverter()})
	require.NoError(t, err)
	workflows.RegisterAll(r)
	require.NoError(t, r.ReplayWorkflowHistory(nil, h), "live history of %s (run %q) does not replay", workflowID, runID)
	t.Logf("%s: live history of %d events replays", file, len(h.Events))

	path := filepath.Join(Root, "workflows", "testdata", "histories", file)
	if !UpdateHistories {
		if _, err := os.Stat(path); !recordMissing || !errors.Is(err, os.ErrNotExist) {
			return
		}
	}
	b, err := protojson.MarshalOptions{Multiline: true, Indent: "  "}.Marshal(h)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(path, b, 0o644))
}
