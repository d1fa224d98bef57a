package v1alpha1

import (
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The tables in this file restate kausality's own annotation test cases
// (pkg/approval) as Remedy data. A row whose answer differs from
// kausality's names the departure; docs/drift.md gives the reasons.

func TestKausalityChildMatchCases(t *testing.T) {
	cm := ChildRef{"v1", "ConfigMap", "settings"}
	tests := []struct {
		name                    string
		apiVersion, kind, child string
		match                   bool
	}{
		{"exact", "v1", "ConfigMap", "settings", true},
		{"other name", "v1", "ConfigMap", "other", false},
		{"other kind", "v1", "Secret", "settings", false},
		{"other apiVersion", "apps/v1", "ConfigMap", "settings", false},
		{"any name", "v1", "ConfigMap", "*", true},
		{"any kind", "v1", "*", "settings", true},
		{"any apiVersion", "*", "ConfigMap", "settings", true},
		{"anything", "*", "*", "*", true},
		{"any name, other kind", "v1", "Secret", "*", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a := Approval{APIVersion: tt.apiVersion, Kind: tt.kind, Name: tt.child, Mode: ApprovalAlways}
			assert.Equal(t, tt.match, a.Matches(cm, Generations{Spec: 1}), "approval")
			r := Rejection{APIVersion: tt.apiVersion, Kind: tt.kind, Name: tt.child}
			assert.Equal(t, tt.match, r.Matches(cm, Generations{Spec: 1}), "rejection")
		})
	}
}

// TestKausalityApprovalValidityCases: whether a matching approval applies
// at the parent's generation, and whether pruning drops it.
func TestKausalityApprovalValidityCases(t *testing.T) {
	cm := ChildRef{"v1", "ConfigMap", "settings"}
	tests := []struct {
		name       string
		mode       ApprovalMode
		generation int64
		parent     int64
		valid      bool
		pruned     bool
	}{
		{"always, any generation", ApprovalAlways, 0, 99, true, false},
		{"always naming an old generation", ApprovalAlways, 1, 99, true, false},
		{"once at its generation", ApprovalOnce, 5, 5, true, false},
		{"once, parent moved on", ApprovalOnce, 5, 6, false, true},
		{"generation at its generation", ApprovalGeneration, 10, 10, true, false},
		{"generation, parent moved on", ApprovalGeneration, 10, 11, false, true},
		{"once for a later generation: kept until then", ApprovalOnce, 6, 5, false, false},
		{"generation for a later generation: kept until then", ApprovalGeneration, 6, 5, false, false},
		// Departure (approvals without a generation): kausality neither
		// matches nor keeps them; Remedy applies them at any generation.
		{"once without a generation", ApprovalOnce, 0, 5, true, false},
		{"generation without a generation", ApprovalGeneration, 0, 5, true, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a := Approval{APIVersion: "v1", Kind: "ConfigMap", Name: "settings", Generation: tt.generation, Mode: tt.mode}
			assert.Equal(t, tt.valid, a.Matches(cm, Generations{Spec: tt.parent}), "valid")
			assert.Equal(t, tt.pruned, a.Stale(tt.parent), "pruned")
		})
	}
}

// TestKausalityPruneCases: what a parent keeps of a list of approvals.
func TestKausalityPruneCases(t *testing.T) {
	a := func(name string, gen int64, m ApprovalMode) Approval {
		return Approval{APIVersion: "v1", Kind: "ConfigMap", Name: name, Generation: gen, Mode: m}
	}
	tests := []struct {
		name   string
		in     []Approval
		parent int64
		kept   []string
	}{
		{"nothing", nil, 5, nil},
		{"always stays", []Approval{a("always", 0, ApprovalAlways)}, 99, []string{"always"}},
		{"current generation stays", []Approval{a("current", 5, ApprovalOnce)}, 5, []string{"current"}},
		{"earlier generation goes", []Approval{a("stale", 4, ApprovalOnce)}, 5, nil},
		{"earlier generation goes, generation mode", []Approval{a("stale", 4, ApprovalGeneration)}, 5, nil},
		{"mixed", []Approval{a("always", 0, ApprovalAlways), a("current", 5, ApprovalOnce), a("stale", 3, ApprovalOnce),
			a("future", 6, ApprovalGeneration)}, 5, []string{"always", "current", "future"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var kept []string
			for _, x := range slices.DeleteFunc(slices.Clone(tt.in), func(x Approval) bool { return x.Stale(tt.parent) }) {
				kept = append(kept, x.Name)
			}
			assert.Equal(t, tt.kept, kept)
		})
	}
}

func TestKausalityRejectionGenerationCases(t *testing.T) {
	cm := ChildRef{"v1", "ConfigMap", "settings"}
	tests := []struct {
		name       string
		generation int64
		parent     int64
		active     bool
	}{
		{"no generation: always active", 0, 99, true},
		{"its generation", 5, 5, true},
		{"another generation", 5, 6, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := Rejection{APIVersion: "v1", Kind: "ConfigMap", Name: "settings", Generation: tt.generation, Reason: "no"}
			assert.Equal(t, tt.active, r.Matches(cm, Generations{Spec: tt.parent}))
		})
	}
}

// TestKausalityParseCases: the annotation values kausality's tests write.
func TestKausalityParseCases(t *testing.T) {
	t.Run("approvals", func(t *testing.T) {
		for in, n := range map[string]int{
			"":   0,
			"[]": 0,
			`[{"apiVersion":"v1","kind":"ConfigMap","name":"test","mode":"always"}]`:                             1,
			`[{"apiVersion":"v1","kind":"ConfigMap","name":"a"},{"apiVersion":"v1","kind":"Secret","name":"b"}]`: 2,
		} {
			got, err := ParseApprovals(in)
			require.NoError(t, err, in)
			assert.Len(t, got, n, in)
		}
		_, err := ParseApprovals("not json")
		assert.Error(t, err)
	})
	t.Run("rejections", func(t *testing.T) {
		got, err := ParseRejections(`[{"apiVersion":"v1","kind":"Pod","name":"test","reason":"dangerous"}]`)
		require.NoError(t, err)
		assert.Len(t, got, 1)
		got, err = ParseRejections("")
		require.NoError(t, err)
		assert.Empty(t, got)
		_, err = ParseRejections("{broken")
		assert.Error(t, err)
	})
	t.Run("freeze", func(t *testing.T) {
		f, err := ParseFreeze(`{"user":"admin@example.com","message":"incident #123","at":"2026-01-25T10:00:00Z"}`)
		require.NoError(t, err)
		assert.Equal(t, "admin@example.com", f.User)
		f, err = ParseFreeze("true")
		require.NoError(t, err)
		assert.Equal(t, &Freeze{}, f)
		for _, off := range []string{"", "false"} {
			f, err = ParseFreeze(off)
			require.NoError(t, err)
			assert.Nil(t, f, "%q is not frozen", off)
		}
		_, err = ParseFreeze("{broken")
		assert.Error(t, err)
	})
	t.Run("snooze", func(t *testing.T) {
		s, err := ParseSnooze(`{"expiry":"2026-01-25T12:00:00Z","user":"ops@example.com","message":"deploying hotfix"}`)
		require.NoError(t, err)
		assert.Equal(t, "ops@example.com", s.User)
		assert.Equal(t, time.Date(2026, 1, 25, 12, 0, 0, 0, time.UTC), s.Expiry.UTC())
		s, err = ParseSnooze("2026-01-25T12:00:00Z")
		require.NoError(t, err)
		assert.Empty(t, s.User)
		assert.True(t, s.Active(s.Expiry.Add(-time.Second)), "before expiry")
		assert.False(t, s.Active(s.Expiry.Add(time.Second)), "after expiry")
		s, err = ParseSnooze("")
		require.NoError(t, err)
		assert.Nil(t, s)
		_, err = ParseSnooze("{broken")
		assert.Error(t, err)
	})
}

// TestGenerationNamedByMetadata: Deployments bump metadata.generation on
// annotation edits, so a person copying it from kubectl names a generation
// ahead of the last spec change. Departure: kausality compares with
// metadata.generation; Remedy compares with the spec-change generation and
// accepts any metadata.generation reached since it.
func TestGenerationNamedByMetadata(t *testing.T) {
	cm := ChildRef{"v1", "ConfigMap", "settings"}
	at := Generations{Spec: 3, Metadata: 7}
	tests := []struct {
		name       string
		generation int64
		current    bool
		pruned     bool
	}{
		{"the spec-change generation", 3, true, false},
		{"a metadata.generation since the spec change", 5, true, false},
		{"metadata.generation now", 7, true, false},
		{"ahead of metadata.generation: kept for a later spec change", 8, false, false},
		{"before the spec change", 2, false, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.current, at.Current(tt.generation))
			for _, mode := range []ApprovalMode{ApprovalOnce, ApprovalGeneration} {
				a := Approval{APIVersion: "v1", Kind: "ConfigMap", Name: "settings", Generation: tt.generation, Mode: mode}
				assert.Equal(t, tt.current, a.Matches(cm, at), "approval, %s", mode)
				assert.Equal(t, tt.pruned, a.Stale(at.Spec), "pruned, %s", mode)
			}
			r := Rejection{APIVersion: "v1", Kind: "ConfigMap", Name: "settings", Generation: tt.generation}
			assert.Equal(t, tt.current, r.Matches(cm, at), "rejection")
		})
	}
	assert.False(t, Generations{Spec: 3}.Current(4), "metadata.generation unknown: the spec generation only")
}

// TestKausalityTraceLabelCases: which annotations become hop labels
// (kausality's pkg/trace ExtractTraceLabels cases).
func TestKausalityTraceLabelCases(t *testing.T) {
	tests := []struct {
		name        string
		annotations map[string]string
		want        map[string]string
	}{
		{"nil annotations", nil, nil},
		{"no trace labels", map[string]string{"foo": "bar"}, nil},
		{"one label", map[string]string{"kausality.io/trace-ticket": "JIRA-123"}, map[string]string{"ticket": "JIRA-123"}},
		{"several labels", map[string]string{"kausality.io/trace-ticket": "JIRA-123", "kausality.io/trace-env": "prod"},
			map[string]string{"ticket": "JIRA-123", "env": "prod"}},
		{"the trace itself is no label", map[string]string{"kausality.io/trace-ticket": "JIRA-123", "kausality.io/trace": "[]", "other/annotation": "value"},
			map[string]string{"ticket": "JIRA-123"}},
		// The prefix alone has no key: ignored, the rest extracted.
		{"exact prefix only, empty key skipped", map[string]string{"kausality.io/trace-foo": "bar", "kausality.io/tracefoo": "no",
			"kausality.io/trace-": "empty key skipped", "other.io/trace-ticket": "wrong prefix"}, map[string]string{"foo": "bar"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := TraceLabels(tt.annotations)
			require.NoError(t, err)
			assert.Equal(t, tt.want, got)
		})
	}
}
