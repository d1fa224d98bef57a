package v1alpha1

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// Each target checks that parsing never panics and that whatever parses
// survives Format and parses back to the same value.

func FuzzParseApprovals(f *testing.F) {
	for _, s := range []string{"", "[]", "null", "x",
		`[{"apiVersion":"apps/v1","kind":"ReplicaSet","name":"web-1","generation":3,"mode":"once"}]`,
		`[{"apiVersion":"*","kind":"*","name":"*","mode":"always"},{"apiVersion":"v1","kind":"Pod","name":"p","generation":2}]`,
		`[{"apiVersion":"v1","kind":"Pod","name":"p","generation":2,"mode":"generation","x":1}]`,
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		got, err := ParseApprovals(s)
		if err != nil {
			return
		}
		back, err := ParseApprovals(FormatApprovals(got))
		require.NoError(t, err)
		require.Equal(t, got, back)
	})
}

func FuzzParseRejections(f *testing.F) {
	for _, s := range []string{"", "[]", "[1]",
		`[{"apiVersion":"apps/v1","kind":"ReplicaSet","name":"*","reason":"no"}]`,
		`[{"apiVersion":"v1","kind":"Pod","name":"p","generation":4,"reason":"\u003cb\u003e"}]`,
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		got, err := ParseRejections(s)
		if err != nil {
			return
		}
		back, err := ParseRejections(FormatRejections(got))
		require.NoError(t, err)
		require.Equal(t, got, back)
	})
}

func FuzzParseFreeze(f *testing.F) {
	for _, s := range []string{"", "true", "false", "{}",
		`{"user":"alice","message":"incident","at":"2026-03-01T12:00:00Z"}`,
		`{"at":"2026-03-01T12:00:00.123456789+05:30"}`,
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		got, err := ParseFreeze(s)
		if err != nil {
			return
		}
		back, err := ParseFreeze(FormatFreeze(got))
		require.NoError(t, err)
		require.Equal(t, got, back)
	})
}

func FuzzParseSnooze(f *testing.F) {
	for _, s := range []string{"", "2026-03-01T12:00:00Z", "0000-01-01T00:00:00+01:00",
		`{"expiry":"2026-03-01T12:00:00Z","user":"bob","message":"known"}`, `{"user":"bob"}`,
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		got, err := ParseSnooze(s)
		if err != nil {
			return
		}
		back, err := ParseSnooze(FormatSnooze(got))
		require.NoError(t, err)
		require.Equal(t, got, back)
	})
}

func FuzzParseTrace(f *testing.F) {
	for _, s := range []string{"", "[]", "[{}]",
		`[{"apiVersion":"apps/v1","kind":"Deployment","name":"web","generation":2,"user":"alice","timestamp":"2026-03-01T12:00:00Z","labels":{"ticket":"T-1"}}]`,
		`[{"apiVersion":"apps/v1","kind":"ReplicaSet","name":"w","generation":1,"user":"","requestUID":"u","timestamp":"2026-03-01T12:00:00Z","labels":{}}]`,
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		got, err := ParseTrace(s)
		if err != nil {
			return
		}
		back, err := ParseTrace(FormatTrace(got))
		require.NoError(t, err)
		require.Equal(t, got, back)
	})
}
