package seal

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	commonpb "go.temporal.io/api/common/v1"
	"go.temporal.io/sdk/converter"
)

func ring(t *testing.T, active string, ids ...string) *Keyring {
	t.Helper()
	keys := map[string][]byte{}
	for _, id := range ids {
		keys[id] = bytes.Repeat([]byte(id[:1]), KeySize)
	}
	k, err := NewKeyring(active, keys)
	require.NoError(t, err)
	return k
}

type decision struct {
	Approved bool   `json:"approved"`
	Approver string `json:"approver"`
	by       Person
}

func (d *decision) SignedBy(p Person) { d.Approver, d.by = p.Username, p }

func TestRoundTripAndRotation(t *testing.T) {
	old := DataConverter(ring(t, "a", "a"))
	p, err := old.ToPayload(map[string]string{"x": "secret-value"})
	require.NoError(t, err)
	assert.NotContains(t, string(p.Data), "secret-value", "sealed data is not readable")
	assert.Equal(t, "a", string(p.Metadata[metaKey]))

	// After rotation (b active, a kept), a payload sealed under a still opens.
	rotated := DataConverter(ring(t, "b", "a", "b"))
	var got map[string]string
	require.NoError(t, rotated.FromPayload(p, &got))
	assert.Equal(t, "secret-value", got["x"])
	q, err := rotated.ToPayload("new")
	require.NoError(t, err)
	assert.Equal(t, "b", string(q.Metadata[metaKey]))
}

func TestRefusals(t *testing.T) {
	dc := DataConverter(ring(t, "a", "a"))
	sealed, err := dc.ToPayload("v")
	require.NoError(t, err)
	tampered := &commonpb.Payload{Metadata: sealed.Metadata, Data: append([]byte{}, sealed.Data...)}
	tampered.Data[len(tampered.Data)-1] ^= 1
	relabelled := &commonpb.Payload{Metadata: map[string][]byte{}, Data: sealed.Data}
	for k, v := range sealed.Metadata {
		relabelled.Metadata[k] = v
	}
	relabelled.Metadata[metaOrigin] = []byte(OriginPerson)
	plain, err := converter.GetDefaultDataConverter().ToPayload("v")
	require.NoError(t, err)
	foreign, err := DataConverter(ring(t, "z", "z")).ToPayload("v")
	require.NoError(t, err)
	sameIDOtherKey, err := DataConverter(func() *Keyring {
		k, err := NewKeyring("a", map[string][]byte{"a": bytes.Repeat([]byte{9}, KeySize)})
		require.NoError(t, err)
		return k
	}()).ToPayload("v")
	require.NoError(t, err)

	for name, tc := range map[string]struct {
		p    *commonpb.Payload
		kind string
	}{
		"unsealed":          {plain, RefusedUnsealed},
		"foreign key":       {foreign, RefusedUnknownKey},
		"same ID other key": {sameIDOtherKey, RefusedForged},
		"tampered":          {tampered, RefusedForged},
		"origin relabelled": {relabelled, RefusedForged},
	} {
		t.Run(name, func(t *testing.T) {
			var s string
			err := dc.FromPayload(tc.p, &s)
			var r *RefusedError
			require.ErrorAs(t, err, &r)
			assert.Equal(t, tc.kind, r.Kind)
		})
	}
}

func TestPersonPayloads(t *testing.T) {
	k := ring(t, "a", "a")
	dc := DataConverter(k)
	body, err := converter.GetDefaultDataConverter().ToPayload(map[string]any{"approved": true, "approver": "root"})
	require.NoError(t, err)
	signed, err := k.SealPerson(body, Person{Username: "alice", Groups: []string{"oncall"}})
	require.NoError(t, err)

	var d decision
	require.NoError(t, dc.FromPayload(signed, &d))
	assert.True(t, d.Approved)
	assert.Equal(t, "alice", d.Approver, "the authenticated person replaces the name the body gave")
	assert.Equal(t, []string{"oncall"}, d.by.Groups)

	// Into anything that is not a person's channel, refused.
	var anything map[string]any
	var r *RefusedError
	require.ErrorAs(t, dc.FromPayload(signed, &anything), &r)
	assert.Equal(t, RefusedPerson, r.Kind)
}

func TestLoadKeyring(t *testing.T) {
	write := func(t *testing.T, files map[string]string) string {
		dir := t.TempDir()
		for n, c := range files {
			require.NoError(t, os.WriteFile(filepath.Join(dir, n), []byte(c), 0o600))
		}
		return dir
	}
	key := string(bytes.Repeat([]byte{1}, KeySize))
	for name, tc := range map[string]struct {
		files map[string]string
		err   string
	}{
		"raw key":       {map[string]string{"k1": key, ActiveFile: "k1\n"}, ""},
		"base64 key":    {map[string]string{"k1": "AQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQE=\n", ActiveFile: "k1"}, ""},
		"no active":     {map[string]string{"k1": key}, "no active payload key"},
		"active absent": {map[string]string{"k1": key, ActiveFile: "k2"}, `"k2" is not among the keys (k1)`},
		"short key":     {map[string]string{"k1": "short", ActiveFile: "k1"}, "32 random bytes"},
		"bad id":        {map[string]string{"K_1": key, ActiveFile: "K_1"}, "lower-case"},
		"empty":         {map[string]string{}, "no payload keys"},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := LoadKeyring(write(t, tc.files))
			if tc.err == "" {
				require.NoError(t, err)
				return
			}
			require.ErrorContains(t, err, tc.err)
		})
	}
	_, err := LoadKeyring("")
	require.ErrorContains(t, err, "--payload-keys")
}
