package workflows

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/remedy-dev/remedy/internal/actions"
	"github.com/remedy-dev/remedy/internal/seal"
)

// Committed histories of every branch of the current code replay against it;
// they are re-recorded with `REMEDY_UPDATE_HISTORIES=1 make test` when a
// workflow changes (DEVELOPERS.md).
func TestReplayCommittedHistories(t *testing.T) {
	files, err := filepath.Glob("testdata/histories/*.json")
	require.NoError(t, err)
	require.GreaterOrEqual(t, len(files), 4, "expected committed histories of the happy and failure paths")
	replayAll(t, files)
}

// Each release's histories, frozen when it was cut and never re-recorded,
// replay against the current code, so a run started on a released version
// finishes on this one; a change that cannot replay them needs a
// workflow.GetVersion gate (DEVELOPERS.md).
func TestReplayReleasedHistories(t *testing.T) {
	releases, err := filepath.Glob(filepath.Join("..", "hack", "release", "v*.commit"))
	require.NoError(t, err)
	require.NotEmpty(t, releases, "no release is recorded in hack/release")
	for _, r := range releases {
		version := strings.TrimSuffix(filepath.Base(r), ".commit")
		files, err := filepath.Glob(filepath.Join("testdata", "histories", version, "*.json"))
		require.NoError(t, err)
		require.GreaterOrEqual(t, len(files), 40, "release %s should have its histories frozen in testdata/histories/%s", version, version)
		t.Run(version, func(t *testing.T) { replayAll(t, files) })
	}
}

func replayAll(t *testing.T, files []string) {
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			// A person's decisions replay as theirs (seal.Keyring.Unseal keeps who).
			r, err := worker.NewWorkflowReplayerWithOptions(worker.WorkflowReplayerOptions{DataConverter: seal.PlainDataConverter()})
			require.NoError(t, err)
			RegisterAll(r)
			require.NoError(t, r.ReplayWorkflowHistoryFromJSONFile(nil, f))
		})
	}
}

// reorderedExecution reads the target before checking the spec: the same
// activities in a different order, as a careless refactor might write it.
func reorderedExecution(ctx workflow.Context, in ExecutionInput) (ExecutionResult, error) {
	ctx = workflow.WithActivityOptions(ctx, quickOptions)
	req := actions.Request{Action: in.Spec.Action, Target: in.Spec.Target}
	if err := workflow.ExecuteActivity(ctx, executionActs.InspectTarget, req).Get(ctx, nil); err != nil {
		return ExecutionResult{}, err
	}
	err := workflow.ExecuteActivity(ctx, validation.CheckSpec, in.Spec, req).Get(ctx, nil)
	return ExecutionResult{}, err
}

func TestReorderedCommandsFailReplay(t *testing.T) {
	r := worker.NewWorkflowReplayer()
	r.RegisterWorkflowWithOptions(reorderedExecution, workflow.RegisterOptions{Name: "ExecutionWorkflow"})
	err := r.ReplayWorkflowHistoryFromJSONFile(nil, "testdata/histories/execution-scale-window-closed.json")
	require.Error(t, err)
	// TMPRL1100 is the SDK's code for a history the code no longer matches.
	assert.Contains(t, err.Error(), "TMPRL1100")
}
