package workflows

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/mock"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/workflow"

	"github.com/remedy-dev/remedy/activities/approval"
	"github.com/remedy-dev/remedy/activities/drift"
	"github.com/remedy-dev/remedy/activities/gate"
	kv1 "github.com/remedy-dev/remedy/api/kausality/v1alpha1"
	"github.com/remedy-dev/remedy/api/v1alpha1"
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

func TestDriftDetectedThenResolved(t *testing.T) {
	env := newDriftEnv(t, resolveAt(2, drift.DriftParentChanged))
	start := env.Now()
	var checkedAt []time.Time
	env.SetOnActivityStartedListener(func(info *activity.Info, _ context.Context, _ converter.EncodedValues) {
		if info.ActivityType.Name == "CheckDrifts" {
			checkedAt = append(checkedAt, env.Now())
		}
	})
	env.signalAt(0, driftSignal("a1"))
	env.ExecuteWorkflow(DriftWorkflow, DriftInput{Parent: driftParent})

	res := env.result(t)
	assert.Equal(t, []string{
		"a1/Detected",
		"a1/Resolved",
	}, env.phases(t))
	assert.Equal(t, []ResolvedDrift{{ID: "a1", Reason: drift.DriftParentChanged}}, res.Closed)
	assert.Empty(t, res.Status.Open)
	assert.Equal(t, 1, res.Status.Resolved)
	require.Len(t, checkedAt, 2)
	assert.Equal(t, []time.Time{start.Add(driftPollInterval), start.Add(2 * driftPollInterval)}, checkedAt, "constant poll interval")

	check := env.checks[0]
	assert.Equal(t, drift.DriftObject(driftParent), check.Parent)
	assert.Equal(t, []drift.DriftCheck{{ID: "a1", Child: drift.DriftObject(driftSignal("a1").Child), Operation: "UPDATE",
		ParentSpecHash: "hash-3", ParentGeneration: 3}}, check.Drifts)

	report := env.posts[0].Report
	assert.Equal(t, kv1.DriftReportAPIVersion, report.APIVersion)
	assert.Equal(t, kv1.DriftReportKind, report.Kind)
	assert.Equal(t, kv1.DriftObjectReference{APIVersion: "apps/v1", Kind: "Deployment", Namespace: "shop", Name: "web", UID: "uid-web", Generation: 3}, report.Spec.Parent)
	assert.Equal(t, "web-a1", report.Spec.Child.Name)
	assert.JSONEq(t, `{"spec":{"replicas":1}}`, string(report.Spec.OldObject))
	assert.JSONEq(t, `{"spec":{"replicas":2}}`, string(report.Spec.NewObject))
	assert.Equal(t, kv1.DriftRequestContext{User: "system:serviceaccount:kube-system:deployment-controller",
		Groups: []string{"system:serviceaccounts"}, Operation: "UPDATE"}, report.Spec.Request)
}

func TestDriftSignals(t *testing.T) {
	approved := driftSignal("a1")
	approved.Approved = true
	start := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	snoozedFor := func(d time.Duration) DriftSignal {
		s := driftSignal("s1")
		s.Snoozed, s.SnoozedUntil = true, start.Add(d)
		return s
	}
	snoozedApproved := approved
	snoozedApproved.Snoozed, snoozedApproved.SnoozedUntil = true, start.Add(time.Hour)
	tests := []struct {
		name       string
		signals    map[time.Duration]DriftSignal
		check      checkFunc
		wantPosts  []string
		wantClosed []ResolvedDrift
		wantChecks int
	}{
		{
			name: "a repeated id is reported once",
			signals: map[time.Duration]DriftSignal{
				0: driftSignal("a1"), time.Second: driftSignal("a1"), 2 * time.Second: driftSignal("a1"),
			},
			check: resolveAt(1, drift.DriftChildDeleted),
			wantPosts: []string{"a1/Detected",
				"a1/Resolved"},
			wantClosed: []ResolvedDrift{{ID: "a1", Reason: drift.DriftChildDeleted}},
			wantChecks: 1,
		},
		{
			name:    "two ids are two drifts",
			signals: map[time.Duration]DriftSignal{0: driftSignal("a1"), time.Second: driftSignal("b2")},
			check:   resolveAt(1, drift.DriftParentChanged),
			wantPosts: []string{"a1/Detected",
				"b2/Detected",
				"a1/Resolved",
				"b2/Resolved"},
			wantClosed: []ResolvedDrift{{ID: "a1", Reason: drift.DriftParentChanged}, {ID: "b2", Reason: drift.DriftParentChanged}},
			wantChecks: 1,
		},
		{
			name:       "a drift resolved under its snooze is followed but never reported",
			signals:    map[time.Duration]DriftSignal{0: snoozedFor(time.Hour)},
			check:      resolveAt(2, drift.DriftParentChanged),
			wantClosed: []ResolvedDrift{{ID: "s1", Reason: drift.DriftParentChanged}},
			wantChecks: 2,
		},
		{
			name:    "a drift that outlives its snooze is reported when it expires",
			signals: map[time.Duration]DriftSignal{0: snoozedFor(7 * time.Second)},
			check:   resolveAt(3, drift.DriftParentChanged),
			wantPosts: []string{"s1/Detected",
				"s1/Resolved"},
			wantClosed: []ResolvedDrift{{ID: "s1", Reason: drift.DriftParentChanged}},
			wantChecks: 3,
		},
		{
			name:    "a repeat without the snooze ends its silence",
			signals: map[time.Duration]DriftSignal{0: snoozedFor(time.Hour), time.Second: driftSignal("s1")},
			check:   resolveAt(1, drift.DriftParentChanged),
			wantPosts: []string{"s1/Detected",
				"s1/Resolved"},
			wantClosed: []ResolvedDrift{{ID: "s1", Reason: drift.DriftParentChanged}},
			wantChecks: 1,
		},
		{
			name:       "a repeat under a longer snooze keeps it silent",
			signals:    map[time.Duration]DriftSignal{0: snoozedFor(7 * time.Second), time.Second: snoozedFor(time.Hour)},
			check:      resolveAt(3, drift.DriftParentChanged),
			wantClosed: []ResolvedDrift{{ID: "s1", Reason: drift.DriftParentChanged}},
			wantChecks: 3,
		},
		{
			name:    "an approved signal resolves the open drift at once",
			signals: map[time.Duration]DriftSignal{0: driftSignal("a1"), time.Second: approved},
			check:   resolveAt(100, drift.DriftParentChanged),
			wantPosts: []string{"a1/Detected",
				"a1/Resolved"},
			wantClosed: []ResolvedDrift{{ID: "a1", Reason: drift.DriftApproved}},
		},
		{
			name:       "an approved signal for no open drift opens nothing and reports Resolved at once",
			signals:    map[time.Duration]DriftSignal{0: approved},
			check:      resolveAt(1, drift.DriftParentChanged),
			wantPosts:  []string{"a1/Resolved"},
			wantClosed: nil,
		},
		{
			name:    "an approved signal under a snooze reports nothing",
			signals: map[time.Duration]DriftSignal{0: snoozedApproved},
			check:   resolveAt(1, drift.DriftParentChanged),
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			env := newDriftEnv(t, tt.check)
			env.SetStartTime(start)
			for d, s := range tt.signals {
				env.signalAt(d, s)
			}
			env.ExecuteWorkflow(DriftWorkflow, DriftInput{Parent: driftParent})
			res := env.result(t)
			assert.Equal(t, tt.wantPosts, env.phases(t))
			assert.Equal(t, tt.wantClosed, res.Closed)
			assert.Empty(t, res.Status.Open)
			assert.Len(t, env.checks, tt.wantChecks)
		})
	}
}

func TestDriftUndeliveredReportDoesNotStopTheWorkflow(t *testing.T) {
	env := newDriftEnv(t, resolveAt(1, drift.DriftParentChanged))
	attempts := map[string]int{}
	env.postErr = func(in drift.PostReportInput) error {
		attempts[in.URL]++
		if in.URL == "https://a.example/drift" {
			return temporal.NewNonRetryableApplicationError("404", v1alpha1.ReasonCallbackRejected, nil)
		}
		if attempts[in.URL] < 3 {
			return fmt.Errorf("connection refused")
		}
		return nil
	}
	env.signalAt(0, driftSignal("a1"))
	env.ExecuteWorkflow(DriftWorkflow, DriftInput{Parent: driftParent})
	res := env.result(t)
	assert.Equal(t, []ResolvedDrift{{ID: "a1", Reason: drift.DriftParentChanged}}, res.Closed)
	assert.Equal(t, 2, attempts["https://a.example/drift"], "a rejected report is not retried: once per phase")
	assert.Equal(t, 4, attempts["https://b.example/drift"], "2 failures then success for Detected, then Resolved")
	assert.Equal(t, []UndeliveredReport{
		{ID: "a1", Phase: "Detected", URL: "https://a.example/drift", Error: "404"},
		{ID: "a1", Phase: "Resolved", URL: "https://a.example/drift", Error: "404"},
	}, res.Status.Undelivered, "the status records what never arrived, with the receiver's error")
}

func TestDriftUndeliveredReportsAreBoundedAndCarried(t *testing.T) {
	env := newDriftEnv(t, resolveAt(1, drift.DriftParentChanged))
	env.postErr = func(drift.PostReportInput) error {
		return temporal.NewNonRetryableApplicationError("not acknowledged: slack is down", v1alpha1.ReasonCallbackRejected, nil)
	}
	carried := make([]UndeliveredReport, maxUndelivered)
	for i := range carried {
		carried[i] = UndeliveredReport{ID: fmt.Sprintf("old%d", i), Phase: "Detected", URL: "https://a.example/drift", Error: "x"}
	}
	env.signalAt(0, driftSignal("a1"))
	env.ExecuteWorkflow(DriftWorkflow, DriftInput{Parent: driftParent, Undelivered: carried})
	got := env.result(t).Status.Undelivered
	require.Len(t, got, maxUndelivered)
	assert.Equal(t, "old4", got[0].ID, "the oldest are dropped")
	assert.Equal(t, UndeliveredReport{ID: "a1", Phase: "Resolved", URL: "https://b.example/drift", Error: "not acknowledged: slack is down"},
		got[len(got)-1])
}

func TestDriftReportOfKeepsEveryKausalityField(t *testing.T) {
	s := driftSignal("a1")
	s.ParentObservedGeneration, s.ParentLifecyclePhase, s.ChildGeneration = 3, kv1.LifecycleInitialized, 7
	s.RequestUID, s.FieldManager, s.DryRun = "req-1", "kube-controller-manager", true
	r := DriftReportOf(s, driftReportDetected)
	assert.Equal(t, kv1.DriftObjectReference{APIVersion: "apps/v1", Kind: "Deployment", Namespace: "shop", Name: "web", UID: "uid-web",
		Generation: 3, ObservedGeneration: 3, LifecyclePhase: "Initialized"}, r.Spec.Parent)
	assert.Equal(t, kv1.DriftObjectReference{APIVersion: "apps/v1", Kind: "ReplicaSet", Namespace: "shop", Name: "web-a1", UID: "uid-rs-a1",
		Generation: 7}, r.Spec.Child)
	assert.Equal(t, kv1.DriftRequestContext{User: s.User, Groups: s.Groups, UID: "req-1", FieldManager: "kube-controller-manager",
		Operation: "UPDATE", DryRun: true}, r.Spec.Request)
}

func TestDriftCheckFailureKeepsTheDriftOpen(t *testing.T) {
	calls := 0
	env := newDriftEnv(t, func(n int, in drift.CheckDriftsInput) (drift.CheckDriftsResult, error) {
		calls = n
		if n <= 3 {
			return drift.CheckDriftsResult{}, temporal.NewNonRetryableApplicationError("forbidden", v1alpha1.ReasonForbidden, nil)
		}
		return drift.CheckDriftsResult{Resolved: []drift.DriftResolution{{ID: "a1", Reason: drift.DriftChildDeleted}}}, nil
	})
	env.signalAt(0, driftSignal("a1"))
	env.ExecuteWorkflow(DriftWorkflow, DriftInput{Parent: driftParent})
	res := env.result(t)
	assert.Equal(t, 4, calls, "one failed check per tick, then the one that sees it resolved")
	assert.Equal(t, []ResolvedDrift{{ID: "a1", Reason: drift.DriftChildDeleted}}, res.Closed)
}

func TestDriftStatusQueryListsOpenDrifts(t *testing.T) {
	env := newDriftEnv(t, resolveAt(3, drift.DriftParentChanged))
	var during DriftStatus
	env.RegisterDelayedCallback(func() {
		v, err := env.QueryWorkflow(QueryStatus)
		require.NoError(t, err)
		require.NoError(t, v.Get(&during))
	}, 7*time.Second)
	env.signalAt(0, driftSignal("a1"))
	env.signalAt(time.Second, driftSignal("b2"))
	env.ExecuteWorkflow(DriftWorkflow, DriftInput{Parent: driftParent})
	env.result(t)
	require.Len(t, during.Open, 2)
	assert.Equal(t, "a1", during.Open[0].Signal.ID)
	assert.Equal(t, "b2", during.Open[1].Signal.ID)
	assert.Equal(t, driftParent, during.Parent)
	assert.Zero(t, during.Resolved)
}

func TestDriftContinuesAsNewCarryingOpenDrifts(t *testing.T) {
	env := newDriftEnv(t, resolveAt(1_000_000, drift.DriftParentChanged))
	// The same drift reported over and over: each signal counts, none opens a new drift.
	for i := 0; i < maxDriftSignalsPerRun+5; i++ {
		env.signalAt(time.Duration(i)*100*time.Millisecond, driftSignal("a1"))
	}
	env.ExecuteWorkflow(DriftWorkflow, DriftInput{Parent: driftParent, Open: []OpenDrift{{Signal: driftSignal("old")}}, Resolved: 7})

	require.True(t, env.IsWorkflowCompleted())
	var can *workflow.ContinueAsNewError
	require.ErrorAs(t, env.GetWorkflowError(), &can)
	var next DriftInput
	require.NoError(t, converter.GetDefaultDataConverter().FromPayloads(can.Input, &next))
	assert.Equal(t, driftParent, next.Parent)
	require.Len(t, next.Open, 2)
	assert.Equal(t, "old", next.Open[0].Signal.ID)
	assert.Equal(t, "a1", next.Open[1].Signal.ID)
	assert.Equal(t, json.RawMessage(`{"spec":{"replicas":2}}`), next.Open[1].Signal.NewObject)
	assert.Equal(t, 7, next.Resolved)
	assert.Equal(t, []string{"a1/Detected"}, env.phases(t),
		"the carried drift was reported by an earlier run")
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

// A run started or signalled by hand acts only on what the worker confirms:
// a drift whose claims do not hold, or about another parent, is neither
// reported nor asked about, and carried drifts of a parent that is gone are dropped.
func TestDriftIgnoresUnconfirmedSignals(t *testing.T) {
	env := newDriftEnv(t, resolveAt(2, drift.DriftParentChanged))
	rars, _, writes := env.withApprovals()
	env.verifyErr = func(in drift.VerifyDriftInput) error {
		if in.Child.Name == "web-forged" || in.Carried {
			return temporal.NewNonRetryableApplicationError("parent shop/Deployment/web does not exist", v1alpha1.ReasonSubjectMismatch, nil)
		}
		return nil
	}
	other := driftSignal("o1")
	other.Parent.UID = "uid-other"
	env.signalAt(0, driftSignal("forged"))
	env.signalAt(time.Second, other)
	env.ExecuteWorkflow(DriftWorkflow, DriftInput{Parent: driftParent, Open: []OpenDrift{{Signal: askingSignal("carried")}}})
	res := env.result(t)
	assert.Empty(t, res.Status.Open)
	assert.Empty(t, res.Closed)
	assert.Empty(t, env.posts, "nothing reported")
	assert.Empty(t, *rars, "nothing asked")
	assert.Empty(t, *writes, "nothing written")
	require.Len(t, env.verified, 2, "the carried drifts' parent, then the forged drift; the other parent's signal is not even checked")
	assert.True(t, env.verified[0].Carried)
	assert.Equal(t, "hash-3", env.verified[1].ParentSpecHash)
}

func TestDriftApproval(t *testing.T) {
	tests := []struct {
		name string
		// decide runs 2s after the drift signal; nil lets the request expire.
		decide       func(e *driftEnv)
		resolveCheck int
		wantDecision v1alpha1.Decision
		wantMessage  string
		wantWrites   []string
		wantWrite    drift.DriftDecisionInput
		wantClosed   ResolvedDrift
	}{
		{
			name:         "approve writes a once approval and resolves the drift",
			decide:       func(e *driftEnv) { e.SignalWorkflow(SignalApprove, ApprovalSignal{Approver: "alice"}) },
			resolveCheck: 1_000_000,
			wantDecision: v1alpha1.DecisionApproved,
			wantWrites:   []string{"approval"},
			wantWrite: drift.DriftDecisionInput{Parent: drift.DriftObject(driftParent),
				Child: drift.DriftObject(driftSignal("a1").Child), Generation: 3},
			wantClosed: ResolvedDrift{ID: "a1", Reason: drift.DriftApproved},
		},
		{
			name: "reject writes a rejection with the reason; the drift stays until the parent changes",
			decide: func(e *driftEnv) {
				e.SignalWorkflow(SignalReject, ApprovalSignal{Approver: "bob", Reason: "the controller is wrong"})
			},
			resolveCheck: 3,
			wantDecision: v1alpha1.DecisionRejected,
			wantMessage:  "the controller is wrong",
			wantWrites:   []string{"rejection"},
			wantWrite: drift.DriftDecisionInput{Parent: drift.DriftObject(driftParent),
				Child: drift.DriftObject(driftSignal("a1").Child), Generation: 3, Reason: "rejected by bob: the controller is wrong"},
			wantClosed: ResolvedDrift{ID: "a1", Reason: drift.DriftParentChanged},
		},
		{
			name: "the decide update works as the signals do",
			decide: func(e *driftEnv) {
				e.UpdateWorkflow(UpdateDecide, "decide-1", &testsuite.TestUpdateCallback{
					OnAccept: func() {}, OnReject: func(err error) { panic(err) }, OnComplete: func(any, error) {},
				}, DecideRequest{Approved: true, Approver: "carol"})
			},
			resolveCheck: 1_000_000,
			wantDecision: v1alpha1.DecisionApproved,
			wantWrites:   []string{"approval"},
			wantWrite: drift.DriftDecisionInput{Parent: drift.DriftObject(driftParent),
				Child: drift.DriftObject(driftSignal("a1").Child), Generation: 3},
			wantClosed: ResolvedDrift{ID: "a1", Reason: drift.DriftApproved},
		},
		{
			name:         "an expired request writes nothing; the drift stays until the parent changes",
			resolveCheck: 200, // 1000s: after the 10m request expired
			wantDecision: v1alpha1.DecisionExpired,
			wantClosed:   ResolvedDrift{ID: "a1", Reason: drift.DriftParentChanged},
		},
		{
			name:         "a drift that resolves first supersedes its request",
			resolveCheck: 1,
			wantDecision: v1alpha1.DecisionExpired,
			wantMessage:  "superseded: the drift resolved: ParentChanged",
			wantClosed:   ResolvedDrift{ID: "a1", Reason: drift.DriftParentChanged},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			env := newDriftEnv(t, resolveAt(tt.resolveCheck, drift.DriftParentChanged))
			rars, decisions, writes := env.withApprovals()
			start := env.Now()
			env.signalAt(0, askingSignal("a1"))
			if tt.decide != nil {
				env.RegisterDelayedCallback(func() { tt.decide(env) }, 2*time.Second)
			}
			env.ExecuteWorkflow(DriftWorkflow, DriftInput{Parent: driftParent})
			res := env.result(t)

			require.Len(t, *rars, 1)
			rar := (*rars)[0]
			assert.Equal(t, DriftApprovalRequestName("a1", start), rar.Name)
			assert.Equal(t, fmt.Sprintf("drift-a1-%d", start.Unix()), rar.Name)
			assert.Equal(t, "shop", rar.Namespace)
			assert.Equal(t, v1alpha1.ObjectRef{APIVersion: "apps/v1", Kind: "Deployment", Namespace: "shop", Name: "web"}, rar.Subject)
			assert.Equal(t, "uid-web", rar.SubjectUID)
			assert.Equal(t, DriftApprovalAction, rar.Context.Action)
			assert.Equal(t, v1alpha1.ObjectRef{APIVersion: "apps/v1", Kind: "ReplicaSet", Namespace: "shop", Name: "web-a1"}, rar.Context.Target)
			assert.Contains(t, rar.Context.Reason, "wants to update ReplicaSet web-a1 while Deployment web (generation 3) has not changed")

			require.Len(t, *decisions, 1)
			assert.Equal(t, rar.Name, (*decisions)[0].Name)
			assert.Equal(t, tt.wantDecision, (*decisions)[0].Decision.Decision)
			if tt.wantMessage != "" {
				assert.Equal(t, tt.wantMessage, (*decisions)[0].Decision.Message)
			}
			assert.Equal(t, tt.wantWrites, env.writes)
			if len(tt.wantWrites) > 0 {
				want := tt.wantWrite
				want.ApprovalRequest = rar.Name // the gate finds the decision on it
				assert.Equal(t, []drift.DriftDecisionInput{want}, *writes)
			}
			assert.Equal(t, []ResolvedDrift{tt.wantClosed}, res.Closed)
			assert.Equal(t, []string{"a1/Detected", "a1/Resolved"}, env.phases(t))
		})
	}
}

func TestDriftApprovalsAreAskedOneAtATime(t *testing.T) {
	env := newDriftEnv(t, resolveAt(1_000_000, drift.DriftParentChanged))
	rars, _, writes := env.withApprovals()
	start := env.Now()
	env.signalAt(0, askingSignal("a1"))
	env.signalAt(time.Second, askingSignal("b2"))
	// The first approval decides the open request, a1's; the second then decides b2's.
	env.RegisterDelayedCallback(func() { env.SignalWorkflow(SignalApprove, ApprovalSignal{Approver: "alice"}) }, 2*time.Second)
	env.RegisterDelayedCallback(func() {
		env.SignalWorkflow(SignalApprove, ApprovalSignal{Approver: "alice", Request: DriftApprovalRequestName("b2", start.Add(2*time.Second))})
	}, 3*time.Second)
	env.ExecuteWorkflow(DriftWorkflow, DriftInput{Parent: driftParent})
	res := env.result(t)
	require.Len(t, *rars, 2)
	assert.Equal(t, DriftApprovalRequestName("a1", start), (*rars)[0].Name)
	assert.Equal(t, DriftApprovalRequestName("b2", start.Add(2*time.Second)), (*rars)[1].Name, "b2 is asked once a1 is decided")
	require.Len(t, *writes, 2)
	assert.Equal(t, "web-a1", (*writes)[0].Child.Name)
	assert.Equal(t, "web-b2", (*writes)[1].Child.Name)
	assert.Equal(t, []ResolvedDrift{{ID: "a1", Reason: drift.DriftApproved}, {ID: "b2", Reason: drift.DriftApproved}}, res.Closed)
}

func TestDriftContinuedRunAsksForCarriedDrifts(t *testing.T) {
	env := newDriftEnv(t, resolveAt(1_000_000, drift.DriftParentChanged))
	rars, _, writes := env.withApprovals()
	env.RegisterDelayedCallback(func() { env.SignalWorkflow(SignalApprove, ApprovalSignal{Approver: "alice"}) }, 2*time.Second)
	env.ExecuteWorkflow(DriftWorkflow, DriftInput{Parent: driftParent, Open: []OpenDrift{{Signal: askingSignal("a1")}}})
	res := env.result(t)
	require.Len(t, *rars, 1)
	require.Len(t, *writes, 1)
	assert.Equal(t, []ResolvedDrift{{ID: "a1", Reason: drift.DriftApproved}}, res.Closed)
	assert.Equal(t, []string{"a1/Resolved"}, env.phases(t), "Detected was posted by the earlier run")
}

func TestDriftContinuesAsNewWhileAnApprovalIsOpenAndTheNextRunResumesIt(t *testing.T) {
	env := newDriftEnv(t, resolveAt(1_000_000, drift.DriftParentChanged))
	rars, decisions, _ := env.withApprovals()
	start := env.Now()
	env.signalAt(0, askingSignal("a1"))
	env.signalAt(time.Second, askingSignal("b2"))
	// Polling every 5s through a long wait: Temporal suggests continuing as new.
	env.RegisterDelayedCallback(func() { env.SetContinueAsNewSuggested(true) }, time.Minute)
	env.ExecuteWorkflow(DriftWorkflow, DriftInput{Parent: driftParent})

	require.True(t, env.IsWorkflowCompleted())
	var can *workflow.ContinueAsNewError
	require.ErrorAs(t, env.GetWorkflowError(), &can)
	var next DriftInput
	require.NoError(t, converter.GetDefaultDataConverter().FromPayloads(can.Input, &next))
	name := DriftApprovalRequestName("a1", start)
	require.Len(t, *rars, 1)
	assert.Empty(t, *decisions, "the open request is neither decided nor closed")
	require.Len(t, next.Open, 2)
	assert.Equal(t, name, next.Open[0].ApprovalRequest)
	assert.Equal(t, (*rars)[0].RequiredBy, next.Open[0].ApprovalRequiredBy)
	assert.Empty(t, next.Open[1].ApprovalRequest, "b2 waits for its turn in the next run")

	// The next run waits on the same request, and a decision sent to it lands.
	env2 := newDriftEnv(t, resolveAt(1_000_000, drift.DriftParentChanged))
	rars2, decisions2, writes2 := env2.withApprovals()
	env2.RegisterDelayedCallback(func() {
		env2.SignalWorkflow(SignalApprove, ApprovalSignal{Approver: "alice", Request: name, Namespace: "shop"})
	}, 2*time.Second)
	env2.RegisterDelayedCallback(func() { env2.SignalWorkflow(SignalApprove, ApprovalSignal{Approver: "alice"}) }, 3*time.Second)
	env2.ExecuteWorkflow(DriftWorkflow, next)
	res := env2.result(t)
	require.Len(t, *rars2, 1, "only b2's request is created")
	assert.Equal(t, "web-b2", (*rars2)[0].Context.Target.Name)
	require.Len(t, *decisions2, 2)
	assert.Equal(t, name, (*decisions2)[0].Name)
	assert.Equal(t, v1alpha1.DecisionApproved, (*decisions2)[0].Decision.Decision)
	require.Len(t, *writes2, 2)
	assert.Equal(t, []ResolvedDrift{{ID: "a1", Reason: drift.DriftApproved}, {ID: "b2", Reason: drift.DriftApproved}}, res.Closed)
}

func TestDriftResumedRequestExpiresOnItsOriginalTime(t *testing.T) {
	env := newDriftEnv(t, resolveAt(50, drift.DriftParentChanged)) // after the expiry
	rars, decisions, _ := env.withApprovals()
	start := env.Now()
	open := OpenDrift{Signal: askingSignal("a1"), ApprovalRequest: "drift-a1-1", ApprovalRequiredBy: start.Add(3 * time.Minute)}
	env.ExecuteWorkflow(DriftWorkflow, DriftInput{Parent: driftParent, Open: []OpenDrift{open}})
	require.True(t, env.IsWorkflowCompleted())
	assert.Empty(t, *rars)
	require.Len(t, *decisions, 1)
	assert.Equal(t, "drift-a1-1", (*decisions)[0].Name)
	assert.Equal(t, v1alpha1.DecisionExpired, (*decisions)[0].Decision.Decision)
	assert.True(t, start.Add(3*time.Minute).Equal((*decisions)[0].Decision.At), "expired at the carried requiredBy")
}
