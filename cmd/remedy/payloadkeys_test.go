package main

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/remedy-dev/remedy/internal/devenv"
)

// A part without payload keys refuses to start, naming the flag and the Secret.
func TestPayloadKeysRequired(t *testing.T) {
	keys := filepath.Join(t.TempDir(), "keys")
	require.NoError(t, devenv.NewPayloadKeys(keys, "k1"))
	for name, tc := range map[string]struct {
		flags temporalFlags
		err   []string
	}{
		"no keys":           {temporalFlags{}, []string{"--payload-keys is required", "Secret remedy-payload-keys", "REMEDY_PAYLOAD_KEYS"}},
		"missing directory": {temporalFlags{payloadKeys: filepath.Join(keys, "nope")}, []string{"--payload-keys (Secret remedy-payload-keys)", "read payload key directory"}},
		"bad cutoff":        {temporalFlags{payloadKeys: keys, unsealedBefore: "yesterday"}, []string{"--payload-unsealed-before: want an RFC 3339 time"}},
		"keys":              {temporalFlags{payloadKeys: keys}, nil},
		"keys and cutoff":   {temporalFlags{payloadKeys: keys, unsealedBefore: "2026-11-28T19:00:00Z"}, nil},
	} {
		t.Run(name, func(t *testing.T) {
			f := tc.flags
			dc, fc, err := f.converters()
			for _, want := range tc.err {
				require.ErrorContains(t, err, want)
			}
			if tc.err != nil {
				return
			}
			require.NoError(t, err)
			require.NotNil(t, dc)
			require.NotNil(t, fc)
			assert.Equal(t, "k1", f.keys.Active())
			p, err := dc.ToPayload("secret-value")
			require.NoError(t, err)
			assert.NotContains(t, string(p.Data), "secret-value")
			if f.unsealedBefore != "" {
				assert.Equal(t, time.Date(2026, 11, 28, 19, 0, 0, 0, time.UTC), f.cutoff)
			}
		})
	}
}
