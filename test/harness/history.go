package harness

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"
	historypb "go.temporal.io/api/history/v1"
	"go.temporal.io/sdk/worker"
	"google.golang.org/protobuf/encoding/protojson"

	"github.com/remedy-dev/remedy/workflows"
)

// UpdateHistories, set by REMEDY_UPDATE_HISTORIES=1, rewrites the committed
// histories under workflows/testdata/histories from live runs.
var UpdateHistories = os.Getenv("REMEDY_UPDATE_HISTORIES") == "1"

// ReplayHistory fetches the closed workflow's history, replays it against the
// current workflow code and, when updating, commits it as file.
func ReplayHistory(t *testing.T, workflowID, file string) {
	t.Helper()
	ctx := context.Background()
	require.NoError(t, env.Temporal.GetWorkflow(ctx, workflowID, "").Get(ctx, nil), "workflow %s did not complete", workflowID)
	iter := env.Temporal.GetWorkflowHistory(ctx, workflowID, "", false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	h := &historypb.History{}
	for iter.HasNext() {
		e, err := iter.Next()
		require.NoError(t, err)
		h.Events = append(h.Events, e)
	}
	require.NotEmpty(t, h.Events)

	r := worker.NewWorkflowReplayer()
	workflows.RegisterAll(r)
	require.NoError(t, r.ReplayWorkflowHistory(nil, h), "live history of %s does not replay", workflowID)

	if UpdateHistories {
		b, err := protojson.MarshalOptions{Multiline: true, Indent: "  "}.Marshal(h)
		require.NoError(t, err)
		require.NoError(t, os.WriteFile(filepath.Join(Root, "workflows", "testdata", "histories", file), b, 0o644))
	}
}
