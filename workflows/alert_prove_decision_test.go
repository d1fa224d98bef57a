package workflows

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/remedy-dev/remedy/activities/alerts"
	"github.com/remedy-dev/remedy/api/v1alpha1"
)

func TestDecideProof(t *testing.T) {
	steps := []v1alpha1.RemediationStep{webRestart("restart")}
	undo := alerts.LadderStep{Name: "undo", Steps: []v1alpha1.RemediationStep{webRestart("undo")}}
	for _, tc := range []struct {
		name   string
		spec   v1alpha1.RemediationRuleSpec
		ladder []alerts.LadderStep
		want   proofPlan
	}{
		{"hold only: no verification, no join", v1alpha1.RemediationRuleSpec{HoldFor: v1alpha1.DurationOf(2 * time.Minute)}, nil,
			proofPlan{Hold: 2 * time.Minute, Rungs: []alerts.LadderStep{{Name: "template", Steps: steps}}}},
		{"verify without window or onFailure: 10m, None", v1alpha1.RemediationRuleSpec{Verify: &v1alpha1.VerifySpec{}}, nil,
			proofPlan{Verify: true, Join: true, Window: 10 * time.Minute, OnFailure: v1alpha1.VerifyNone, Rungs: []alerts.LadderStep{{Name: "template", Steps: steps}}}},
		{"a ladder escalates by default", v1alpha1.RemediationRuleSpec{Verify: &v1alpha1.VerifySpec{Window: v1alpha1.DurationOf(time.Minute)}}, []alerts.LadderStep{undo},
			proofPlan{Verify: true, Join: true, Window: time.Minute, OnFailure: v1alpha1.VerifyEscalate, Rungs: []alerts.LadderStep{{Name: "template", Steps: steps}, undo}}},
		{"onFailure as written", v1alpha1.RemediationRuleSpec{Verify: &v1alpha1.VerifySpec{OnFailure: v1alpha1.VerifyPage}}, []alerts.LadderStep{undo},
			proofPlan{Verify: true, Join: true, Window: 10 * time.Minute, OnFailure: v1alpha1.VerifyPage, Rungs: []alerts.LadderStep{{Name: "template", Steps: steps}, undo}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.want, decideProof(alerts.AlertPlan{Steps: steps, Spec: tc.spec, Ladder: tc.ladder}))
		})
	}
}

func TestProves(t *testing.T) {
	assert.False(t, proves(v1alpha1.RemediationRuleSpec{}), "a rule without the new fields keeps the old path")
	assert.True(t, proves(v1alpha1.RemediationRuleSpec{HoldFor: v1alpha1.DurationOf(time.Minute)}))
	assert.True(t, proves(v1alpha1.RemediationRuleSpec{Verify: &v1alpha1.VerifySpec{}}))
	assert.True(t, proves(v1alpha1.RemediationRuleSpec{Escalation: []v1alpha1.EscalationStep{{Name: "x", Page: true}}}))
}

func TestJudge(t *testing.T) {
	rungs := []alerts.LadderStep{{Name: "template"}, {Name: "undo"}, {Name: "oncall", Page: true}}
	plan := func(f v1alpha1.VerifyFailure, rungs ...alerts.LadderStep) proofPlan {
		return proofPlan{Verify: true, Window: time.Minute, OnFailure: f, Rungs: rungs}
	}
	for _, tc := range []struct {
		name    string
		p       proofPlan
		rung    int
		firing  []string
		unknown bool
		reason  string
		next    int
		page    bool
	}{
		{"resolved: Verified", plan(v1alpha1.VerifyEscalate, rungs...), 0, nil, false, v1alpha1.ReasonVerified, 0, false},
		{"unreadable Alertmanager never verifies, never escalates", plan(v1alpha1.VerifyEscalate, rungs...), 0, nil, true, v1alpha1.ReasonIneffective, 0, false},
		{"None stops", plan(v1alpha1.VerifyNone, rungs...), 0, []string{"a"}, false, v1alpha1.ReasonIneffective, 0, false},
		{"Page pages", plan(v1alpha1.VerifyPage, rungs[0]), 0, []string{"a"}, false, v1alpha1.ReasonIneffective, 0, true},
		{"Escalate to the next step", plan(v1alpha1.VerifyEscalate, rungs...), 0, []string{"a"}, false, v1alpha1.ReasonEscalated, 1, false},
		{"Escalate to the page step", plan(v1alpha1.VerifyEscalate, rungs...), 1, []string{"a"}, false, v1alpha1.ReasonEscalated, 2, false},
		{"ladder exhausted", plan(v1alpha1.VerifyEscalate, rungs[:2]...), 1, []string{"a"}, false, v1alpha1.ReasonLadderExhausted, 0, false},
		{"a joined alert still firing is a failure too", plan(v1alpha1.VerifyNone, rungs[0]), 0, []string{"joined"}, false, v1alpha1.ReasonIneffective, 0, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v := judge(tc.p, tc.rung, tc.firing, tc.unknown)
			assert.Equal(t, tc.reason, v.Reason)
			assert.Equal(t, tc.next, v.Next)
			assert.Equal(t, tc.page, v.Page)
			if tc.reason == v1alpha1.ReasonVerified {
				assert.Equal(t, v1alpha1.AlertVerified, v.Phase)
			} else {
				assert.Equal(t, v1alpha1.AlertIneffective, v.Phase)
			}
		})
	}
}

// A joining request of the same rule and target joins the open run, held
// or queued ahead of it; anything else runs (or queues) on its own.
func TestGuardStateJoins(t *testing.T) {
	now := time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC)
	base := AcquireRequest{Rule: "crash", Target: "Deployment/web", MaxConcurrent: 5, Cooldown: time.Minute, BreakerRuns: 3, BreakerWindow: time.Hour, Slots: 5, Join: true}
	req := func(id string, mod func(*AcquireRequest)) AcquireRequest {
		r := base
		r.AlertID, r.Nonce = "alert/shop/crash/"+id, "n-"+id
		if mod != nil {
			mod(&r)
		}
		return r
	}
	for _, tc := range []struct {
		name   string
		holder AcquireRequest
		queued bool
		second AcquireRequest
		joined string
	}{
		{"same rule and workload, held: joins", req("a", nil), false, req("b", nil), "alert/shop/crash/a"},
		{"same rule and workload, queued ahead: joins", req("a", nil), true, req("b", nil), "alert/shop/crash/a"},
		{"another workload: its own run", req("a", nil), false, req("b", func(r *AcquireRequest) { r.Target = "Deployment/api" }), ""},
		{"another rule: its own run", req("a", nil), false, req("b", func(r *AcquireRequest) { r.Rule = "other" }), ""},
		{"the holder does not verify: no join", req("a", func(r *AcquireRequest) { r.Join = false }), false, req("b", nil), ""},
		{"the new alert's rule does not verify: no join", req("a", nil), false, req("b", func(r *AcquireRequest) { r.Join = false }), ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := GuardState{Namespace: "shop"}
			if tc.queued {
				// The holder waits out its target's cooldown.
				s.Ends = map[string]time.Time{base.Target: now}
			}
			s.add(tc.holder)
			out, _ := s.decide(now)
			assert.Len(t, out, map[bool]int{false: 1, true: 0}[tc.queued])
			s.add(tc.second)
			out, _ = s.decide(now)
			if tc.joined == "" {
				for _, a := range out {
					assert.Empty(t, a.permit.Joined)
				}
				return
			}
			require.Len(t, out, 1)
			assert.Equal(t, tc.joined, out[0].permit.Joined)
			assert.False(t, out[0].permit.Granted)
			assert.NotContains(t, s.Queue, tc.second, "a joined request is not queued")
			assert.Len(t, s.Runs[base.Target], map[bool]int{false: 1, true: 0}[tc.queued], "a join is no run for the breaker")
		})
	}
}

// The next rung of a ladder continues the run's permit: the target stays
// its own (no cooldown between rungs), each rung counts for the circuit
// breaker, and the breaker ends the ladder and the permit.
func TestGuardStateProceeds(t *testing.T) {
	now := time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC)
	r := AcquireRequest{AlertID: "alert/shop/crash/a", Nonce: "n1", Rule: "crash", Target: "Deployment/web", MaxConcurrent: 5,
		Cooldown: time.Hour, BreakerRuns: 3, BreakerWindow: time.Hour, Slots: 5, Join: true}
	s := GuardState{Namespace: "shop"}
	_, ok := s.proceed(r, now)
	assert.False(t, ok, "a request that continues nothing is an ordinary request")
	s.add(r)
	out, _ := s.decide(now)
	require.Len(t, out, 1)
	require.True(t, out[0].permit.Granted)

	forged := r
	forged.Nonce, forged.Continues = "x", "not-n1"
	_, ok = s.proceed(forged, now)
	assert.False(t, ok, "only the holder's nonce continues its permit")

	next := r
	next.Nonce, next.Continues = "n2", "n1"
	p, ok := s.proceed(next, now.Add(time.Minute))
	require.True(t, ok)
	assert.True(t, p.Granted, "no cooldown between rungs")
	assert.Equal(t, []AcquireRequest{next}, s.Running, "the permit is the new rung's")
	assert.Len(t, s.Runs[r.Target], 2, "each rung counts for the breaker")

	third := r
	third.Nonce, third.Continues = "n3", "n2"
	p, ok = s.proceed(third, now.Add(2*time.Minute))
	require.True(t, ok)
	assert.True(t, p.Granted)

	fourth := r
	fourth.Nonce, fourth.Continues = "n4", "n3"
	p, ok = s.proceed(fourth, now.Add(3*time.Minute))
	require.True(t, ok)
	assert.False(t, p.Granted)
	assert.Equal(t, v1alpha1.ReasonCircuitOpen, p.Reason)
	assert.Empty(t, s.Running, "the breaker ends the permit")
	assert.Equal(t, now.Add(3*time.Minute), s.Ends[r.Target], "and the target's cooldown starts")
}
