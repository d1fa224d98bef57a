package workflows

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/temporal"

	"github.com/remedy-dev/remedy/activities/drift"
	kv1 "github.com/remedy-dev/remedy/api/kausality/v1alpha1"
	"github.com/remedy-dev/remedy/api/v1alpha1"
)

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

// Long because it is a table: one row per way a signal opens, repeats, snoozes or approves a drift.
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
