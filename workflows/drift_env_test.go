package workflows

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/mock"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/workflow"

	"github.com/remedy-dev/remedy/activities/approval"
	"github.com/remedy-dev/remedy/activities/drift"
	"github.com/remedy-dev/remedy/activities/gate"
)

var driftParent = DriftObjectRef{APIVersion: "apps/v1", Kind: "Deployment", Namespace: "shop", Name: "web", UID: "uid-web"}

func driftSignal(id string) DriftSignal {
	return DriftSignal{
		ID: id, Parent: driftParent, ParentGeneration: 3, ParentSpecHash: "hash-3",
		Child:     DriftObjectRef{APIVersion: "apps/v1", Kind: "ReplicaSet", Namespace: "shop", Name: "web-" + id, UID: "uid-rs-" + id},
		Operation: "UPDATE", User: "system:serviceaccount:kube-system:deployment-controller", Groups: []string{"system:serviceaccounts"},
		OldObject: json.RawMessage(`{"spec":{"replicas":1}}`), NewObject: json.RawMessage(`{"spec":{"replicas":2}}`),
		Mode: "enforce", Denied: true,
		DetectedAt: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC),
	}
}

// driftEnv mocks the drift activities: every POST is recorded, and check
// decides which drifts have resolved when the parent is polled.
type driftEnv struct {
	*testsuite.TestWorkflowEnvironment
	mu     sync.Mutex
	posts  []drift.PostReportInput
	checks []drift.CheckDriftsInput
	writes []string
	// postErr, when set, fails a POST attempt; it runs under mu.
	postErr func(in drift.PostReportInput) error
	// settings are what the worker's configuration says, once verifyErr
	// (when set) let a drift's claims through.
	settings  gate.DriftSettings
	verifyErr func(in drift.VerifyDriftInput) error
	verified  []drift.VerifyDriftInput
}

type checkFunc func(n int, in drift.CheckDriftsInput) (drift.CheckDriftsResult, error)

func newDriftEnv(t *testing.T, check checkFunc) *driftEnv {
	var s testsuite.WorkflowTestSuite
	e := &driftEnv{TestWorkflowEnvironment: s.NewTestWorkflowEnvironment(),
		settings: gate.DriftSettings{CallbackURLs: []string{"https://a.example/drift", "https://b.example/drift"}}}
	e.RegisterWorkflowWithOptions(DriftWorkflow, workflow.RegisterOptions{Name: "DriftWorkflow"})
	e.RegisterActivity(&drift.Drift{})
	e.RegisterActivity(&approval.Approvals{})
	e.OnActivity(drifts.PostReport, mock.Anything, mock.Anything).Return(func(_ context.Context, in drift.PostReportInput) error {
		// A report goes to its URLs from parallel activities.
		e.mu.Lock()
		defer e.mu.Unlock()
		if e.postErr != nil {
			if err := e.postErr(in); err != nil {
				return err
			}
		}
		e.posts = append(e.posts, in)
		return nil
	})
	e.OnActivity(drifts.VerifyDrift, mock.Anything, mock.Anything).Return(
		func(_ context.Context, in drift.VerifyDriftInput) (gate.DriftSettings, error) {
			e.verified = append(e.verified, in)
			if e.verifyErr != nil {
				if err := e.verifyErr(in); err != nil {
					return gate.DriftSettings{}, err
				}
			}
			return e.settings, nil
		})
	e.OnActivity(drifts.CheckDrifts, mock.Anything, mock.Anything).Return(
		func(_ context.Context, in drift.CheckDriftsInput) (drift.CheckDriftsResult, error) {
			e.checks = append(e.checks, in)
			return check(len(e.checks), in)
		})
	return e
}

// resolveAt resolves every open drift on the nth check.
func resolveAt(n int, reason string) checkFunc {
	return func(got int, in drift.CheckDriftsInput) (drift.CheckDriftsResult, error) {
		var res drift.CheckDriftsResult
		if got >= n {
			for _, d := range in.Drifts {
				res.Resolved = append(res.Resolved, drift.DriftResolution{ID: d.ID, Reason: reason})
			}
		}
		return res, nil
	}
}

func (e *driftEnv) signalAt(d time.Duration, s DriftSignal) {
	e.RegisterDelayedCallback(func() { e.SignalWorkflow(SignalDrift, s) }, d)
}

func (e *driftEnv) result(t *testing.T) DriftResult {
	t.Helper()
	require.True(t, e.IsWorkflowCompleted())
	require.NoError(t, e.GetWorkflowError())
	var r DriftResult
	require.NoError(t, e.GetWorkflowResult(&r))
	return r
}

// phases lists the reports posted as "id/phase", in order, after checking
// that each URL got the same ones: a report goes to its URLs in parallel.
func (e *driftEnv) phases(t *testing.T) []string {
	t.Helper()
	byURL := map[string][]string{}
	for _, p := range e.posts {
		byURL[p.URL] = append(byURL[p.URL], fmt.Sprintf("%s/%s", p.Report.Spec.ID, p.Report.Spec.Phase))
	}
	a, b := byURL["https://a.example/drift"], byURL["https://b.example/drift"]
	require.Equal(t, a, b, "every callback URL gets every report")
	if len(a) > 0 {
		require.Len(t, byURL, 2, "only the signal's URLs are called")
	}
	return a
}

// withApprovals mocks the approval activities: the namespace timeout is 10m,
// the RAR records whatever decision the workflow took, and the parent
// annotation writes are recorded.
func (e *driftEnv) withApprovals() (*[]approval.ApprovalRequestInput, *[]approval.DecisionInput, *[]drift.DriftDecisionInput) {
	var rars []approval.ApprovalRequestInput
	var decisions []approval.DecisionInput
	var writes []drift.DriftDecisionInput
	e.settings.RequestApproval = true
	e.OnActivity(approvals.NamespaceApprovalTimeout, mock.Anything, mock.Anything).Return(10*time.Minute, nil)
	e.OnActivity(approvals.CreateApprovalRequest, mock.Anything, mock.Anything).Return(func(_ context.Context, in approval.ApprovalRequestInput) error {
		rars = append(rars, in)
		return nil
	})
	e.OnActivity(approvals.RecordDecision, mock.Anything, mock.Anything).Return(func(_ context.Context, in approval.DecisionInput) (gate.Decision, error) {
		decisions = append(decisions, in)
		return in.Decision, nil
	})
	e.OnActivity(drifts.WriteApproval, mock.Anything, mock.Anything).Return(func(_ context.Context, in drift.DriftDecisionInput) error {
		e.writes = append(e.writes, "approval")
		writes = append(writes, in)
		return nil
	})
	e.OnActivity(drifts.WriteRejection, mock.Anything, mock.Anything).Return(func(_ context.Context, in drift.DriftDecisionInput) error {
		e.writes = append(e.writes, "rejection")
		writes = append(writes, in)
		return nil
	})
	return &rars, &decisions, &writes
}

// askingSignal is a drift of a parent whose configuration asks for
// approval (withApprovals); the signal itself cannot ask.
func askingSignal(id string) DriftSignal { return driftSignal(id) }
