package v1alpha1

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestParseApprovals(t *testing.T) {
	tests := []struct {
		name, in string
		want     []Approval
		err      string
	}{
		{name: "empty", in: ""},
		{name: "empty array", in: "[]"},
		{name: "all modes", in: `[{"apiVersion":"apps/v1","kind":"ReplicaSet","name":"web-1","generation":3,"mode":"once"},` +
			`{"apiVersion":"*","kind":"*","name":"*","mode":"always"},{"apiVersion":"v1","kind":"Pod","name":"p","generation":2,"mode":"generation"}]`,
			want: []Approval{{"apps/v1", "ReplicaSet", "web-1", 3, ApprovalOnce}, {"*", "*", "*", 0, ApprovalAlways}, {"v1", "Pod", "p", 2, ApprovalGeneration}}},
		{name: "missing mode is once", in: `[{"apiVersion":"v1","kind":"Pod","name":"p","generation":1}]`,
			want: []Approval{{"v1", "Pod", "p", 1, ApprovalOnce}}},
		{name: "not json", in: "yes", err: "want a JSON array"},
		{name: "object", in: `{"apiVersion":"v1"}`, err: "want a JSON array"},
		{name: "unknown field", in: `[{"apiVersion":"v1","kind":"Pod","name":"p","mdoe":"always"}]`, err: `unknown field "mdoe"`},
		{name: "bad mode", in: `[{"apiVersion":"v1","kind":"Pod","name":"p","mode":"forever"}]`, err: `approvals[0]: mode "forever"`},
		{name: "once without generation", in: `[{"apiVersion":"v1","kind":"Pod","name":"p","mode":"once"}]`,
			want: []Approval{{APIVersion: "v1", Kind: "Pod", Name: "p", Mode: ApprovalOnce}}},
		{name: "negative generation", in: `[{"apiVersion":"v1","kind":"Pod","name":"p","generation":-2,"mode":"once"}]`, err: "negative"},
		{name: "missing name", in: `[{"apiVersion":"v1","kind":"Pod","mode":"always"}]`, err: "name is required"},
		{name: "wrong type", in: `[{"apiVersion":"v1","kind":"Pod","name":"p","generation":"3"}]`, err: `field "generation"`},
		{name: "trailing data", in: `[] []`, err: "unexpected data"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParseApprovals(tt.in)
			if tt.err != "" {
				require.Error(t, err)
				assert.Contains(t, err.Error(), tt.err)
				assert.Contains(t, err.Error(), AnnotationApprovals)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tt.want, got)
			back, err := ParseApprovals(FormatApprovals(got))
			require.NoError(t, err)
			assert.Equal(t, got, back)
		})
	}
}

func TestApprovalMatches(t *testing.T) {
	rs := ChildRef{"apps/v1", "ReplicaSet", "web-1"}
	tests := []struct {
		name  string
		a     Approval
		gen   int64
		match bool
		stale bool
	}{
		{"exact once", Approval{"apps/v1", "ReplicaSet", "web-1", 3, ApprovalOnce}, 3, true, false},
		{"once other generation", Approval{"apps/v1", "ReplicaSet", "web-1", 2, ApprovalOnce}, 3, false, true},
		{"generation", Approval{"apps/v1", "ReplicaSet", "web-1", 3, ApprovalGeneration}, 3, true, false},
		{"generation moved on", Approval{"apps/v1", "ReplicaSet", "web-1", 3, ApprovalGeneration}, 4, false, true},
		{"generation not reached yet: kept", Approval{"apps/v1", "ReplicaSet", "web-1", 5, ApprovalGeneration}, 4, false, false},
		{"always any generation", Approval{"apps/v1", "ReplicaSet", "web-1", 0, ApprovalAlways}, 9, true, false},
		{"once without generation: any generation", Approval{"apps/v1", "ReplicaSet", "web-1", 0, ApprovalOnce}, 9, true, false},
		{"wildcards", Approval{"*", "*", "*", 0, ApprovalAlways}, 1, true, false},
		{"other name", Approval{"apps/v1", "ReplicaSet", "web-2", 0, ApprovalAlways}, 1, false, false},
		{"other kind", Approval{"apps/v1", "Deployment", "*", 0, ApprovalAlways}, 1, false, false},
		{"other apiVersion", Approval{"apps/v1beta1", "*", "*", 0, ApprovalAlways}, 1, false, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.match, tt.a.Matches(rs, Generations{Spec: tt.gen}))
			assert.Equal(t, tt.stale, tt.a.Stale(tt.gen))
		})
	}
}

func TestParseRejections(t *testing.T) {
	got, err := ParseRejections(`[{"apiVersion":"apps/v1","kind":"ReplicaSet","name":"*","reason":"no"},{"apiVersion":"v1","kind":"Pod","name":"p","generation":4,"reason":"later"}]`)
	require.NoError(t, err)
	assert.Equal(t, []Rejection{{"apps/v1", "ReplicaSet", "*", 0, "no"}, {"v1", "Pod", "p", 4, "later"}}, got)
	rs := ChildRef{"apps/v1", "ReplicaSet", "web-1"}
	assert.True(t, got[0].Matches(rs, Generations{Spec: 7}), "generation 0 matches any")
	pod := ChildRef{"v1", "Pod", "p"}
	assert.True(t, got[1].Matches(pod, Generations{Spec: 4}))
	assert.False(t, got[1].Matches(pod, Generations{Spec: 5}))

	for in, want := range map[string]string{
		`[{"apiVersion":"v1","kind":"Pod","name":"p","generation":-1}]`: "negative",
		`[{"apiVersion":"v1","name":"p"}]`:                              "kind is required",
		`[{"apiVersion":"v1","kind":"Pod","name":"p","why":"x"}]`:       `unknown field "why"`,
		`nope`: "want a JSON array",
	} {
		_, err := ParseRejections(in)
		require.Error(t, err, in)
		assert.Contains(t, err.Error(), want)
		assert.Contains(t, err.Error(), AnnotationRejections)
	}
}

func TestParseFreeze(t *testing.T) {
	at := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	tests := []struct {
		name, in string
		want     *Freeze
		err      string
	}{
		{name: "empty", in: ""},
		{name: "legacy", in: "true", want: &Freeze{}},
		{name: "json", in: `{"user":"alice","message":"incident 42","at":"2026-03-01T13:00:00+01:00"}`, want: &Freeze{"alice", "incident 42", at}},
		{name: "empty object", in: `{}`, want: &Freeze{}},
		{name: "false is not frozen", in: "false"},
		{name: "other words", in: "yes", err: "want a JSON object"},
		{name: "bad time", in: `{"at":"yesterday"}`, err: "at: \"yesterday\" is not an RFC3339 time"},
		{name: "unknown field", in: `{"reason":"x"}`, err: `unknown field "reason"`},
		{name: "year out of range", in: `{"at":"9999-12-31T23:00:00-02:00"}`, err: "out of range"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParseFreeze(tt.in)
			if tt.err != "" {
				require.Error(t, err)
				assert.Contains(t, err.Error(), tt.err)
				assert.Contains(t, err.Error(), AnnotationFreeze)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tt.want, got)
			back, err := ParseFreeze(FormatFreeze(got))
			require.NoError(t, err)
			assert.Equal(t, got, back)
		})
	}
	assert.Equal(t, "frozen at 2026-03-01T12:00:00Z: incident 42", Freeze{"alice", "incident 42", at}.String(), "the user stays out")
	assert.Equal(t, "frozen", Freeze{}.String())
}

func TestParseSnooze(t *testing.T) {
	exp := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	tests := []struct {
		name, in string
		want     *Snooze
		err      string
	}{
		{name: "empty", in: ""},
		{name: "legacy", in: "2026-03-01T12:00:00Z", want: &Snooze{Expiry: exp}},
		{name: "json", in: `{"expiry":"2026-03-01T12:00:00Z","user":"bob","message":"known"}`, want: &Snooze{exp, "bob", "known"}},
		{name: "json without expiry", in: `{"user":"bob"}`, err: "expiry is required"},
		{name: "not a time", in: "tomorrow", err: "RFC3339"},
		{name: "unknown field", in: `{"expiry":"2026-03-01T12:00:00Z","until":"x"}`, err: `unknown field "until"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParseSnooze(tt.in)
			if tt.err != "" {
				require.Error(t, err)
				assert.Contains(t, err.Error(), tt.err)
				assert.Contains(t, err.Error(), AnnotationSnooze)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tt.want, got)
			back, err := ParseSnooze(FormatSnooze(got))
			require.NoError(t, err)
			assert.Equal(t, got, back)
		})
	}
	s := Snooze{Expiry: exp}
	assert.True(t, s.Active(exp.Add(-time.Second)))
	assert.False(t, s.Active(exp))
}

func TestParseMode(t *testing.T) {
	for in, want := range map[string]Mode{"": "", "log": ModeLog, "enforce": ModeEnforce} {
		got, err := ParseMode(in)
		require.NoError(t, err)
		assert.Equal(t, want, got)
	}
	_, err := ParseMode("Enforce")
	require.Error(t, err)
	assert.Contains(t, err.Error(), AnnotationMode)
}

func TestTrace(t *testing.T) {
	ts := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	in := `[{"apiVersion":"apps/v1","kind":"Deployment","name":"web","generation":2,"user":"alice","timestamp":"2026-03-01T12:00:00Z","labels":{"ticket":"T-1"}},` +
		`{"apiVersion":"apps/v1","kind":"ReplicaSet","name":"web-1","generation":1,"user":"system:serviceaccount:kube-system:deployment-controller","requestUID":"u1","timestamp":"2026-03-01T12:00:00Z"}]`
	got, err := ParseTrace(in)
	require.NoError(t, err)
	want := Trace{
		{APIVersion: "apps/v1", Kind: "Deployment", Name: "web", Generation: 2, User: "alice", Timestamp: ts, Labels: map[string]string{"ticket": "T-1"}},
		{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "web-1", Generation: 1, User: "system:serviceaccount:kube-system:deployment-controller", Timestamp: ts, RequestUID: "u1"},
	}
	assert.Equal(t, want, got)
	assert.JSONEq(t, in, FormatTrace(got))

	for in, msg := range map[string]string{
		`[{"apiVersion":"v1","kind":"Pod","name":"p","generation":1,"user":"u"}]`:                                          "timestamp is required",
		`[{"apiVersion":"v1","kind":"Pod","name":"p","generation":1,"user":"u","timestamp":"x"}]`:                          "timestamp:",
		`[{"apiVersion":"v1","kind":"Pod","name":"p","generation":1,"user":"u","timestamp":"2026-03-01T12:00:00Z","x":1}]`: `unknown field "x"`,
		`{}`: "want a JSON array",
	} {
		_, err := ParseTrace(in)
		require.Error(t, err, in)
		assert.Contains(t, err.Error(), msg)
	}
}

func TestTraceExtendCaps(t *testing.T) {
	var tr Trace
	for i := range 15 {
		tr = tr.Extend(Hop{Name: "h", Generation: int64(i)})
	}
	require.Len(t, tr, MaxTraceHops)
	assert.Equal(t, int64(0), tr[0].Generation, "origin kept")
	assert.Equal(t, int64(6), tr[1].Generation, "oldest non-origin hops dropped")
	assert.Equal(t, int64(14), tr[9].Generation, "newest last")

	base := Trace{{Name: "a"}, {Name: "b"}}
	ext := base.Extend(Hop{Name: "c"})
	ext[0].Name = "changed"
	assert.Equal(t, "a", base[0].Name, "Extend does not alias its receiver")
}

func TestTraceLabels(t *testing.T) {
	got, err := TraceLabels(map[string]string{"kausality.io/trace-ticket": "T-1", "kausality.io/trace": "[]", "other": "x"})
	require.NoError(t, err)
	assert.Equal(t, map[string]string{"ticket": "T-1"}, got)

	for k, v := range map[string]string{"kausality.io/trace-a": "line\nbreak", "kausality.io/trace-b": string(make([]byte, 2000))} {
		_, err := TraceLabels(map[string]string{k: v})
		require.Error(t, err, k)
		assert.Contains(t, err.Error(), k)
	}
	_, err = ParseTraceLabel("kausality.io/trace", "[]")
	assert.Error(t, err, "not a trace label")
}

func TestUserHash(t *testing.T) {
	h := UserHash("system:serviceaccount:kube-system:deployment-controller", "")
	assert.Len(t, h, 5)
	assert.Equal(t, h, UserHash("system:serviceaccount:kube-system:deployment-controller", "other-uid"), "name wins over UID")
	assert.Equal(t, UserHash("", "uid-1"), UserHash("uid-1", ""), "UID used when the name is empty")
	assert.NotEqual(t, UserHash("alice", ""), UserHash("bob", ""))
	// sha256("alice") starts 2bd806c9 = 735577801 = "c5xzgp" in base36.
	assert.Equal(t, "c5xzg", UserHash("alice", ""))
	// sha256("user-399") is small enough that base36 gives 4 digits: left-padded.
	assert.Equal(t, "05w1b", UserHash("user-399", ""))
}

func TestUserHashList(t *testing.T) {
	hs := ParseUserHashes(" a, b,,c ")
	assert.Equal(t, []string{"a", "b", "c"}, hs)
	same, changed := AddUserHash(hs, "b")
	assert.False(t, changed)
	assert.Equal(t, hs, same)
	full := []string{"1", "2", "3", "4", "5"}
	got, changed := AddUserHash(full, "6")
	assert.True(t, changed)
	assert.Equal(t, []string{"2", "3", "4", "5", "6"}, got, "oldest dropped when full")
	assert.Equal(t, []string{"1", "2", "3", "4", "5"}, full, "input not modified")
	assert.Equal(t, "2,3,4,5,6", FormatUserHashes(got))
	assert.Nil(t, ParseUserHashes(""))
}
